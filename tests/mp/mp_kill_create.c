/*
 * A rank that dies or fails while the job forms: every other rank must fail
 * within 1 s, naming the rank and the cause, not wait for
 * CCO_BOOTSTRAP_TIMEOUT (20 s here).
 *
 *   - a joiner killed while the root waits for another rank;
 *   - a joiner that dies once it has the peer table (during link setup);
 *   - a joiner that fails before it can join (no usable interface);
 *   - the root killed while the joiners wait for the table;
 *   - a joiner that starts only after the root has given up (the root
 *     answers it with the cause for a while, instead of closing its port
 *     on it, which it would take for a root not listening yet).
 *
 *   mp_kill_create            (launches its own ranks with fork)
 */
#include <signal.h>
#include <sys/mman.h>

#include "base/env.h"
#include "boot/bootstrap.h"
#include "mp_util.h"

#define NRANKS 4
#define PROMPT_S 1.0

typedef struct {
  volatile double event; /* when the failure happened */
  volatile double doneAt[NRANKS];
  volatile int result[NRANKS];
  char error[NRANKS][400];
} shared_state;

static shared_state* g_sh;

typedef struct {
  int badIfRank; /* this rank gets an interface that does not exist (-1: none) */
} create_cfg;

static int real_rank(int rank, int nRanks, ccoUniqueId id, void* arg) {
  const create_cfg* cfg = arg;
  if (cfg && rank == cfg->badIfRank) {
    setenv("CCO_SOCKET_IFNAME", "=nosuchif0", 1);
    cco_env_reload_for_test(NULL, NULL);
    mp_sleep(0.2); /* the others are waiting by now */
    g_sh->event = mp_now();
  }
  ccoComm* comm = NULL;
  ccoResult_t r = ccoCommCreate(id, nRanks, rank, 0, &comm);
  g_sh->doneAt[rank] = mp_now();
  g_sh->result[rank] = r;
  snprintf(g_sh->error[rank], sizeof(g_sh->error[rank]), "%s", ccoGetLastError(NULL));
  fprintf(stderr, "  rank %d: %s: %s\n", rank, ccoGetErrorString(r), ccoGetLastError(NULL));
  if (r == ccoSuccess) ccoCommDestroy(comm);
  return r == ccoSuccess ? 0 : 20;
}

/* Rank 2 as a joiner that dies as soon as it has the peer table: it
 * listens, joins with a real HELLO, reads PEERS, and exits. */
static int dies_after_peers(int rank, int nRanks, ccoUniqueId id, void* arg) {
  (void)arg;
  cco_id_info info;
  if (cco_uniqueid_decode(&id, &info) != CCO_WIRE_OK) return 60;
  cco_sockaddr want = info.root, bound;
  cco_sockaddr_set_port(&want, 0);
  int lfd = -1, fd = -1;
  if (cco_socket_listen(&want, true, &lfd, &bound) != ccoSuccess) return 61;
  if (cco_socket_connect(&info.root, cco_deadline_after(5.0), -1, &fd) != CCO_IO_OK) return 62;
  cco_wire_hello h;
  memset(&h, 0, sizeof(h));
  memcpy(h.secret, info.secret, sizeof(h.secret));
  h.nRanks = (uint32_t)nRanks;
  h.rank = (uint32_t)rank;
  h.purpose = CCO_HELLO_JOIN;
  h.addr = bound;
  uint8_t msg[CCO_WIRE_HEADER_BYTES + CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_header(msg, CCO_MSG_HELLO, CCO_WIRE_HELLO_BYTES, 0);
  cco_wire_encode_hello(&h, msg + CCO_WIRE_HEADER_BYTES);
  if (cco_socket_send_all(fd, msg, sizeof(msg), cco_deadline_after(5.0), -1) != CCO_IO_OK) return 63;
  uint8_t head[CCO_WIRE_HEADER_BYTES];
  cco_wire_header wh;
  if (cco_socket_recv_all(fd, head, sizeof(head), cco_deadline_after(5.0), -1) != CCO_IO_OK ||
      cco_wire_decode_header(head, sizeof(head), 1u << 20, &wh) != CCO_WIRE_OK ||
      wh.type != CCO_MSG_PEERS)
    return 64;
  g_sh->event = mp_now();
  _exit(0); /* its listener and its join connection close with it */
}

/* Checks ranks `ranks` (n of them): failed, within PROMPT_S of the event,
 * with an error containing one of `needles` (NULL-terminated). */
static void check_prompt(const char* what, const int* ranks, int n, const int* codes,
                         const char* const* needles) {
  double worst = 0;
  for (int i = 0; i < n; i++) {
    int r = ranks[i];
    double after = g_sh->doneAt[r] - g_sh->event;
    if (g_sh->doneAt[r] > 0 && after > worst) worst = after;
    MP_CHECK(codes[i] == 20, "%s: rank %d exit %d", what, r, codes[i]);
    MP_CHECK(g_sh->doneAt[r] > 0 && g_sh->event > 0 && after < PROMPT_S,
             "%s: rank %d failed %.3f s after the event", what, r,
             g_sh->doneAt[r] > 0 ? after : -1.0);
    int named = 0;
    for (const char* const* s = needles; *s; s++) named |= strstr(g_sh->error[r], *s) != NULL;
    MP_CHECK(named, "%s: rank %d does not name the cause: %s", what, r, g_sh->error[r]);
  }
  printf("%s: every other rank failed within %.1f ms, naming the cause\n", what, 1e3 * worst);
}

static void start(ccoUniqueId* id) {
  MP_CHECK(MP_OK(ccoGetUniqueId(id)), "id: %s", ccoGetLastError(NULL));
  memset(g_sh, 0, sizeof(*g_sh));
}

/* Ranks 0..2 of 4 start; rank 3 never comes, so the root is waiting when
 * `victim` is killed. */
static void killed_while_waiting(int victim) {
  ccoUniqueId id;
  start(&id);
  pid_t pids[NRANKS - 1];
  int codes[NRANKS - 1];
  mp_spawn(pids, 0, NRANKS - 1, NRANKS, id, real_rank, NULL);
  mp_sleep(0.3);
  g_sh->event = mp_now();
  kill(pids[victim], SIGKILL);
  mp_wait(pids, NRANKS - 1, 5.0, codes);
  int others[NRANKS], c[NRANKS], n = 0;
  for (int r = 0; r < NRANKS - 1; r++)
    if (r != victim) {
      others[n] = r;
      c[n++] = codes[r];
    }
  char needle[64], what[64];
  snprintf(needle, sizeof(needle), "rank %d closed its connection", victim);
  snprintf(what, sizeof(what), "rank %d killed while the root waits for rank 3", victim);
  const char* needles[] = {needle, NULL};
  check_prompt(what, others, n, c, needles);
}

static void starts_after_the_root_gave_up(void) {
  ccoUniqueId id;
  start(&id);
  pid_t pids[NRANKS];
  int codes[NRANKS];
  mp_spawn(pids, 0, NRANKS - 1, NRANKS, id, real_rank, NULL);
  mp_sleep(0.3);
  g_sh->event = mp_now();
  kill(pids[2], SIGKILL);
  mp_sleep(0.1); /* the root has failed by now */
  mp_spawn(&pids[3], 3, 1, NRANKS, id, real_rank, NULL);
  mp_wait(pids, NRANKS, 5.0, codes);
  const int others[] = {0, 1, 3};
  const int c[] = {codes[0], codes[1], codes[3]};
  const char* needles[] = {"rank 2 closed its connection", NULL};
  check_prompt("rank 3 starts after the root gave up on the killed rank 2", others, 3, c, needles);
}

static void dies_in_link_setup(void) {
  ccoUniqueId id;
  start(&id);
  pid_t pids[NRANKS];
  int codes[NRANKS];
  mp_spawn(&pids[0], 0, 2, NRANKS, id, real_rank, NULL);
  mp_spawn(&pids[2], 2, 1, NRANKS, id, dies_after_peers, NULL);
  mp_spawn(&pids[3], 3, 1, NRANKS, id, real_rank, NULL);
  mp_wait(pids, NRANKS, 5.0, codes);
  MP_CHECK(codes[2] == 0, "the joiner that dies: exit %d", codes[2]);
  const int others[] = {0, 1, 3};
  const int c[] = {codes[0], codes[1], codes[3]};
  const char* needles[] = {"rank 2 closed its connection", "rank 2 refused its link", NULL};
  check_prompt("rank 2 dies during link setup", others, 3, c, needles);
}

static void fails_before_joining(void) {
  ccoUniqueId id;
  start(&id);
  pid_t pids[NRANKS];
  int codes[NRANKS];
  create_cfg cfg = {2};
  mp_spawn(pids, 0, NRANKS, NRANKS, id, real_rank, &cfg);
  mp_wait(pids, NRANKS, 5.0, codes);
  const int all[] = {0, 1, 2, 3};
  const char* needles[] = {"no usable network interface", NULL};
  check_prompt("rank 2 cannot listen (no such interface)", all, NRANKS, codes, needles);
  MP_CHECK(strstr(g_sh->error[0], "rank 2 failed before it could join") != NULL,
           "the root does not say who failed: %s", g_sh->error[0]);
}

int main(void) {
  setenv("CCO_BOOTSTRAP_TIMEOUT", "20", 1);
  /* The bootstrap is under test, not a GPU: on a GPU machine the cuda
   * platform's start-up in every rank would blur the timings. */
  setenv("CCO_PLATFORM", "host", 1);
  g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_sh == MAP_FAILED) return 2;
  killed_while_waiting(2);
  killed_while_waiting(0);
  starts_after_the_root_gave_up();
  dies_in_link_setup();
  fails_before_joining();
  munmap(g_sh, sizeof(*g_sh));
  return mp_finish("mp_kill_create");
}
