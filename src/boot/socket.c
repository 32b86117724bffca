/* Bootstrap sockets: bounded, abortable, non-blocking I/O. */
#include "boot/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <math.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"

const char* cco_io_status_string(cco_io_status s) {
  switch (s) {
    case CCO_IO_OK: return "ok";
    case CCO_IO_CLOSED: return "connection closed by peer";
    case CCO_IO_TIMEOUT: return "timed out";
    case CCO_IO_WOKEN: return "interrupted by abort";
    case CCO_IO_ERROR: return "socket error";
  }
  return "?";
}

double cco_time_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double cco_deadline_after(double timeoutSeconds) {
  return timeoutSeconds > 0 ? cco_time_now() + timeoutSeconds : INFINITY;
}

/* Milliseconds for poll() until the deadline, rounded up; -1 = forever. */
static int poll_timeout_ms(double deadline) {
  if (isinf(deadline)) return -1;
  double left = deadline - cco_time_now();
  if (left <= 0) return 0;
  double ms = ceil(left * 1000.0);
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

socklen_t cco_sockaddr_len(const cco_sockaddr* a) {
  return a->ss.ss_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
                                     : (socklen_t)sizeof(struct sockaddr_in);
}

int cco_sockaddr_family(const cco_sockaddr* a) { return a->ss.ss_family; }

uint16_t cco_sockaddr_port(const cco_sockaddr* a) {
  if (a->ss.ss_family == AF_INET6) return ntohs(((const struct sockaddr_in6*)&a->ss)->sin6_port);
  return ntohs(((const struct sockaddr_in*)&a->ss)->sin_port);
}

void cco_sockaddr_set_port(cco_sockaddr* a, uint16_t port) {
  if (a->ss.ss_family == AF_INET6) ((struct sockaddr_in6*)&a->ss)->sin6_port = htons(port);
  else ((struct sockaddr_in*)&a->ss)->sin_port = htons(port);
}

const char* cco_sockaddr_str(const cco_sockaddr* a, char* buf, size_t size) {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "?";
  if (a->ss.ss_family == AF_INET6) {
    const struct sockaddr_in6* s6 = (const struct sockaddr_in6*)&a->ss;
    inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
    if (s6->sin6_scope_id) {
      char name[IF_NAMESIZE];
      size_t n = strlen(host);
      if (if_indextoname(s6->sin6_scope_id, name))
        snprintf(host + n, sizeof(host) - n, "%%%s", name);
    }
    snprintf(buf, size, "[%s]:%u", host, (unsigned)cco_sockaddr_port(a));
  } else if (a->ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in*)&a->ss)->sin_addr, host, sizeof(host));
    snprintf(buf, size, "%s:%u", host, (unsigned)cco_sockaddr_port(a));
  } else {
    snprintf(buf, size, "<family %d>", a->ss.ss_family);
  }
  return buf;
}

bool cco_ifname_matches(const char* spec, const char* ifname) {
  if (!spec || !*spec) return true;
  bool exclude = false, exact = false;
  if (*spec == '^') exclude = true, spec++;
  if (*spec == '=') exact = true, spec++;
  bool hit = false;
  const char* p = spec;
  while (*p && !hit) {
    while (*p == ' ') p++; /* "eth, ib" means "eth,ib" */
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    while (len > 0 && p[len - 1] == ' ') len--;
    if (len > 0) {
      if (exact) hit = strlen(ifname) == len && strncmp(ifname, p, len) == 0;
      else hit = strncmp(ifname, p, len) == 0;
    }
    p = comma ? comma + 1 : p + len;
  }
  return exclude ? !hit : hit;
}

/* Interfaces a default choice avoids: only used when nothing else is up. */
static bool is_fallback_interface(const char* name) {
  return strncmp(name, "lo", 2) == 0 || strncmp(name, "docker", 6) == 0 ||
         strncmp(name, "virbr", 5) == 0;
}

ccoResult_t cco_socket_pick_address(const char* spec, int family, cco_sockaddr* addr,
                                    char* ifname, size_t ifnameSize) {
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "getifaddrs failed: %s",
                     strerror(errno));
  bool haveSpec = spec && *spec;
  const int families[2] = {family == AF_INET6 ? AF_INET6 : AF_INET,
                           family == AF_UNSPEC ? AF_INET6 : -1};
  /* Pass 0 skips fallback interfaces (only without a spec); pass 1 takes any. */
  for (int pass = haveSpec ? 1 : 0; pass < 2; pass++) {
    for (int f = 0; f < 2; f++) {
      if (families[f] < 0) continue;
      for (struct ifaddrs* it = list; it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != families[f]) continue;
        if (!(it->ifa_flags & IFF_UP)) continue;
        if (!cco_ifname_matches(spec, it->ifa_name)) continue;
        if (pass == 0 && is_fallback_interface(it->ifa_name)) continue;
        memset(addr, 0, sizeof(*addr));
        memcpy(&addr->ss, it->ifa_addr,
               families[f] == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
        if (ifname) snprintf(ifname, ifnameSize, "%s", it->ifa_name);
        freeifaddrs(list);
        return ccoSuccess;
      }
    }
  }
  freeifaddrs(list);
  return cco_error(NULL, ccoInvalidUsage, CCO_SUBSYS_BOOT,
                   "no usable network interface%s%s%s (family %s)",
                   haveSpec ? " matches CCO_SOCKET_IFNAME='" : "", haveSpec ? spec : "",
                   haveSpec ? "'" : "",
                   family == AF_INET ? "ipv4" : family == AF_INET6 ? "ipv6" : "any");
}

ccoResult_t cco_socket_route_source(const cco_sockaddr* remote, cco_sockaddr* local) {
  int fd = socket(remote->ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "socket(udp) failed: %s",
                     strerror(errno));
  cco_sockaddr probe = *remote;
  if (cco_sockaddr_port(&probe) == 0) cco_sockaddr_set_port(&probe, 9);
  cco_sockaddr out;
  socklen_t len = sizeof(out.ss);
  memset(&out, 0, sizeof(out));
  if (connect(fd, (const struct sockaddr*)&probe.ss, cco_sockaddr_len(&probe)) != 0 ||
      getsockname(fd, (struct sockaddr*)&out.ss, &len) != 0) {
    int err = errno;
    char buf[96];
    close(fd);
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "no route to the root %s: %s",
                     cco_sockaddr_str(remote, buf, sizeof(buf)), strerror(err));
  }
  close(fd);
  cco_sockaddr_set_port(&out, 0);
  *local = out;
  return ccoSuccess;
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

ccoResult_t cco_socket_listen(const cco_sockaddr* addr, bool reuseAddr, int* fdOut,
                              cco_sockaddr* bound) {
  char buf[96];
  int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "socket failed: %s", strerror(errno));
  int one = 1;
  if (reuseAddr) (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr->ss.ss_family == AF_INET6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd, (const struct sockaddr*)&addr->ss, cco_sockaddr_len(addr)) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    int err = errno;
    close(fd);
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "cannot listen on %s: %s",
                     cco_sockaddr_str(addr, buf, sizeof(buf)), strerror(err));
  }
  cco_sockaddr out;
  memset(&out, 0, sizeof(out));
  socklen_t len = sizeof(out.ss);
  if (getsockname(fd, (struct sockaddr*)&out.ss, &len) != 0) {
    int err = errno;
    close(fd);
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_BOOT, "getsockname failed: %s",
                     strerror(err));
  }
  *fdOut = fd;
  if (bound) *bound = out;
  return ccoSuccess;
}

/* Polls one fd for `events` plus the wake fd until the deadline. */
static cco_io_status wait_fd(int fd, short events, double deadline, int wakeFd) {
  for (;;) {
    struct pollfd p[2] = {{fd, events, 0}, {wakeFd, POLLIN, 0}};
    int n = poll(p, wakeFd >= 0 ? 2 : 1, poll_timeout_ms(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return CCO_IO_ERROR;
    }
    if (wakeFd >= 0 && (p[1].revents & POLLIN)) return CCO_IO_WOKEN;
    if (n == 0) return CCO_IO_TIMEOUT;
    if (p[0].revents) return CCO_IO_OK; /* the caller's I/O call tells errors apart */
  }
}

cco_io_status cco_socket_wait_readable(int fd, double deadline, int wakeFd) {
  return wait_fd(fd, POLLIN, deadline, wakeFd);
}

bool cco_socket_connect_retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EADDRNOTAVAIL;
}

int cco_socket_connect_start(const cco_sockaddr* remote, int* fdOut) {
  int fd = socket(remote->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  if (connect(fd, (const struct sockaddr*)&remote->ss, cco_sockaddr_len(remote)) != 0 &&
      errno != EINPROGRESS) {
    int err = errno;
    close(fd);
    return err;
  }
  set_nodelay(fd);
  *fdOut = fd;
  return 0;
}

int cco_socket_connect_result(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

cco_io_status cco_socket_connect(const cco_sockaddr* remote, double deadline, int wakeFd,
                                 int* fdOut) {
  double backoff = 0.0002; /* grows to 0.1 s: the listener is usually up within microseconds */
  for (;;) {
    int fd = socket(remote->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return CCO_IO_ERROR;
    int err = 0;
    if (connect(fd, (const struct sockaddr*)&remote->ss, cco_sockaddr_len(remote)) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        cco_io_status st = wait_fd(fd, POLLOUT, deadline, wakeFd);
        if (st != CCO_IO_OK) {
          close(fd);
          return st;
        }
        socklen_t len = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      set_nodelay(fd);
      *fdOut = fd;
      return CCO_IO_OK;
    }
    close(fd);
    if (!cco_socket_connect_retryable(err)) {
      errno = err;
      return CCO_IO_ERROR;
    }
    /* The listener is not up yet: back off (bounded) and retry. */
    if (cco_time_now() + backoff > deadline) return CCO_IO_TIMEOUT;
    struct pollfd p = {wakeFd, POLLIN, 0};
    struct timespec pause = {0, (long)(backoff * 1e9)};
    int n = ppoll(&p, wakeFd >= 0 ? 1 : 0, &pause, NULL);
    if (n > 0) return CCO_IO_WOKEN;
    if (backoff < 0.1) backoff *= 2;
  }
}

cco_io_status cco_socket_accept(int listenFd, double deadline, int wakeFd, int* fdOut) {
  for (;;) {
    int fd = accept4(listenFd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      set_nodelay(fd);
      *fdOut = fd;
      return CCO_IO_OK;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return CCO_IO_ERROR;
    cco_io_status st = wait_fd(listenFd, POLLIN, deadline, wakeFd);
    if (st != CCO_IO_OK) return st;
  }
}

#ifndef CCO_SPIN_SECONDS
#define CCO_SPIN_SECONDS 5e-6
#endif

/* One non-blocking send step: >0 progressed, 0 would block, <0 status. */
static int send_step(int fd, const char* buf, size_t len, size_t* done, cco_io_status* st) {
  ssize_t n = send(fd, buf + *done, len - *done, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    *done += (size_t)n;
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  *st = (n < 0 && errno != EPIPE && errno != ECONNRESET) ? CCO_IO_ERROR : CCO_IO_CLOSED;
  return -1;
}

static int recv_step(int fd, char* buf, size_t len, size_t* done, cco_io_status* st) {
  ssize_t n = recv(fd, buf + *done, len - *done, MSG_DONTWAIT);
  if (n > 0) {
    *done += (size_t)n;
    return 1;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  *st = (n < 0 && errno != ECONNRESET) ? CCO_IO_ERROR : CCO_IO_CLOSED;
  return -1;
}

cco_io_status cco_socket_xfer_run(cco_socket_xfer* x, double deadline, int wakeFd, int* failedFd) {
  const int sendFd = x->sendFd, recvFd = x->recvFd;
  const void* sendBuf = x->sendBuf;
  void* recvBuf = x->recvBuf;
  const size_t sendLen = x->sendLen, recvLen = x->recvLen;
  cco_io_status st = CCO_IO_OK;
  double spinUntil = 0;
  for (;;) {
    /* Try both directions first: the common case needs no poll at all. */
    int progress;
    do {
      progress = 0;
      if (x->sent < sendLen) {
        int r = send_step(sendFd, sendBuf, sendLen, &x->sent, &st);
        if (r < 0) {
          if (failedFd) *failedFd = sendFd;
          return st;
        }
        progress |= r;
      }
      if (x->got < recvLen) {
        int r = recv_step(recvFd, recvBuf, recvLen, &x->got, &st);
        if (r < 0) {
          if (failedFd) *failedFd = recvFd;
          return st;
        }
        progress |= r;
      }
    } while (progress && (x->sent < sendLen || x->got < recvLen));
    if (x->sent == sendLen && x->got == recvLen) return CCO_IO_OK;
    if (spinUntil == 0) spinUntil = cco_time_now() + CCO_SPIN_SECONDS;
    if (cco_time_now() < spinUntil) {
      sched_yield();
      continue;
    }

    struct pollfd p[3];
    int n = 0, wakeIdx = -1;
    if (x->sent < sendLen) p[n++] = (struct pollfd){sendFd, POLLOUT, 0};
    if (x->got < recvLen) p[n++] = (struct pollfd){recvFd, POLLIN, 0};
    if (wakeFd >= 0) {
      wakeIdx = n;
      p[n++] = (struct pollfd){wakeFd, POLLIN, 0};
    }
    int r = poll(p, (nfds_t)n, poll_timeout_ms(deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      return CCO_IO_ERROR;
    }
    if (wakeIdx >= 0 && (p[wakeIdx].revents & POLLIN)) return CCO_IO_WOKEN;
    if (r == 0) return CCO_IO_TIMEOUT;
  }
}

cco_io_status cco_socket_sendrecv(int sendFd, const void* sendBuf, size_t sendLen, int recvFd,
                                  void* recvBuf, size_t recvLen, double deadline, int wakeFd,
                                  int* failedFd) {
  cco_socket_xfer x = {sendFd, sendBuf, sendLen, 0, recvFd, recvBuf, recvLen, 0};
  return cco_socket_xfer_run(&x, deadline, wakeFd, failedFd);
}

cco_io_status cco_socket_send_all(int fd, const void* buf, size_t len, double deadline,
                                  int wakeFd) {
  return cco_socket_sendrecv(fd, buf, len, -1, NULL, 0, deadline, wakeFd, NULL);
}

cco_io_status cco_socket_recv_all(int fd, void* buf, size_t len, double deadline, int wakeFd) {
  return cco_socket_sendrecv(-1, NULL, 0, fd, buf, len, deadline, wakeFd, NULL);
}

void cco_socket_close(int* fd) {
  if (*fd >= 0) {
    close(*fd);
    *fd = -1;
  }
}

void cco_socket_close_reset(int* fd) {
  if (*fd >= 0) {
    struct linger lg = {1, 0};
    (void)setsockopt(*fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    close(*fd);
    *fd = -1;
  }
}
