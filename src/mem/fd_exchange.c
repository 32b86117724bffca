/* fd passing over abstract Unix datagram sockets. */
#include "mem/fd_exchange.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "boot/socket.h"
#include "boot/wire.h"

#define LSA_MSG_MAGIC 0x4c53414du /* "LSAM" */

typedef struct {
  uint32_t magic;
  uint32_t seq;
  int32_t from;
  uint32_t pad;
  uint64_t token;
  uint64_t info;
} lsa_msg;

static socklen_t make_address(uint64_t tag, int rank, struct sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  /* sun_path[0] == 0: the abstract namespace. */
  int n = snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "cco-%016llx-%d",
                   (unsigned long long)tag, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static uint64_t read_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/* The wake fd interrupted a wait: the cause its owner gave (already
 * logged where it was found), else an abort. */
static ccoResult_t woken(cco_fd_exchange* x, const char* what) {
  char why[CCO_ERROR_TEXT_BYTES];
  ccoResult_t cause = x->boot ? cco_bootstrap_wake_cause(x->boot, why, sizeof(why)) : ccoSuccess;
  if (cause != ccoSuccess) return cco_error_quiet(NULL, cause, "%s", why);
  return cco_error(NULL, ccoInvalidUsage, CCO_SUBSYS_LSA, "rank %d: %s", x->rank, what);
}

ccoResult_t cco_fd_exchange_open(cco_fd_exchange* x, const uint8_t secret[16], int rank,
                                  double timeout, int wakeFd, cco_bootstrap* boot) {
  memset(x, 0, sizeof(*x));
  x->boot = boot;
  x->fd = -1;
  x->rank = rank;
  x->tag = read_u64(secret);
  x->token = read_u64(secret + 8);
  x->timeout = timeout;
  x->wakeFd = wakeFd;
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_LSA, "unix socket failed: %s", strerror(errno));
  int one = 1;
  struct sockaddr_un addr;
  socklen_t len = make_address(x->tag, rank, &addr);
  if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0 ||
      bind(fd, (struct sockaddr*)&addr, len) != 0) {
    int err = errno;
    close(fd);
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_LSA,
                     "rank %d: cannot bind its fd-exchange socket: %s", rank, strerror(err));
  }
  x->fd = fd;
  return ccoSuccess;
}

void cco_fd_exchange_close(cco_fd_exchange* x) { cco_socket_close(&x->fd); }

ccoResult_t cco_fd_exchange_send(cco_fd_exchange* x, int peer, uint32_t seq, uint64_t info,
                                  int fd) {
  lsa_msg msg = {LSA_MSG_MAGIC, seq, x->rank, 0, x->token, info};
  struct iovec iov = {&msg, sizeof(msg)};
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof(control));
  struct sockaddr_un addr;
  struct msghdr mh = {0};
  mh.msg_name = &addr;
  mh.msg_namelen = make_address(x->tag, peer, &addr);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control.buf;
  mh.msg_controllen = sizeof(control.buf);
  struct cmsghdr* c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  double deadline = cco_deadline_after(x->timeout);
  for (;;) {
    if (sendmsg(x->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof(msg)) return ccoSuccess;
    int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK)
      return cco_error(NULL, err == ECONNREFUSED || err == ENOENT ? ccoRemoteError : ccoSystemError,
                       CCO_SUBSYS_LSA,
                       "rank %d: cannot pass memory to rank %d on this host: %s (is it alive, and "
                       "in the same network namespace?)",
                       x->rank, peer, strerror(err));
    /* The peer's queue is full: wait a little (bounded, abortable). */
    if (cco_time_now() > deadline)
      return cco_error(NULL, ccoTimeout, CCO_SUBSYS_LSA,
                       "rank %d: rank %d did not take memory handles for %g s", x->rank, peer,
                       x->timeout);
    struct pollfd p = {x->wakeFd, POLLIN, 0};
    struct timespec pause = {0, 100000};
    if (ppoll(&p, 1, &pause, NULL) > 0) return woken(x, "aborted");
  }
}

/* One datagram: 1 = accepted into fds/infos, 0 = dropped, -1 = nothing
 * there yet (errno EAGAIN) or an error. */
static int recv_one(cco_fd_exchange* x, uint32_t seq, const bool* expect, int nRanks, int* fds,
                    uint64_t* infos) {
  lsa_msg msg;
  struct iovec iov = {&msg, sizeof(msg)};
  union {
    char buf[CMSG_SPACE(sizeof(int) * 4) + CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
  } control;
  struct msghdr mh = {0};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = control.buf;
  mh.msg_controllen = sizeof(control.buf);
  ssize_t n = recvmsg(x->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) return -1;
  int got[4], nGot = 0;
  bool credOk = false;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; i++) {
        int f;
        memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (nGot < 4) got[nGot++] = f;
        else close(f);
      }
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      struct ucred cred;
      memcpy(&cred, CMSG_DATA(c), sizeof(cred));
      credOk = cred.uid == getuid() || cred.uid == geteuid();
    }
  }
  bool ok = n == (ssize_t)sizeof(msg) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && nGot == 1 &&
            credOk && msg.magic == LSA_MSG_MAGIC && msg.token == x->token && msg.seq == seq &&
            msg.from >= 0 && msg.from < nRanks && expect[msg.from] && fds[msg.from] < 0;
  if (!ok) {
    /* Stale (an earlier failed registration) or foreign: drop it. */
    CCO_INFO(LSA, "rank %d: dropped an fd message (from %d, seq %u, expected seq %u)", x->rank,
             msg.from, msg.seq, seq);
    for (int i = 0; i < nGot; i++) close(got[i]);
    return 0;
  }
  fds[msg.from] = got[0];
  infos[msg.from] = msg.info;
  return 1;
}

ccoResult_t cco_fd_exchange_recv(cco_fd_exchange* x, uint32_t seq, const bool* expect, int nRanks,
                                  int* fds, uint64_t* infos) {
  int wanted = 0, have = 0;
  for (int r = 0; r < nRanks; r++) {
    fds[r] = -1;
    wanted += expect[r];
  }
  double deadline = cco_deadline_after(x->timeout);
  ccoResult_t res = ccoSuccess;
  while (have < wanted) {
    int r = recv_one(x, seq, expect, nRanks, fds, infos);
    if (r > 0) have++;
    if (r >= 0) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      res = cco_error(NULL, ccoSystemError, CCO_SUBSYS_LSA, "rank %d: recvmsg failed: %s", x->rank,
                      strerror(errno));
      break;
    }
    cco_io_status st = cco_socket_wait_readable(x->fd, deadline, x->wakeFd);
    if (st == CCO_IO_OK) continue;
    char missing[128] = "";
    size_t o = 0;
    for (int q = 0; q < nRanks && o + 12 < sizeof(missing); q++)
      if (expect[q] && fds[q] < 0) o += (size_t)snprintf(missing + o, sizeof(missing) - o, " %d", q);
    res = st == CCO_IO_TIMEOUT
              ? cco_error(NULL, ccoTimeout, CCO_SUBSYS_LSA,
                          "rank %d: no memory handles from ranks%s within %g s", x->rank, missing,
                          x->timeout)
          : st == CCO_IO_WOKEN
              ? woken(x, "fd exchange interrupted: communicator aborted")
              : cco_error(NULL, ccoSystemError, CCO_SUBSYS_LSA, "rank %d: fd exchange %s", x->rank,
                          cco_io_status_string(st));
    break;
  }
  if (res != ccoSuccess)
    for (int q = 0; q < nRanks; q++) cco_socket_close(&fds[q]);
  return res;
}
