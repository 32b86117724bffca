/*
 * The liveness monitor (src/boot/liveness.c) over links made of socket
 * pairs: the test holds the peers' ends and leaves in every way a peer can.
 *
 *  - goodbye (BYE last, after collective data): no report, ever;
 *  - ABORT last: one report with the peer's reason;
 *  - close without goodbye (nothing, data, a cut message, data that only
 *    looks like a message): one report that the peer died;
 *  - a reset (the peer closed with unread data) after a goodbye: no report;
 *  - this rank's own shutdown of a link, where the socket does not show it
 *    (TCP shows it: FIN sent), is reported (the communicator tells it
 *    apart under its lock);
 *  - nothing is consumed: the queued bytes are still there for the
 *    collectives;
 *  - stop returns at once while idle, and while the callback blocks;
 *  - a probe from another thread names the cause: a death before an ABORT
 *    that passes one on.
 * Runs under TSan in `make test` (the monitor's thread against this one).
 */
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "boot/liveness.h"
#include "test.h"

typedef struct {
  pthread_mutex_t lock;
  int calls;
  int peer;
  ccoResult_t res;
  char reason[512];
  double block; /* seconds the callback sleeps */
} reports;

static void on_fail(void* owner, ccoResult_t res, int peer, const char* reason) {
  reports* r = owner;
  pthread_mutex_lock(&r->lock);
  r->calls++;
  r->peer = peer;
  r->res = res;
  snprintf(r->reason, sizeof(r->reason), "%s", reason);
  double block = r->block;
  pthread_mutex_unlock(&r->lock);
  if (block > 0) {
    struct timespec ts = {0, (long)(block * 1e9)};
    nanosleep(&ts, NULL);
  }
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int calls(reports* r) {
  pthread_mutex_lock(&r->lock);
  int n = r->calls;
  pthread_mutex_unlock(&r->lock);
  return n;
}

/* Waits up to `seconds` for a report. */
static int wait_report(reports* r, double seconds) {
  double end = now() + seconds;
  while (calls(r) == 0 && now() < end) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  return calls(r);
}

/* Rank 1 of 3: links to rank 2 (out 0), 0 (out 1), 0 (in 0), 2 (in 1). The
 * test keeps the far ends: far[0] = rank 2 (out 0), far[1] = rank 0 (in 0),
 * far[2] = rank 0 (out 1), far[3] = rank 2 (in 1). */
typedef struct {
  cco_bootstrap bs;
  int far[4];
  reports rep;
  cco_liveness* lv;
} fixture;

static void setup(fixture* f) {
  memset(f, 0, sizeof(*f));
  f->bs.rank = 1;
  f->bs.nRanks = 3;
  f->bs.nLinks = 2;
  for (int k = 0; k < CCO_BOOTSTRAP_MAX_LINKS; k++) f->bs.outFd[k] = f->bs.inFd[k] = -1;
  int sv[2];
  int* near[4] = {&f->bs.outFd[0], &f->bs.inFd[0], &f->bs.outFd[1], &f->bs.inFd[1]};
  for (int i = 0; i < 4; i++) {
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    *near[i] = sv[0];
    f->far[i] = sv[1];
  }
  pthread_mutex_init(&f->rep.lock, NULL);
  CHECK_EQ(cco_liveness_start(&f->bs, NULL, on_fail, &f->rep, &f->lv), ccoSuccess);
  CHECK(f->lv != NULL);
}

static void teardown(fixture* f) {
  cco_liveness_stop(f->lv);
  for (int i = 0; i < 4; i++)
    if (f->far[i] >= 0) close(f->far[i]);
  int* near[4] = {&f->bs.outFd[0], &f->bs.inFd[0], &f->bs.outFd[1], &f->bs.inFd[1]};
  for (int i = 0; i < 4; i++) close(*near[i]);
  pthread_mutex_destroy(&f->rep.lock);
}

static void send_msg(int fd, uint16_t type, const void* payload, uint32_t len, uint32_t seq) {
  uint8_t buf[CCO_WIRE_HEADER_BYTES + 1024];
  cco_wire_encode_header(buf, type, len, seq);
  if (len) memcpy(buf + CCO_WIRE_HEADER_BYTES, payload, len);
  CHECK(send(fd, buf, CCO_WIRE_HEADER_BYTES + len, MSG_NOSIGNAL) == (ssize_t)(CCO_WIRE_HEADER_BYTES + len));
}

static void say_goodbye(fixture* f, int i) {
  send_msg(f->far[i], CCO_MSG_BYE, NULL, 0, 0);
  close(f->far[i]);
  f->far[i] = -1;
}

static int queued(int fd) {
  int n = -1;
  ioctl(fd, FIONREAD, &n);
  return n;
}

TEST(goodbye_after_collective_data_is_not_a_failure) {
  fixture f;
  setup(&f);
  uint8_t block[300];
  memset(block, 0x5a, sizeof(block));
  send_msg(f.far[1], CCO_MSG_BARRIER, NULL, 0, 7); /* unread by the "calling thread" */
  send_msg(f.far[1], CCO_MSG_DATA, block, sizeof(block), 8);
  for (int i = 0; i < 4; i++) say_goodbye(&f, i);
  CHECK_EQ(wait_report(&f.rep, 0.3), 0);
  /* The collectives' bytes are still queued: the monitor only peeked. */
  CHECK_EQ(queued(f.bs.inFd[0]), 3 * CCO_WIRE_HEADER_BYTES + (int)sizeof(block));
  teardown(&f);
}

TEST(abort_is_reported_with_its_reason) {
  fixture f;
  setup(&f);
  say_goodbye(&f, 0);
  const char* why = "rank 0: rank 5 closed its connection during barrier";
  send_msg(f.far[2], CCO_MSG_DATA, "xxxxxxxx", 8, 3); /* cut off by the abort */
  send_msg(f.far[2], CCO_MSG_ABORT, why, (uint32_t)strlen(why), 0);
  close(f.far[2]);
  f.far[2] = -1;
  CHECK_EQ(wait_report(&f.rep, 2.0), 1);
  CHECK_EQ(f.rep.peer, 0);
  CHECK_EQ(f.rep.res, ccoRemoteError);
  CHECK(strstr(f.rep.reason, "rank 1: rank 0 failed: rank 0: rank 5 closed its connection") != NULL);
  teardown(&f);
  CHECK_EQ(f.rep.calls, 1); /* once, even with more links hanging up later */
}

TEST(close_without_goodbye_is_a_death) {
  /* Nothing queued; collective data; a cut message; bytes that look like a
   * goodbye but are not last. */
  for (int variant = 0; variant < 4; variant++) {
    fixture f;
    setup(&f);
    int i = 3; /* rank 2's in link */
    if (variant == 1) send_msg(f.far[i], CCO_MSG_BARRIER, NULL, 0, 1);
    if (variant == 2) {
      uint8_t h[CCO_WIRE_HEADER_BYTES];
      cco_wire_encode_header(h, CCO_MSG_DATA, 4096, 2);
      CHECK(send(f.far[i], h, sizeof(h), 0) == (ssize_t)sizeof(h));
      CHECK(send(f.far[i], "half", 4, 0) == 4);
    }
    if (variant == 3) {
      send_msg(f.far[i], CCO_MSG_BYE, NULL, 0, 0);
      send_msg(f.far[i], CCO_MSG_BARRIER, NULL, 0, 9);
    }
    close(f.far[i]);
    f.far[i] = -1;
    CHECK_EQ(wait_report(&f.rep, 2.0), 1);
    CHECK_EQ(f.rep.peer, 2);
    CHECK(strstr(f.rep.reason, "rank 1: rank 2 died") != NULL);
    teardown(&f);
  }
}

TEST(reset_after_goodbye_is_not_a_failure) {
  fixture f;
  setup(&f);
  /* The peer leaves with bytes of ours unread: a reset after its goodbye. */
  CHECK(send(f.bs.outFd[0], "unread", 6, MSG_NOSIGNAL) == 6);
  say_goodbye(&f, 0);
  CHECK_EQ(wait_report(&f.rep, 0.3), 0);
  teardown(&f);
}

TEST(own_shutdown_is_reported_to_the_owner) {
  fixture f;
  setup(&f);
  shutdown(f.bs.inFd[1], SHUT_RDWR); /* what cco_bootstrap_fail does */
  CHECK_EQ(wait_report(&f.rep, 2.0), 1);
  teardown(&f);
}

TEST(stop_is_prompt) {
  fixture f;
  setup(&f);
  double t = now();
  teardown(&f);
  CHECK(now() - t < 0.5);
  /* A callback that blocks (it waits for the communicator's lock): stop
   * waits for it, and only for it. */
  setup(&f);
  pthread_mutex_lock(&f.rep.lock);
  f.rep.block = 0.2;
  pthread_mutex_unlock(&f.rep.lock);
  close(f.far[0]);
  f.far[0] = -1;
  CHECK_EQ(wait_report(&f.rep, 2.0), 1);
  t = now();
  teardown(&f);
  CHECK(now() - t < 1.0);
}

TEST(probe_names_the_cause) {
  fixture f;
  setup(&f);
  char why[512] = "";
  CHECK(!cco_liveness_probe(f.lv, why, sizeof(why))); /* every link open */
  CHECK(!cco_liveness_probe(NULL, why, sizeof(why)));
  pthread_mutex_lock(&f.rep.lock);
  f.rep.block = 0.3; /* the monitor is busy reporting meanwhile */
  pthread_mutex_unlock(&f.rep.lock);
  const char* relay = "rank 2: rank 0 died: its link closed without a goodbye";
  send_msg(f.far[3], CCO_MSG_ABORT, relay, (uint32_t)strlen(relay), 0);
  close(f.far[3]);
  f.far[3] = -1;
  say_goodbye(&f, 0); /* rank 2 also said goodbye on its other link: not a cause */
  CHECK_EQ(wait_report(&f.rep, 2.0), 1);
  CHECK(cco_liveness_probe(f.lv, why, sizeof(why)));
  CHECK(strstr(why, "rank 1: rank 2 failed: rank 2: rank 0 died") != NULL);
  close(f.far[1]); /* rank 0 itself: a death wins over the relayed cause */
  f.far[1] = -1;
  CHECK(cco_liveness_probe(f.lv, why, sizeof(why)));
  CHECK(strstr(why, "rank 1: rank 0 died") != NULL);
  teardown(&f);
}

TEST(one_rank_starts_no_thread) {
  cco_bootstrap bs;
  memset(&bs, 0, sizeof(bs));
  bs.nRanks = 1;
  reports rep;
  memset(&rep, 0, sizeof(rep));
  cco_liveness* lv = (cco_liveness*)&bs;
  CHECK_EQ(cco_liveness_start(&bs, NULL, on_fail, &rep, &lv), ccoSuccess);
  CHECK(lv == NULL);
  cco_liveness_stop(lv);
}

TEST(goodbye_goes_out_on_every_link_unless_failed) {
  fixture f;
  setup(&f);
  cco_liveness_stop(f.lv);
  f.lv = NULL;
  cco_liveness_goodbye(&f.bs);
  for (int i = 0; i < 4; i++) {
    uint8_t h[CCO_WIRE_HEADER_BYTES];
    cco_wire_header hd;
    CHECK(recv(f.far[i], h, sizeof(h), MSG_DONTWAIT) == (ssize_t)sizeof(h));
    CHECK_EQ(cco_wire_decode_header(h, sizeof(h), 0, &hd), CCO_WIRE_OK);
    CHECK_EQ(hd.type, CCO_MSG_BYE);
  }
  f.bs.failResult = ccoRemoteError; /* failed: the peers were told with ABORT */
  cco_liveness_goodbye(&f.bs);
  for (int i = 0; i < 4; i++) CHECK_EQ(queued(f.far[i]), 0);
  teardown(&f);
}

int main(void) { return RUN_TESTS(); }
