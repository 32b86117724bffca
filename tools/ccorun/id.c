/* The job's unique id: given with --id, minted here, or shared between the
 * launchers of a job through --id-file (the one with rank offset 0 writes
 * it, the others wait for it). It reaches the ranks as CCO_UNIQUE_ID. */
#include "ccorun.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_ID_WAIT_S 60.0
#define ID_POLL_MS 50
#define MAX_ID_FILE 4096

static void say_cco_error(const char* what, ccoResult_t r) {
  const char* detail = ccoGetLastError(NULL);
  ccorun_say("%s: %s%s%s", what, ccoGetErrorString(r), detail[0] ? ": " : "", detail);
}

/* Parses text as an id and writes its canonical form, so that a corrupt id
 * fails here with a clear message rather than later in every rank. */
static bool check_id(const char* text, const char* source, IdText out) {
  ccoUniqueId id;
  ccoResult_t r = ccoUniqueIdFromString(text, &id);
  if (r != ccoSuccess) {
    char what[PATH_MAX + 64];
    snprintf(what, sizeof what, "%s does not hold a valid unique id", source);
    say_cco_error(what, r);
    return false;
  }
  r = ccoUniqueIdToString(&id, out, sizeof(IdText));
  if (r != ccoSuccess) {
    say_cco_error("cannot format the unique id", r);
    return false;
  }
  return true;
}

static bool mint_id(IdText out) {
  ccoUniqueId id;
  ccoResult_t r = ccoGetUniqueId(&id);
  if (r == ccoSuccess) r = ccoUniqueIdToString(&id, out, sizeof(IdText));
  if (r != ccoSuccess) {
    say_cco_error("cannot create a unique id", r);
    return false;
  }
  return true;
}

/* Writes the id to a temporary file next to path and renames it over path,
 * so that a reader sees either no file or all of it. mkostemp creates it
 * 0600: whoever holds the id may join the job. */
static bool write_id_file(const char* path, const IdText id) {
  size_t n = strlen(path);
  char* tmp = malloc(n + sizeof ".XXXXXX");
  if (tmp == NULL) {
    ccorun_say("out of memory");
    return false;
  }
  memcpy(tmp, path, n);
  memcpy(tmp + n, ".XXXXXX", sizeof ".XXXXXX");
  bool ok = false;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    ccorun_say("cannot create a file next to '%s': %s", path, strerror(errno));
    free(tmp);
    return false;
  }
  char text[sizeof(IdText) + 1];
  int len = snprintf(text, sizeof text, "%s\n", id);
  bool written = ccorun_write_all(fd, text, (size_t)len);
  int write_errno = errno;
  if (close(fd) != 0 && written) {
    written = false;
    write_errno = errno;
  }
  if (!written)
    ccorun_say("cannot write '%s': %s", tmp, strerror(write_errno));
  else if (rename(tmp, path) != 0)
    ccorun_say("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
  else
    ok = true;
  if (!ok && unlink(tmp) != 0) ccorun_say("cannot remove '%s': %s", tmp, strerror(errno));
  free(tmp);
  return ok;
}

/* Reads path into text. Returns 1 when read, 0 when it does not exist yet,
 * -1 on error (reported). */
static int read_id_file(const char* path, char* text, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    ccorun_say("cannot open '%s': %s", path, strerror(errno));
    return -1;
  }
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, text + len, size - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ccorun_say("cannot read '%s': %s", path, strerror(errno));
      ccorun_close_fd(&fd);
      return -1;
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == size - 1) {
      ccorun_say("'%s' is too large to hold a unique id", path);
      ccorun_close_fd(&fd);
      return -1;
    }
  }
  ccorun_close_fd(&fd);
  text[len] = '\0';
  return 1;
}

/* Waits for another launcher to write path (polling every ID_POLL_MS; the
 * wait also wakes at once for a signal). Returns 0 when the id is in `out`,
 * else the exit status for ccorun. */
static int wait_id_file(const char* path, int64_t deadline, bool deadline_is_limit,
                        double wait_s, IdText out) {
  char text[MAX_ID_FILE];
  char source[PATH_MAX + 32];
  snprintf(source, sizeof source, "id file '%s'", path);
  for (;;) {
    int got = read_id_file(path, text, sizeof text);
    if (got < 0) return EXIT_FAIL;
    if (got > 0) return check_id(text, source, out) ? 0 : EXIT_FAIL;
    if (ccorun_now_ns() >= deadline) {
      ccorun_say("id file '%s' did not appear within %g s", path, wait_s);
      return deadline_is_limit ? EXIT_TIMEOUT : EXIT_FAIL;
    }
    struct pollfd p = {.fd = ccorun_signal_fd(), .events = POLLIN};
    if (poll(&p, 1, ccorun_min_timeout(ID_POLL_MS, ccorun_ms_until(deadline))) < 0 &&
        errno != EINTR) {
      ccorun_say("poll: %s", strerror(errno));
      return EXIT_FAIL;
    }
    ccorun_drain_self_pipe();
    int sig = ccorun_stop_signal();
    if (sig != 0) {
      ccorun_say("received %s while waiting for id file '%s'", ccorun_stop_signal_name(sig), path);
      return 128 + sig;
    }
  }
}

/* Puts the job's id into `out`. Returns 0, or the exit status for ccorun. */
int ccorun_obtain_id(const Options* o, int64_t deadline, IdText out) {
  if (o->id_text != NULL) return check_id(o->id_text, "--id", out) ? 0 : EXIT_FAIL;
  if (o->id_file == NULL) return mint_id(out) ? 0 : EXIT_FAIL;
  /* The host of global rank 0 mints: its rank 0 listens at the address the
   * id names. */
  if (o->offset == 0) return mint_id(out) && write_id_file(o->id_file, out) ? 0 : EXIT_FAIL;
  bool limited = o->timeout_s > 0;
  double wait_s = limited ? o->timeout_s : DEFAULT_ID_WAIT_S;
  if (!limited) deadline = ccorun_now_ns() + ccorun_seconds_to_ns(wait_s);
  return wait_id_file(o->id_file, deadline, limited, wait_s, out);
}
