/*
 * mp_gda step "tclass": the traffic class is fixed by the device
 * communicator that opens the network engine (--tc, 0 by default).
 *
 *  tclass   a second device communicator asking for another class is
 *           refused on every rank with ccoInvalidUsage, naming
 *           gdaTrafficClass, and the communicator stays usable: one asking
 *           for the same class, or for none (0), is created and destroyed.
 *           test_gda.sh checks, from the INFO log, that the class of --tc
 *           reached the engine's hints.
 */
#include "gda.h"

/* A device communicator like the main one, with traffic class tc. */
static ccoResult_t create_with(rank_ctx* c, uint32_t tc, ccoDevComm* dc) {
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = g_opt.conn;
  reqs.gdaTrafficClass = tc;
  return ccoDevCommCreate(c->comm, &reqs, dc);
}

void test_tclass(rank_ctx* c) {
  if (!step_selected("tclass") || !has_gda(c)) return;
  watchdog_arm("tclass", 60);
  barrier(c);
  uint32_t other = g_opt.tc == 4 ? 8 : 4;
  ccoDevComm dc;
  ccoResult_t r = create_with(c, other, &dc);
  CHECK(r == ccoInvalidUsage && strstr(ccoGetLastError(c->comm), "gdaTrafficClass"),
        "rank %d: tclass: a device communicator with class %u on an engine opened with %u: %s (%s)", c->rank,
        other, g_opt.tc, ccoGetErrorString(r), ccoGetLastError(c->comm));
  if (r == ccoSuccess) MUST(ccoDevCommDestroy(c->comm, &dc));
  uint32_t same[2] = {g_opt.tc, 0};
  for (int i = 0; i < 2; i++) {
    r = create_with(c, same[i], &dc);
    CHECK(r == ccoSuccess, "rank %d: tclass: a device communicator with class %u: %s (%s)", c->rank, same[i],
          ccoGetErrorString(r), ccoGetLastError(c->comm));
    if (r == ccoSuccess) MUST(ccoDevCommDestroy(c->comm, &dc));
  }
  if (c->rank == 0)
    printf("tclass: engine opened with gdaTrafficClass %u; class %u refused, %u and 0 accepted\n", g_opt.tc,
           other, g_opt.tc);
  barrier(c);
}
