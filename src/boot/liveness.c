/* Liveness monitor: a thread that watches the bootstrap links for a peer that goes away. */
#include "boot/liveness.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"

#define MAX_WATCHED (2 * CCO_BOOTSTRAP_MAX_LINKS)
/* A look at a link that could not conclude (no memory for its queue, an
 * interrupted call) is tried again this often, at most this many times;
 * then the peer counts as dead. */
#define RETRY_MS 10
#define MAX_RETRIES 100

typedef enum {
  LINK_WATCHED, /* open: polled for a hang-up */
  LINK_RETRY,   /* hung up, not judged yet: looked at again after RETRY_MS */
  LINK_LEFT,    /* the peer said goodbye (or the fd is gone): not watched */
} link_state;

typedef enum { VERDICT_BYE, VERDICT_ABORT, VERDICT_DEAD, VERDICT_RETRY } verdict;

struct cco_liveness {
  pthread_t thread;
  int stopFd; /* eventfd: readable once stop is asked */
  int rank;
  int nLinks; /* watched fds: out links then in links */
  int fd[MAX_WATCHED];
  int peer[MAX_WATCHED];
  link_state state[MAX_WATCHED];
  int retries[MAX_WATCHED];
  cco_liveness_fail_fn fail;
  void* owner;
};

static int mod(int a, int n) { return ((a % n) + n) % n; }

/* How the stream of a hung-up link ends: its last bytes are the peer's
 * last message. A BYE header (16 bytes, no payload) last means a normal
 * goodbye; an ABORT with its reason last means the peer failed; anything
 * else (collective data, a cut message, nothing) means it died. */
static verdict judge_tail(const uint8_t* buf, size_t n, char* reason, size_t size) {
  cco_wire_header h;
  if (n >= CCO_WIRE_HEADER_BYTES &&
      cco_wire_decode_header(buf + n - CCO_WIRE_HEADER_BYTES, CCO_WIRE_HEADER_BYTES, 0, &h) == CCO_WIRE_OK &&
      h.type == CCO_MSG_BYE)
    return VERDICT_BYE;
  for (size_t len = 0; len <= CCO_WIRE_TEXT_MAX && n >= CCO_WIRE_HEADER_BYTES + len; len++) {
    const uint8_t* p = buf + n - CCO_WIRE_HEADER_BYTES - len;
    if (cco_wire_decode_header(p, CCO_WIRE_HEADER_BYTES, CCO_WIRE_TEXT_MAX, &h) == CCO_WIRE_OK &&
        h.type == CCO_MSG_ABORT && h.length == len) {
      if (cco_wire_decode_text(p + CCO_WIRE_HEADER_BYTES, len, reason, size) != CCO_WIRE_OK || !reason[0])
        snprintf(reason, size, "(no reason given)");
      return VERDICT_ABORT;
    }
  }
  return VERDICT_DEAD;
}

/* Peeks at everything still queued on a link whose peer hung up. Nothing
 * new can arrive, and whatever the calling thread reads meanwhile only
 * shortens the queue from its head: the end stays the same. */
static verdict judge(int fd, char* reason, size_t size) {
  uint8_t small[4096];
  int queued = 0;
  if (ioctl(fd, SIOCINQ, &queued) != 0 || queued < 0) queued = 0;
  size_t cap = (size_t)queued + sizeof(small); /* room to see that nothing more is there */
  uint8_t* buf = cap <= sizeof(small) ? small : malloc(cap);
  if (!buf) return VERDICT_RETRY;
  ssize_t n;
  int err = 0;
  /* A reset reports its error once, before the queued bytes: look again. */
  for (int tries = 0; tries < 3; tries++) {
    n = recv(fd, buf, cap, MSG_PEEK | MSG_DONTWAIT);
    err = errno;
    if (n >= 0 || (err != EINTR && err != ECONNRESET)) break;
  }
  verdict v = VERDICT_RETRY; /* interrupted, or more queued than the look before said */
  if (n >= 0 && (size_t)n < cap) v = judge_tail(buf, (size_t)n, reason, size);
  else if (n < 0 && err != EINTR && err != ECONNRESET) v = VERDICT_DEAD; /* nothing queued */
  if (buf != small) free(buf);
  return v;
}

/* Whether this rank shut the link down itself (its bootstrap failed and
 * told its peers): that failure is reported where it was found. */
static bool shut_down_here(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return false;
  switch (ti.tcpi_state) {
    case TCP_FIN_WAIT1:
    case TCP_FIN_WAIT2:
    case TCP_CLOSING:
    case TCP_TIME_WAIT:
    case TCP_LAST_ACK:
      return true;
    default:
      return false; /* CLOSE_WAIT: the peer's doing; CLOSE: a reset */
  }
}

/* Judges hung-up link i: for ABORT and DEAD, `reason` gets the report. */
static verdict judge_link(const cco_liveness* lv, int i, char* reason, size_t size) {
  char text[CCO_WIRE_TEXT_MAX + 1] = "";
  verdict v = judge(lv->fd[i], text, sizeof(text));
  if (v == VERDICT_ABORT)
    snprintf(reason, size, "rank %d: rank %d failed: %s", lv->rank, lv->peer[i], text);
  else if (v == VERDICT_DEAD)
    snprintf(reason, size,
             "rank %d: rank %d died: its link closed without a goodbye (the process exited, crashed "
             "or was killed)",
             lv->rank, lv->peer[i]);
  return v;
}

/* Judges link i; returns true when the monitor is done (a failure was
 * reported, or this rank's bootstrap failed by itself). */
static bool look_at(cco_liveness* lv, int i) {
  char reason[CCO_WIRE_TEXT_MAX + 160];
  if (shut_down_here(lv->fd[i])) {
    CCO_INFO(BOOT, "rank %d: liveness monitor stops: this rank's links were shut down", lv->rank);
    return true;
  }
  verdict v = judge_link(lv, i, reason, sizeof(reason));
  if (v == VERDICT_RETRY && ++lv->retries[i] > MAX_RETRIES) {
    v = VERDICT_DEAD;
    snprintf(reason, sizeof(reason),
             "rank %d: rank %d died (its link hung up, and its last message could not be read)",
             lv->rank, lv->peer[i]);
  }
  switch (v) {
    case VERDICT_RETRY:
      lv->state[i] = LINK_RETRY;
      return false;
    case VERDICT_BYE:
      CCO_INFO(BOOT, "rank %d: rank %d destroyed its communicator (goodbye on its link)", lv->rank,
               lv->peer[i]);
      lv->state[i] = LINK_LEFT;
      return false;
    default:
      lv->fail(lv->owner, ccoRemoteError, lv->peer[i], reason);
      return true;
  }
}

bool cco_liveness_probe(const cco_liveness* lv, char* reason, size_t size) {
  if (!lv) return false;
  struct pollfd p[MAX_WATCHED];
  for (int i = 0; i < lv->nLinks; i++) p[i] = (struct pollfd){lv->fd[i], POLLRDHUP, 0};
  if (poll(p, (nfds_t)lv->nLinks, 0) <= 0) return false;
  bool found = false;
  for (int i = 0; i < lv->nLinks; i++) {
    if (!p[i].revents || (p[i].revents & POLLNVAL) || shut_down_here(lv->fd[i])) continue;
    char why[CCO_WIRE_TEXT_MAX + 160];
    verdict v = judge_link(lv, i, why, sizeof(why));
    /* A death is the cause itself; an ABORT passes on one. */
    if (v == VERDICT_DEAD || (v == VERDICT_ABORT && !found)) {
      snprintf(reason, size, "%s", why);
      found = true;
      if (v == VERDICT_DEAD) break;
    }
  }
  return found;
}

static void* watch_main(void* arg) {
  cco_liveness* lv = arg;
  for (;;) {
    struct pollfd p[MAX_WATCHED + 1];
    int which[MAX_WATCHED + 1];
    int np = 0;
    bool retrying = false;
    p[np++] = (struct pollfd){lv->stopFd, POLLIN, 0};
    for (int i = 0; i < lv->nLinks; i++) {
      if (lv->state[i] == LINK_WATCHED) {
        which[np] = i;
        /* A hang-up only: data for the collectives must not wake us. */
        p[np++] = (struct pollfd){lv->fd[i], POLLRDHUP, 0};
      }
      retrying |= lv->state[i] == LINK_RETRY;
    }
    int r = poll(p, (nfds_t)np, retrying ? RETRY_MS : -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      CCO_WARN(BOOT, "rank %d: liveness monitor stops: poll failed: %s", lv->rank, strerror(errno));
      return NULL;
    }
    if (p[0].revents) return NULL;
    for (int k = 1; k < np; k++) {
      int i = which[k];
      if (p[k].revents & POLLNVAL) lv->state[i] = LINK_LEFT; /* not ours to judge any more */
      else if (p[k].revents && look_at(lv, i)) return NULL;
    }
    for (int i = 0; i < lv->nLinks; i++)
      if (lv->state[i] == LINK_RETRY && look_at(lv, i)) return NULL;
  }
}

ccoResult_t cco_liveness_start(const cco_bootstrap* bs, cco_errsink* sink, cco_liveness_fail_fn fail,
                               void* owner, cco_liveness** out) {
  *out = NULL;
  if (bs->nLinks == 0) return ccoSuccess;
  cco_liveness* lv = calloc(1, sizeof(*lv));
  if (!lv) return cco_error(sink, ccoOutOfMemory, CCO_SUBSYS_BOOT, "no memory for the liveness monitor");
  lv->rank = bs->rank;
  lv->fail = fail;
  lv->owner = owner;
  for (int k = 0; k < bs->nLinks; k++) {
    lv->fd[lv->nLinks] = bs->outFd[k];
    lv->peer[lv->nLinks++] = mod(bs->rank + (1 << k), bs->nRanks);
    lv->fd[lv->nLinks] = bs->inFd[k];
    lv->peer[lv->nLinks++] = mod(bs->rank - (1 << k), bs->nRanks);
  }
  lv->stopFd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (lv->stopFd < 0) {
    int err = errno;
    free(lv);
    return cco_error(sink, ccoSystemError, CCO_SUBSYS_BOOT,
                     "rank %d: liveness monitor: eventfd failed: %s", bs->rank, strerror(err));
  }
  int err = pthread_create(&lv->thread, NULL, watch_main, lv);
  if (err != 0) {
    close(lv->stopFd);
    free(lv);
    return cco_error(sink, ccoSystemError, CCO_SUBSYS_BOOT,
                     "rank %d: liveness monitor: cannot start its thread: %s", bs->rank, strerror(err));
  }
  *out = lv;
  return ccoSuccess;
}

void cco_liveness_stop(cco_liveness* lv) {
  if (!lv) return;
  uint64_t one = 1;
  (void)!write(lv->stopFd, &one, sizeof(one));
  pthread_join(lv->thread, NULL);
  close(lv->stopFd);
  free(lv);
}

void cco_liveness_goodbye(cco_bootstrap* bs) {
  if (bs->failResult != ccoSuccess) return;
  uint8_t bye[CCO_WIRE_HEADER_BYTES];
  cco_wire_encode_header(bye, CCO_MSG_BYE, 0, 0);
  /* 16 bytes fit in any socket buffer that a live peer drains; one short
   * deadline for all links bounds a peer that does not. */
  double deadline = cco_deadline_after(1.0);
  for (int k = 0; k < bs->nLinks; k++) {
    if (bs->outFd[k] >= 0) (void)cco_socket_send_all(bs->outFd[k], bye, sizeof(bye), deadline, -1);
    if (bs->inFd[k] >= 0) (void)cco_socket_send_all(bs->inFd[k], bye, sizeof(bye), deadline, -1);
  }
}
