/*
 * Symmetric memory and windows, one rank of a job started by ccorun:
 *
 *   ccorun -n N mp_windows [--hosts H] [--cycles K]
 *
 * Symmetric offsets, peer writes through ccoGetPeerPtr and through the
 * descriptor's formula, mismatched and bad registrations failing on every
 * rank with nothing mapped, ccoMemFree misuse, slot exhaustion, K
 * register/deregister cycles without growth in fds, mappings (a few the
 * allocator maps meanwhile allowed, none per cycle) or memory,
 * owning windows placed alike on slots that differ by rank, two
 * communicators sharing a buffer through import, windows deregistered on
 * a failed communicator (kept mapped until its destroy), and destroy with
 * live windows. --hosts H plays H hosts (CCO_HOSTID): windows map LSA peers only.
 */
#include <stdint.h>

#include "mp_util.h"

static int g_rank, g_size, g_lsaRank, g_lsaSize, g_hosts = 1;
static ccoComm* g_comm;

#define OK(call) MP_CHECK((call) == ccoSuccess, "%s: %s", #call, ccoGetLastError(g_comm))

static int count_lines(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  int n = 0, c;
  while ((c = fgetc(f)) != EOF) n += c == '\n';
  fclose(f);
  return n;
}

static long rss_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld", &v) == 1) break;
  if (f) fclose(f);
  return v;
}

static int lsa_world(int lsa) { /* world rank of LSA rank `lsa` on this host */
  int w = -1;
  ccoTeamRankToWorld(g_comm, ccoTeamLsa, lsa, &w);
  return w;
}

/* Every rank writes its block into every LSA peer's copy of the window,
 * then each checks it received every block. */
static void check_peer_writes(ccoWindow_t win, char* local, size_t block) {
  for (int p = 0; p < g_lsaSize; p++) {
    void* peerPtr = NULL;
    OK(ccoGetPeerPtr(g_comm, local + (size_t)g_lsaRank * block, lsa_world(p), &peerPtr));
    /* The descriptor's formula gives the same address. */
    ccoWindowDevice d;
    OK(ccoWindowGetInfo(g_comm, win, &d, NULL));
    char* formula = (char*)(uintptr_t)d.winBase + (size_t)p * (d.stride4G * (1ull << 32)) +
                    (size_t)g_lsaRank * block;
    MP_CHECK(formula == peerPtr, "descriptor formula %p vs ccoGetPeerPtr %p", (void*)formula, peerPtr);
    if (peerPtr) memset(peerPtr, 'A' + g_rank % 26, block);
  }
  OK(ccoBarrierAll(g_comm));
  size_t bad = 0;
  for (int p = 0; p < g_lsaSize; p++)
    for (size_t i = 0; i < block; i++) bad += local[(size_t)p * block + i] != 'A' + lsa_world(p) % 26;
  MP_CHECK(bad == 0, "%zu bytes wrong after peer writes", bad);
  OK(ccoBarrierAll(g_comm));
}

static void test_symmetric_window(void) {
  void* ptrs[3];
  size_t sizes[3] = {4096, 1 << 20, 3 * 4096 + 1};
  for (int i = 0; i < 3; i++) OK(ccoMemAlloc(g_comm, sizes[i], &ptrs[i]));
  void* base;
  size_t slot;
  OK(ccoCommFlatVa(g_comm, &base, &slot));
  MP_CHECK(slot % (4ull << 30) == 0, "slot size %zu is not a multiple of 4 GiB", slot);
  uint64_t off[3], all[3 * 64];
  for (int i = 0; i < 3; i++) off[i] = (uint64_t)((char*)ptrs[i] - ((char*)base + (size_t)g_lsaRank * slot));
  OK(ccoBootstrapAllGather(g_comm, off, all, sizeof(off)));
  for (int r = 0; r < g_size; r++)
    MP_CHECK(!memcmp(&all[3 * r], off, sizeof(off)), "rank %d has other offsets", r);
  ccoWindow_t win = NULL;
  size_t block = 8192;
  OK(ccoWindowRegister(g_comm, ptrs[1], block * (size_t)g_lsaSize, &win));
  ccoWindowDevice d;
  OK(ccoWindowGetInfo(g_comm, win, &d, NULL));
  MP_CHECK(d.magic == CCO_WINDOW_MAGIC && d.lsaRank == g_lsaRank && d.lsaSize == g_lsaSize &&
               d.rank == g_rank && d.offset == off[1] && (uint64_t)d.stride4G << 32 == slot,
           "descriptor fields");
  /* On the host platform the handle is host memory: it is the descriptor. */
  MP_CHECK(!memcmp(win, &d, sizeof(d)), "device copy differs from the host copy");
  check_peer_writes(win, ptrs[1], block);
  MP_CHECK(ccoMemFree(g_comm, ptrs[1]) == ccoInvalidUsage, "free under a live window");
  /* A second window on the same allocation shares the peer mappings. */
  ccoWindow_t win2 = NULL;
  OK(ccoWindowRegister(g_comm, (char*)ptrs[1] + 4096, 4096, &win2));
  OK(ccoWindowDeregister(g_comm, win));
  void* peerPtr = NULL;
  OK(ccoGetPeerPtr(g_comm, (char*)ptrs[1] + 4096, lsa_world((g_lsaRank + 1) % g_lsaSize), &peerPtr));
  if (peerPtr) ((volatile char*)peerPtr)[0] = 1; /* still mapped: must not fault */
  OK(ccoWindowDeregister(g_comm, win2));
  MP_CHECK(ccoWindowDeregister(g_comm, win2) == ccoInvalidArgument, "double deregister");
  MP_CHECK(ccoGetPeerPtr(g_comm, ptrs[1], g_rank, &peerPtr) == ccoInvalidArgument,
           "peer pointer outside windows");
  for (int i = 0; i < 3; i++) OK(ccoMemFree(g_comm, ptrs[i]));
  OK(ccoBarrierAll(g_comm));
}

static void test_bad_registrations(void) {
  if (g_size < 2) return; /* one rank cannot disagree with itself */
  void* p = NULL;
  OK(ccoMemAlloc(g_comm, 1 << 16, &p));
  ccoWindow_t win = NULL;
  /* Sizes differ on rank 0: every rank fails, nothing is mapped. */
  ccoResult_t r = ccoWindowRegister(g_comm, p, g_rank == 0 ? 4096 : 8192, &win);
  MP_CHECK(r == ccoInvalidUsage, "mismatched size: %s", ccoGetErrorString(r));
  MP_CHECK(strstr(ccoGetLastError(g_comm), "mismatch") != NULL, "message: %s", ccoGetLastError(g_comm));
  /* A bad pointer on the last rank: it gets ccoInvalidArgument, the others ccoInvalidUsage. */
  int bad = g_size - 1;
  int local = 0;
  r = ccoWindowRegister(g_comm, g_rank == bad ? (void*)&local : p, 4096, &win);
  MP_CHECK(r == (g_rank == bad ? ccoInvalidArgument : ccoInvalidUsage), "bad pointer: %s",
           ccoGetErrorString(r));
  /* Offsets differ (rank 0 registers 4 KiB further in). */
  r = ccoWindowRegister(g_comm, (char*)p + (g_rank == 0 ? 4096 : 0), 4096, &win);
  MP_CHECK(r == ccoInvalidUsage, "mismatched offset: %s", ccoGetErrorString(r));
  /* The job is still in step: a correct registration works. */
  OK(ccoWindowRegister(g_comm, p, 4096 * (size_t)g_lsaSize, &win));
  check_peer_writes(win, p, 4096);
  OK(ccoWindowDeregister(g_comm, win));
  OK(ccoMemFree(g_comm, p));
}

static void test_free_misuse_and_exhaustion(void) {
  void* p = NULL;
  int local;
  OK(ccoMemAlloc(g_comm, 4096, &p));
  MP_CHECK(ccoMemFree(g_comm, (char*)p + 64) == ccoInvalidArgument, "interior pointer");
  MP_CHECK(ccoMemFree(g_comm, &local) == ccoInvalidArgument, "foreign pointer");
  MP_CHECK(ccoMemFree(g_comm, NULL) == ccoInvalidArgument, "NULL");
  OK(ccoMemFree(g_comm, p));
  MP_CHECK(ccoMemFree(g_comm, p) == ccoInvalidArgument, "double free");
  MP_CHECK(ccoMemAlloc(g_comm, 0, &p) == ccoInvalidArgument, "size 0");
  void* base;
  size_t slot;
  OK(ccoCommFlatVa(g_comm, &base, &slot));
  MP_CHECK(ccoMemAlloc(g_comm, slot + 1, &p) == ccoOutOfMemory, "more than a slot");
  /* Fill the slot with 1 GiB blocks (memfds are sparse: nothing is touched). */
  int fds0 = mp_count_fds();
  void* blocks[64];
  int n = 0;
  while (n < 64 && ccoMemAlloc(g_comm, 1ull << 30, &blocks[n]) == ccoSuccess) n++;
  MP_CHECK(n == (int)(slot >> 30), "%d GiB blocks fit a slot of %zu GiB", n, slot >> 30);
  MP_CHECK(ccoMemAlloc(g_comm, 4096, &p) == ccoOutOfMemory, "full slot");
  MP_CHECK(mp_count_fds() == fds0 + n, "a failed allocation left an fd behind");
  for (int i = 0; i < n; i++) OK(ccoMemFree(g_comm, blocks[i]));
  MP_CHECK(mp_count_fds() == fds0, "fds after freeing");
}

static void test_cycles(int cycles) {
  void* warm = NULL;
  ccoWindow_t win = NULL;
  OK(ccoWindowRegisterAlloc(g_comm, 1 << 16, &win, &warm));
  OK(ccoWindowDeregister(g_comm, win));
  int fds0 = mp_count_fds(), maps0 = count_lines("/proc/self/maps");
  long rss0 = rss_kib();
  int failures = 0;
  for (int i = 0; i < cycles; i++) {
    void* p = NULL;
    failures += ccoWindowRegisterAlloc(g_comm, 1 << 16, &win, &p) != ccoSuccess;
    if (i % 100 == 0) ((volatile char*)p)[0] = (char)i;
    failures += ccoWindowDeregister(g_comm, win) != ccoSuccess;
  }
  int fds1 = mp_count_fds(), maps1 = count_lines("/proc/self/maps");
  long rss1 = rss_kib();
  MP_CHECK(failures == 0, "%d failures in %d cycles", failures, cycles);
  MP_CHECK(fds1 == fds0, "fds %d -> %d", fds0, fds1);
  /* A leaked mapping per cycle would add `cycles`; the allocator and the
   * runtime's threads may map a few regions of their own meanwhile (4 once
   * under ASan with three tests at a time). */
  MP_CHECK(maps1 - maps0 < cycles / 10, "mappings %d -> %d over %d cycles", maps0, maps1, cycles);
  MP_CHECK(rss1 - rss0 < 4096, "rss grew by %ld KiB", rss1 - rss0);
  if (g_rank == 0)
    printf("%d register/deregister cycles: fds %d->%d, mappings %d->%d, rss %ld->%ld KiB\n", cycles,
           fds0, fds1, maps0, maps1, rss0, rss1);
}

/* The owning registrations place their memory where it is free on every
 * rank: slots made different by rank-dependent local allocations (what a
 * rank-dependent free order leaves behind) still give symmetric windows.
 * When one rank has no room, every rank fails with ccoOutOfMemory. */
static void test_placement_ignores_slot_differences(void) {
  void* local[8];
  int nlocal = g_rank % 4;
  for (int i = 0; i < nlocal; i++) OK(ccoMemAlloc(g_comm, 64 << 10, &local[i]));
  /* Free every other block, so ranks also differ in their holes; rank 1
   * and up keep a block at offset 0, which rank 0 has free. */
  for (int i = 1; i < nlocal; i += 2) OK(ccoMemFree(g_comm, local[i]));
  ccoWindow_t win = NULL;
  void* p = NULL;
  size_t block = 4096;
  OK(ccoWindowRegisterAlloc(g_comm, block * (size_t)g_lsaSize, &win, &p));
  if (win) {
    ccoWindowDevice d;
    OK(ccoWindowGetInfo(g_comm, win, &d, NULL));
    uint64_t all[64];
    OK(ccoBootstrapAllGather(g_comm, &d.offset, all, sizeof(uint64_t)));
    for (int r = 0; r < g_size; r++)
      MP_CHECK(all[r] == d.offset, "rank %d placed the window at %#llx, this rank at %#llx", r,
               (unsigned long long)all[r], (unsigned long long)d.offset);
    check_peer_writes(win, p, block);
    OK(ccoWindowDeregister(g_comm, win));
  }
  for (int i = 0; i < nlocal; i += 2) OK(ccoMemFree(g_comm, local[i]));
  /* Rank 0's slot full: nobody gets the window, nothing stays allocated. */
  void* base;
  size_t slot;
  OK(ccoCommFlatVa(g_comm, &base, &slot));
  void* filler = NULL;
  if (g_rank == 0) OK(ccoMemAlloc(g_comm, slot, &filler));
  int fds0 = mp_count_fds();
  ccoResult_t r = ccoWindowRegisterAlloc(g_comm, 4096, &win, &p);
  MP_CHECK(r == ccoOutOfMemory, "window with rank 0 full: %s (%s)", ccoGetErrorString(r),
           ccoGetLastError(g_comm));
  MP_CHECK(mp_count_fds() == fds0, "a failed placement left an fd behind");
  if (filler) OK(ccoMemFree(g_comm, filler));
  /* And the job is still in step. */
  OK(ccoWindowRegisterAlloc(g_comm, 4096, &win, &p));
  OK(ccoWindowDeregister(g_comm, win));
  OK(ccoBarrierAll(g_comm));
}

/* A second communicator imports a buffer of the first: same memory. */
static void test_two_comms_import(void) {
  ccoUniqueId id2, ids[64];
  if (g_rank == 0) OK(ccoGetUniqueId(&id2));
  OK(ccoBootstrapAllGather(g_comm, &id2, ids, sizeof(id2)));
  ccoComm* comm2 = NULL;
  OK(ccoCommCreate(ids[0], g_size, g_rank, 0, &comm2));
  if (!comm2) return;
  int fds0 = mp_count_fds();
  void* p1 = NULL;
  size_t size = 1 << 16;
  OK(ccoMemAlloc(g_comm, size, &p1));
  ccoWindow_t win2 = NULL;
  void* p2 = NULL;
  OK(ccoWindowRegisterExternal(comm2, p1, size, &win2, &p2));
  MP_CHECK(p2 && p2 != p1, "the import has its own address in the second flat VA");
  if (p2) {
    memset(p1, 0x5a, size);
    MP_CHECK(((unsigned char*)p2)[size - 1] == 0x5a, "import does not alias the buffer");
    OK(ccoBarrierAll(comm2)); /* everyone checked before anyone writes to peers */
    /* Peers see it through the second communicator's window. */
    char* mine = p2;
    for (int p = 0; p < g_lsaSize; p++) {
      void* peer = NULL;
      int w = -1;
      ccoTeamRankToWorld(comm2, ccoTeamLsa, p, &w);
      OK(ccoGetPeerPtr(comm2, mine + g_lsaRank * 64, w, &peer));
      if (peer) memset(peer, g_rank + 1, 64);
    }
    OK(ccoBarrierAll(comm2));
    size_t bad = 0;
    for (int p = 0; p < g_lsaSize; p++)
      for (int i = 0; i < 64; i++) bad += ((char*)p1)[p * 64 + i] != lsa_world(p) + 1;
    MP_CHECK(bad == 0, "%zu bytes wrong through the import", bad);
  }
  MP_CHECK(ccoMemImport(comm2, (char*)p1 + 4096, 4096, &p2) == ccoInvalidArgument,
           "import of an interior pointer");
  int stack;
  MP_CHECK(ccoMemImport(comm2, &stack, 4096, &p2) == ccoInvalidArgument, "import of foreign memory");
  /* A bad external window: the rank that passed it gets ccoInvalidArgument,
   * the others ccoInvalidUsage; passed everywhere, ccoInvalidArgument. */
  ccoWindow_t bad = NULL;
  ccoResult_t r = ccoWindowRegisterExternal(comm2, &stack, 4096, &bad, &p2);
  MP_CHECK(r == ccoInvalidArgument, "foreign external window everywhere: %s", ccoGetErrorString(r));
  if (g_size > 1) {
    void* p3 = NULL;
    OK(ccoMemAlloc(g_comm, size, &p3));
    int last = g_size - 1;
    r = ccoWindowRegisterExternal(comm2, g_rank == last ? (void*)&stack : p3, size, &bad, &p2);
    MP_CHECK(r == (g_rank == last ? ccoInvalidArgument : ccoInvalidUsage),
             "foreign external window on rank %d: %s", last, ccoGetErrorString(r));
    OK(ccoMemFree(g_comm, p3));
  }
  OK(ccoBarrierAll(comm2));
  /* Destroy with the window still registered: everything goes. */
  OK(ccoCommDestroy(comm2));
  MP_CHECK(((unsigned char*)p1)[0] != 0 || 1, "buffer survives");
  OK(ccoMemFree(g_comm, p1));
  int fds1 = mp_count_fds();
  /* comm2's own sockets and memory are gone too (fds0 counted after it was created). */
  MP_CHECK(fds1 < fds0, "fds %d with comm2 alive, %d after its destroy", fds0, fds1);
}

/* Whether some mapping of this process covers addr. */
static int mapped(const void* addr) {
  FILE* f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  while (f && !found && fgets(line, sizeof(line), f)) {
    unsigned long long lo, hi;
    if (sscanf(line, "%llx-%llx", &lo, &hi) == 2) found = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
  }
  if (f) fclose(f);
  return found;
}

/* Windows deregistered on a failed communicator: a peer that has not seen
 * the failure yet may still be writing into them over the network, so the
 * memory stays mapped (deregistration succeeds, the handle is gone) until
 * ccoCommDestroy, which then releases it with everything else. */
static void test_deregister_after_failure(void) {
  ccoUniqueId id2, ids[64];
  if (g_rank == 0) OK(ccoGetUniqueId(&id2));
  OK(ccoBootstrapAllGather(g_comm, &id2, ids, sizeof(id2)));
  int fds0 = mp_count_fds();
  ccoComm* comm2 = NULL;
  OK(ccoCommCreate(ids[0], g_size, g_rank, 0, &comm2));
  if (!comm2) return;
  const size_t size = 1 << 16;
  ccoWindow_t owned = NULL, onAlloc = NULL;
  void *p = NULL, *user = NULL;
  OK(ccoWindowRegisterAlloc(comm2, size, &owned, &p));
  OK(ccoMemAlloc(comm2, size, &user));
  OK(ccoWindowRegister(comm2, user, size, &onAlloc));
  OK(ccoBarrierAll(comm2)); /* every rank registered before any fails */
  OK(ccoCommAbort(comm2));
  MP_CHECK(ccoWindowDeregister(comm2, owned) == ccoSuccess, "deregister on a failed communicator: %s",
           ccoGetLastError(comm2));
  MP_CHECK(ccoWindowDeregister(comm2, onAlloc) == ccoSuccess, "deregister on a failed communicator: %s",
           ccoGetLastError(comm2));
  /* What a late network write does: the memory is still there. */
  MP_CHECK(p && mapped(p) && user && mapped(user), "parked windows' memory unmapped before ccoCommDestroy");
  if (p) memset(p, 0x3c, size);
  if (user) memset(user, 0x3c, size);
  MP_CHECK(ccoWindowDeregister(comm2, owned) == ccoInvalidArgument, "a parked window deregistered twice");
  MP_CHECK(ccoMemFree(comm2, user) == ccoSuccess, "ccoMemFree under a parked window: %s", ccoGetLastError(comm2));
  MP_CHECK(ccoMemFree(comm2, user) == ccoInvalidArgument, "ccoMemFree twice under a parked window");
  OK(ccoCommDestroy(comm2));
  MP_CHECK(mp_count_fds() == fds0, "fds %d after destroying the failed communicator, %d before", mp_count_fds(),
           fds0);
  /* The sanitizers' allocators map memory of their own meanwhile, so the
   * windows' own addresses are checked, not the count of mappings. */
  MP_CHECK(!mapped(p) && !mapped(user), "parked windows' memory still mapped after ccoCommDestroy");
}

int main(int argc, char** argv) {
  int cycles = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--hosts")) g_hosts = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--cycles")) cycles = atoi(argv[i + 1]);
  }
  const char* r = getenv("CCO_RANK");
  const char* n = getenv("CCO_NRANKS");
  if (!r || !n) return 2;
  int envRank = atoi(r), envSize = atoi(n);
  if (g_hosts < 1 || envSize % g_hosts) return 2;
  char hostId[32];
  snprintf(hostId, sizeof(hostId), "vhost%d", envRank / (envSize / g_hosts));
  if (g_hosts > 1) setenv("CCO_HOSTID", hostId, 1);
  setenv("CCO_PLATFORM", "host", 0);
  if (ccoCommCreateFromEnv(0, &g_comm) != ccoSuccess) {
    fprintf(stderr, "create: %s\n", ccoGetLastError(NULL));
    return 1;
  }
  ccoCommRank(g_comm, &g_rank);
  ccoCommSize(g_comm, &g_size);
  ccoCommLsaRank(g_comm, &g_lsaRank);
  ccoCommLsaSize(g_comm, &g_lsaSize);
  test_symmetric_window();
  test_bad_registrations();
  test_free_misuse_and_exhaustion();
  test_cycles(cycles);
  test_placement_ignores_slot_differences();
  test_two_comms_import();
  test_deregister_after_failure();
  if (g_hosts > 1) {
    void* p = NULL;
    ccoWindow_t win = NULL;
    OK(ccoWindowRegisterAlloc(g_comm, 4096, &win, &p));
    int other = (g_rank + g_size / g_hosts) % g_size; /* a rank on another host */
    void* peer = NULL;
    MP_CHECK(ccoGetPeerPtr(g_comm, p, other, &peer) == ccoInvalidArgument,
             "peer pointer to another host");
    /* Leave it registered: destroy releases it. */
  }
  OK(ccoBarrierAll(g_comm));
  OK(ccoCommDestroy(g_comm));
  char name[32];
  snprintf(name, sizeof(name), "mp_windows rank %d", g_rank);
  return mp_finish(name);
}
