/* Helpers every part of ccorun uses: its one-line messages, monotonic time
 * for the deadlines of the poll() waits, and small fd helpers. */
#include "ccorun.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* One line "ccorun: ..." on stderr. */
void ccorun_say(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "ccorun: %s\n", line);
}

const char* ccorun_plural(int n) { return n == 1 ? "" : "s"; }

int64_t ccorun_now_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
    ccorun_say("clock_gettime: %s", strerror(errno));
    abort(); /* cannot happen on Linux; no sane way to keep time without it */
  }
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t ccorun_seconds_to_ns(double s) { return (int64_t)(s * 1e9); }

/* poll() timeout that wakes at `deadline` (or never), rounded up so that we
 * do not wake just before it and spin. */
int ccorun_ms_until(int64_t deadline) {
  if (deadline == NEVER) return -1;
  int64_t left = deadline - ccorun_now_ns();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

int ccorun_min_timeout(int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return a < b ? a : b;
}

/* Writes all of buf; waits out EAGAIN in case fd was left non-blocking by
 * someone sharing it. Returns false (errno set) on failure. */
bool ccorun_write_all(int fd, const char* buf, size_t len) {
  while (len > 0) {
    ssize_t w = write(fd, buf, len);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, -1) < 0 && errno != EINTR) return false;
        continue;
      }
      return false;
    }
    buf += w;
    len -= (size_t)w;
  }
  return true;
}

void ccorun_close_fd(int* fd) {
  if (*fd >= 0 && close(*fd) != 0 && errno != EINTR) ccorun_say("close: %s", strerror(errno));
  *fd = -1;
}

/* fds 0-2 must be open: otherwise pipe() could hand out fd 1 and a rank's
 * dup2 onto it would go wrong. */
bool ccorun_ensure_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    if (errno != EBADF) return false;
    int nfd = open("/dev/null", O_RDWR);
    if (nfd < 0) return false;
    if (nfd != fd) { /* cannot happen: open returns the lowest free fd */
      ccorun_close_fd(&nfd);
      return false;
    }
  }
  return true;
}
