/*
 * Strangers at the door: while a real job of 4 ranks forms, processes with a
 * wrong secret, a wrong nRanks, a duplicate rank, a forged out-of-range
 * rank, garbage bytes and a silent connection knock at the root. Each must be
 * refused (with a reason where it speaks the protocol) and the real job must
 * complete. A joiner arriving after the job formed times out cleanly.
 *
 *   mp_stranger            (launches its own ranks with fork)
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>

#include "boot/bootstrap.h"
#include "base/env.h"
#include "mp_util.h"

#define NRANKS 4
#define LATE_RANK_DELAY 1.5 /* the root stays in its join phase this long */

static int real_rank(int rank, int nRanks, ccoUniqueId id, void* arg) {
  (void)arg;
  if (rank == nRanks - 1) mp_sleep(LATE_RANK_DELAY);
  ccoComm* comm = NULL;
  if (ccoCommCreate(id, nRanks, rank, 0, &comm) != ccoSuccess) {
    fprintf(stderr, "  real rank %d: create failed: %s\n", rank, ccoGetLastError(NULL));
    return 20;
  }
  int got[NRANKS] = {0};
  int code = 0;
  if (ccoBootstrapAllGather(comm, &rank, got, sizeof(int)) != ccoSuccess) code = 21;
  for (int r = 0; r < nRanks && !code; r++)
    if (got[r] != r) code = 22;
  if (!code && ccoBarrierAll(comm) != ccoSuccess) code = 23;
  ccoCommDestroy(comm);
  return code;
}

typedef struct {
  int nRanks, rank;
  int flipSecret;
  const char* expect; /* substring of the refusal */
} stranger_case;

/* Exit 0 when ccoCommCreate failed with ccoInvalidUsage and the expected
 * reason; 30+ otherwise. */
static int stranger(int unused, int nRanksIgnored, ccoUniqueId id, void* arg) {
  (void)unused;
  (void)nRanksIgnored;
  const stranger_case* sc = arg;
  mp_sleep(0.3);
  if (sc->flipSecret) {
    cco_id_info info;
    if (cco_uniqueid_decode(&id, &info) != CCO_WIRE_OK) return 30;
    info.secret[3] ^= 0x5a;
    cco_uniqueid_encode(&info, &id);
  }
  ccoComm* comm = NULL;
  ccoResult_t r = ccoCommCreate(id, sc->nRanks, sc->rank, 0, &comm);
  const char* why = ccoGetLastError(NULL);
  fprintf(stderr, "  stranger (nRanks %d, rank %d%s): %s: %s\n", sc->nRanks, sc->rank,
          sc->flipSecret ? ", wrong secret" : "", ccoGetErrorString(r), why);
  if (r == ccoSuccess) {
    ccoCommDestroy(comm);
    return 31;
  }
  if (r != ccoInvalidUsage) return 32;
  return strstr(why, sc->expect) ? 0 : 33;
}

static int connect_root(ccoUniqueId id) {
  cco_id_info info;
  if (cco_uniqueid_decode(&id, &info) != CCO_WIRE_OK) return -1;
  int fd = -1;
  if (cco_socket_connect(&info.root, cco_deadline_after(5.0), -1, &fd) != CCO_IO_OK) return -1;
  return fd;
}

/* Reads one REFUSE reply; returns 0 when it carries `expect`. */
static int read_refuse(int fd, const char* expect) {
  uint8_t buf[CCO_WIRE_HEADER_BYTES + CCO_WIRE_TEXT_MAX + 4];
  size_t got = 0;
  double end = mp_now() + 5.0;
  while (mp_now() < end) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
    if (n <= 0) break;
    got += (size_t)n;
  }
  cco_wire_header h;
  if (cco_wire_decode_header(buf, got, CCO_WIRE_TEXT_MAX + 4, &h) != CCO_WIRE_OK) return 40;
  if (h.type != CCO_MSG_REFUSE || got < CCO_WIRE_HEADER_BYTES + h.length || h.length < 4) return 41;
  char reason[CCO_WIRE_TEXT_MAX + 1];
  cco_wire_decode_text(buf + CCO_WIRE_HEADER_BYTES + 4, h.length - 4, reason, sizeof(reason));
  fprintf(stderr, "  raw stranger refused: %s\n", reason);
  return strstr(reason, expect) ? 0 : 42;
}

static int forged_rank(int unused, int n, ccoUniqueId id, void* arg) {
  (void)unused;
  (void)n;
  (void)arg;
  mp_sleep(0.3);
  int fd = connect_root(id);
  if (fd < 0) return 50;
  cco_id_info info;
  cco_uniqueid_decode(&id, &info);
  cco_wire_hello h;
  memset(&h, 0, sizeof(h));
  memcpy(h.secret, info.secret, sizeof(h.secret));
  h.nRanks = NRANKS;
  h.rank = NRANKS + 3; /* out of range: a client-side check would never send this */
  h.purpose = CCO_HELLO_JOIN;
  h.addr = info.root;
  uint8_t msg[CCO_WIRE_HEADER_BYTES + CCO_WIRE_HELLO_BYTES];
  cco_wire_encode_header(msg, CCO_MSG_HELLO, CCO_WIRE_HELLO_BYTES, 0);
  cco_wire_encode_hello(&h, msg + CCO_WIRE_HEADER_BYTES);
  if (send(fd, msg, sizeof(msg), MSG_NOSIGNAL) != (ssize_t)sizeof(msg)) return 51;
  int code = read_refuse(fd, "out of range");
  close(fd);
  return code;
}

static int garbage(int unused, int n, ccoUniqueId id, void* arg) {
  (void)unused;
  (void)n;
  (void)arg;
  mp_sleep(0.3);
  int fd = connect_root(id);
  if (fd < 0) return 60;
  const char req[] = "GET / HTTP/1.0\r\nHost: cco\r\n\r\n";
  if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0) return 61;
  int code = read_refuse(fd, "not a cco");
  close(fd);
  return code;
}

static int silent(int unused, int n, ccoUniqueId id, void* arg) {
  (void)unused;
  (void)n;
  (void)arg;
  mp_sleep(0.2);
  int fd = connect_root(id);
  if (fd < 0) return 70;
  mp_sleep(4.0); /* holds the connection open, says nothing */
  close(fd);
  return 0;
}

/* After the job formed, nobody listens any more: a late joiner must give up
 * at its own timeout with ccoTimeout. */
static int late_joiner(int unused, int n, ccoUniqueId id, void* arg) {
  (void)unused;
  (void)n;
  (void)arg;
  mp_sleep(LATE_RANK_DELAY + 1.5);
  setenv("CCO_BOOTSTRAP_TIMEOUT", "1", 1);
  cco_env_reload_for_test(NULL, NULL);
  double t0 = mp_now();
  ccoComm* comm = NULL;
  ccoResult_t r = ccoCommCreate(id, NRANKS, 2, 0, &comm);
  double took = mp_now() - t0;
  fprintf(stderr, "  late joiner: %s after %.2f s: %s\n", ccoGetErrorString(r), took,
          ccoGetLastError(NULL));
  if (r == ccoSuccess) return 80;
  return r == ccoTimeout && took < 3.0 ? 0 : 81;
}

int main(void) {
  setenv("CCO_BOOTSTRAP_TIMEOUT", "20", 1);
  ccoUniqueId id;
  MP_CHECK(MP_OK(ccoGetUniqueId(&id)), "id: %s", ccoGetLastError(NULL));
  pid_t real[NRANKS], others[8];
  int realCodes[NRANKS], otherCodes[8];
  stranger_case wrongSecret = {NRANKS, 2, 1, "wrong secret"};
  stranger_case wrongSize = {NRANKS + 1, 1, 0, "nRanks mismatch"};
  stranger_case duplicate = {NRANKS, 1, 0, "already joined"};
  double t0 = mp_now();
  mp_spawn(real, 0, NRANKS, NRANKS, id, real_rank, NULL);
  mp_spawn(&others[0], 0, 1, 0, id, stranger, &wrongSecret);
  mp_spawn(&others[1], 0, 1, 0, id, stranger, &wrongSize);
  mp_spawn(&others[2], 0, 1, 0, id, stranger, &duplicate);
  mp_spawn(&others[3], 0, 1, 0, id, forged_rank, NULL);
  mp_spawn(&others[4], 0, 1, 0, id, garbage, NULL);
  mp_spawn(&others[5], 0, 1, 0, id, silent, NULL);
  mp_spawn(&others[6], 0, 1, 0, id, late_joiner, NULL);
  mp_wait(real, NRANKS, 20.0, realCodes);
  double jobTime = mp_now() - t0;
  mp_wait(others, 7, 20.0, otherCodes);
  for (int r = 0; r < NRANKS; r++)
    MP_CHECK(realCodes[r] == 0, "real rank %d exit %d", r, realCodes[r]);
  MP_CHECK(jobTime < LATE_RANK_DELAY + 3.0, "real job took %.2f s", jobTime);
  const char* names[] = {"wrong secret", "wrong nRanks", "duplicate rank", "forged rank",
                         "garbage",      "silent",       "late joiner"};
  for (int i = 0; i < 7; i++) MP_CHECK(otherCodes[i] == 0, "%s: exit %d", names[i], otherCodes[i]);
  printf("real job formed and finished in %.2f s despite 7 strangers\n", jobTime);
  return mp_finish("mp_stranger");
}
