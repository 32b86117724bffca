/*
 * A rank killed mid-job: every surviving rank must leave its collective with
 * ccoRemoteError promptly (well before CCO_BOOTSTRAP_TIMEOUT), report it as
 * the async error, fail fast afterwards, and destroy cleanly.
 *
 *   mp_kill [nRanks]        (launches its own ranks with fork)
 */
#include <signal.h>

#include "mp_util.h"

#define VICTIM_ITER 50
#define PROMPT_S 3.0 /* "promptly": far below the 60 s timeout set below */

typedef struct {
  int victim;
  int allgather; /* 0: barrier loop, 1: 256 KiB allgather loop */
} kill_case;

/* Exit codes of survivors: 0 ok; 10 no error; 11 wrong code; 12 too slow;
 * 13 later calls not failing fast; 14 async error wrong; 15 create failed. */
static int rank_main(int rank, int nRanks, ccoUniqueId id, void* arg) {
  const kill_case* kc = arg;
  ccoComm* comm = NULL;
  if (ccoCommCreate(id, nRanks, rank, 0, &comm) != ccoSuccess) return 15;
  size_t bytes = 256 * 1024;
  char* buf = malloc((size_t)nRanks * bytes);
  if (!buf) return 16;
  memset(buf, rank, (size_t)nRanks * bytes);
  ccoResult_t res = ccoSuccess;
  double callStart = 0;
  for (int i = 0; i < 100000 && res == ccoSuccess; i++) {
    if (rank == kc->victim && i == VICTIM_ITER) raise(SIGKILL);
    callStart = mp_now();
    res = kc->allgather ? ccoBootstrapAllGather(comm, buf + (size_t)rank * bytes, buf, bytes)
                        : ccoBarrierAll(comm);
  }
  double waited = mp_now() - callStart;
  int code = 0;
  if (res == ccoSuccess) code = 10;
  else if (res != ccoRemoteError) code = 11;
  else if (waited > PROMPT_S) code = 12;
  fprintf(stderr, "  rank %d: left after %.3f s with %s: %s\n", rank, waited,
          ccoGetErrorString(res), ccoGetLastError(comm));
  double t = mp_now();
  if (code == 0 && (ccoBarrierAll(comm) == ccoSuccess || mp_now() - t > 0.5)) code = 13;
  ccoResult_t async = ccoSuccess;
  if (code == 0 && (ccoCommGetAsyncError(comm, &async) != ccoSuccess || async != ccoRemoteError))
    code = 14;
  free(buf);
  if (ccoCommDestroy(comm) != ccoSuccess && code == 0) code = 17;
  return code;
}

static void run_case(int nRanks, kill_case kc, const char* what) {
  ccoUniqueId id;
  MP_CHECK(MP_OK(ccoGetUniqueId(&id)), "id: %s", ccoGetLastError(NULL));
  pid_t pids[64];
  int codes[64];
  double t0 = mp_now();
  mp_spawn(pids, 0, nRanks, nRanks, id, rank_main, &kc);
  mp_wait(pids, nRanks, 30.0, codes);
  double took = mp_now() - t0;
  for (int r = 0; r < nRanks; r++) {
    if (r == kc.victim)
      MP_CHECK(codes[r] == 128 + SIGKILL, "%s: victim rank %d exit %d", what, r, codes[r]);
    else
      MP_CHECK(codes[r] == 0, "%s: survivor rank %d exit code %d", what, r, codes[r]);
  }
  printf("%s, %d ranks, victim %d: job over in %.2f s\n", what, nRanks, kc.victim, took);
}

int main(int argc, char** argv) {
  int nRanks = argc > 1 ? atoi(argv[1]) : 4;
  if (nRanks < 2 || nRanks > 64) return 2;
  setenv("CCO_BOOTSTRAP_TIMEOUT", "60", 1); /* before the first cco call */
  run_case(nRanks, (kill_case){nRanks - 1, 0}, "killed during barriers");
  run_case(nRanks, (kill_case){0, 0}, "root killed during barriers");
  run_case(nRanks, (kill_case){nRanks / 2, 1}, "killed during allgathers");
  return mp_finish("mp_kill");
}
