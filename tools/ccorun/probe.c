/* Whether the launcher that wrote an id file still runs. The writer listens
 * on its host's address (the one the id names for rank 0) before it writes
 * the file, answers every connection with a random token, and keeps doing
 * so until it exits; the file names the port and the token. A reader that
 * connects and gets the token back knows the file belongs to a live job. A
 * refused connection means nobody listens there any more: the file is left
 * over from a launcher that is gone. Unlike rank 0's own port, which opens
 * only once rank 0 has started, this one is open from the moment the file
 * exists, so a slow rank 0 is never taken for a dead one. */
#include "ccorun.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* The host part of the id's root address ("192.0.2.7" from
 * "192.0.2.7:23456", "fe80::1%eth0" from "[fe80::1%eth0]:23456") as a
 * socket address with `port`. False, with why, when it cannot be had. */
static bool root_host(const IdText id, int port, struct sockaddr_storage* sa, socklen_t* len,
                      char* addr, size_t addr_size, char* why, size_t why_size) {
  ccoUniqueId uid;
  char text[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES];
  if (ccoUniqueIdFromString(id, &uid) != ccoSuccess ||
      ccoUniqueIdGetRootAddress(&uid, text, sizeof text) != ccoSuccess) {
    snprintf(why, why_size, "%s", ccoGetLastError(NULL));
    return false;
  }
  char* colon = strrchr(text, ':');
  if (colon == NULL) {
    snprintf(why, why_size, "root address '%s' has no port", text);
    return false;
  }
  *colon = '\0';
  char* host = text;
  if (host[0] == '[' && colon > host && colon[-1] == ']') {
    host++;
    colon[-1] = '\0';
  }
  struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                           .ai_socktype = SOCK_STREAM};
  struct addrinfo* res = NULL;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  int rc = getaddrinfo(host, service, &hints, &res);
  if (rc != 0) {
    snprintf(why, why_size, "cannot use address '%s': %s", host, gai_strerror(rc));
    return false;
  }
  memcpy(sa, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  snprintf(addr, addr_size, "%s%s%s:%d", sa->ss_family == AF_INET6 ? "[" : "", host,
           sa->ss_family == AF_INET6 ? "]" : "", port);
  return true;
}

bool ccorun_probe_token(ProbeToken out) {
  unsigned char raw[PROBE_TOKEN_BYTES];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    got += (size_t)n;
  }
  for (size_t i = 0; i < sizeof raw; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
  return true;
}

int ccorun_probe_listen(const IdText id, int* port) {
  struct sockaddr_storage sa;
  socklen_t len;
  char addr[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES + 16], why[256];
  if (!root_host(id, 0, &sa, &len, addr, sizeof addr, why, sizeof why)) {
    ccorun_say("cannot listen for readers of the id file: %s", why);
    return -1;
  }
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, (struct sockaddr*)&sa, len) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, (struct sockaddr*)&sa, &len) != 0) {
    ccorun_say("cannot listen for readers of the id file at %s: %s", addr, strerror(errno));
    ccorun_close_fd(&fd);
    return -1;
  }
  *port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6*)&sa)->sin6_port
                                         : ((struct sockaddr_in*)&sa)->sin_port);
  return fd;
}

void ccorun_probe_answer(int listen_fd, const ProbeToken token) {
  char line[sizeof(ProbeToken) + 1];
  int n = snprintf(line, sizeof line, "%s\n", token);
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return; /* EAGAIN: all answered; anything else: the reader retries or gives up */
    /* A few bytes into an empty socket buffer: never blocks, never short. */
    (void)send(fd, line, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(fd);
  }
}

/* Waits up to `ms` for `events` on fd. Returns 1 when they came, 0 on
 * timeout, -1 on error. */
static int wait_fd(int fd, short events, int ms) {
  int64_t deadline = ccorun_now_ns() + (int64_t)ms * 1000000;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = events};
    int n = poll(&p, 1, ccorun_ms_until(deadline));
    if (n > 0) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

bool ccorun_probe_check(const IdText id, int port, const ProbeToken token, int timeout_ms,
                        char* addr, size_t addr_size, char* why, size_t why_size) {
  struct sockaddr_storage sa;
  socklen_t len;
  snprintf(addr, addr_size, "?");
  if (!root_host(id, port, &sa, &len, addr, addr_size, why, why_size)) return false;
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(why, why_size, "socket: %s", strerror(errno));
    return false;
  }
  int err = connect(fd, (struct sockaddr*)&sa, len) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    int ready = wait_fd(fd, POLLOUT, timeout_ms);
    socklen_t elen = sizeof err;
    if (ready <= 0) err = ready == 0 ? ETIMEDOUT : errno;
    else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) err = errno;
  }
  char got[sizeof(ProbeToken) + 1];
  size_t n = 0;
  while (err == 0 && n < sizeof got - 1 && memchr(got, '\n', n) == NULL) {
    ssize_t r = recv(fd, got + n, sizeof got - 1 - n, 0);
    if (r > 0) n += (size_t)r;
    else if (r == 0) break;
    else if (errno == EINTR) continue;
    else if (errno != EAGAIN && errno != EWOULDBLOCK) err = errno;
    else if (wait_fd(fd, POLLIN, timeout_ms) <= 0) err = ETIMEDOUT;
  }
  close(fd);
  got[n] = '\0';
  if (err != 0) {
    snprintf(why, why_size, "%s", strerror(err));
    return false;
  }
  if (n != strlen(token) + 1 || strncmp(got, token, strlen(token)) != 0) {
    snprintf(why, why_size, "something else answers there (the port was taken again)");
    return false;
  }
  return true;
}
