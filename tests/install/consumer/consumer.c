/*
 * An installed cco's user: checks that the library it runs with is the
 * version its headers name, creates a communicator (from ccorun's
 * environment, or alone as one rank), a device communicator read through
 * the device headers, and meets the other ranks in a barrier. Prints one
 * line ending in "ok" and exits 0 when everything holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cco/cco.h"
#include "device_part.h"

static int ok(ccoResult_t res, const char* call, const ccoComm* comm) {
  if (res == ccoSuccess) return 1;
  fprintf(stderr, "consumer: %s failed: %s (%s)\n", call, ccoGetErrorString(res), ccoGetLastError(comm));
  return 0;
}
#define OK(call) ok((call), #call, comm)

static int create_comm(ccoComm** out) {
  const ccoComm* comm = NULL; /* none yet: OK() reports the thread's last error */
  if (getenv("CCO_UNIQUE_ID")) return OK(ccoCommCreateFromEnv(0, out));
  ccoUniqueId id;
  return OK(ccoGetUniqueId(&id)) && OK(ccoCommCreate(id, 1, 0, 0, out));
}

int main(void) {
  ccoComm* comm = NULL;
  int version = 0;
  if (!OK(ccoGetVersion(&version))) return 1;
  if (version != CCO_VERSION) {
    fprintf(stderr, "consumer: headers say version %d, the library %d\n", CCO_VERSION, version);
    return 1;
  }
  if (!create_comm(&comm)) return 1;

  int rank = -1, nRanks = 0;
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc)); /* magic 0: not created */
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.gdaConnectionType = ccoGdaConnectionNone;
  int good = OK(ccoCommRank(comm, &rank)) && OK(ccoCommSize(comm, &nRanks)) &&
             OK(ccoDevCommCreate(comm, &reqs, &dc));
  good = good && consumer_own_world_rank(&dc) == rank && OK(ccoBarrierAll(comm));
  if (dc.magic == CCO_DEV_COMM_MAGIC && !OK(ccoDevCommDestroy(comm, &dc))) good = 0;
  if (!OK(ccoCommDestroy(comm))) good = 0;

  printf("consumer rank %d/%d: libcco %d.%d.%d, communicator, device communicator, barrier: %s\n", rank,
         nRanks, version / 10000, version / 100 % 100, version % 100, good ? "ok" : "FAILED");
  return good ? 0 : 1;
}
