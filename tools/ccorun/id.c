/* The job's unique id: given with --id, minted here, or shared between the
 * launchers of a job through --id-file (the one with rank offset 0 writes
 * it, the others wait for it). It reaches the ranks as CCO_UNIQUE_ID.
 *
 * An id file holds the id on its first line and, on a second, how to reach
 * the launcher that wrote it (probe.c):
 *
 *   ccorun-launcher PORT TOKEN PID HOST
 *
 * The writer removes the file when it exits. A file whose writer was killed
 * stays behind; a reader recognizes it because nobody answers TOKEN on PORT
 * of the id's host, waits a moment for a new file to replace it, and else
 * fails at once saying so, where the job would otherwise have waited for a
 * rank 0 that never comes. A file without the second line (written by
 * hand, or by an older ccorun) is taken as it is. */
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
#define LAUNCHER_TAG "ccorun-launcher"
/* How long a stale id file may take to be replaced by the launcher of the
 * new job, which may be starting at this very moment. */
#define STALE_WAIT_S 3.0
#define PROBE_TIMEOUT_MS 2000

/* What this launcher wrote, while it is the writer of an id file. */
static struct {
  char* path;
  char text[MAX_ID_FILE];
  ProbeToken token;
  int listen_fd;
  pid_t pid;
} g_written = {.listen_fd = -1};

/* What an id file says. */
typedef struct {
  IdText id;
  bool has_launcher;
  int port;
  ProbeToken token;
  long pid;
  char host[256];
} IdFile;

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

/* Writes text to a temporary file next to path and renames it over path,
 * so that a reader sees either no file or all of it. mkostemp creates it
 * 0600: whoever holds the id may join the job. */
static bool write_id_file(const char* path, const char* text) {
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
  bool written = ccorun_write_all(fd, text, strlen(text));
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

/* Splits an id file's text into the id (checked) and the launcher line, if
 * any. Says why and returns false when the id is not valid. */
static bool parse_id_file(char* text, const char* source, IdFile* f) {
  memset(f, 0, sizeof *f);
  char* rest = strchr(text, '\n');
  if (rest != NULL) *rest++ = '\0';
  if (!check_id(text, source, f->id)) return false;
  char tag[sizeof LAUNCHER_TAG];
  f->has_launcher = rest != NULL &&
                    sscanf(rest, "%15s %d %32[0-9a-f] %ld %255s", tag, &f->port, f->token, &f->pid,
                           f->host) == 5 &&
                    strcmp(tag, LAUNCHER_TAG) == 0 && f->port > 0 && f->port < 65536 &&
                    strlen(f->token) == sizeof(ProbeToken) - 1;
  return true;
}

/* Waits for another launcher to write path (polling every ID_POLL_MS; the
 * wait also wakes at once for a signal). A file whose launcher does not
 * answer is stale: it is given STALE_WAIT_S to be replaced, and then
 * refused. Returns 0 when the id is in `out`, else the exit status for
 * ccorun. */
static int wait_id_file(const char* path, int64_t deadline, bool deadline_is_limit,
                        double wait_s, IdText out) {
  char text[MAX_ID_FILE];
  char stale_text[MAX_ID_FILE] = ""; /* the content last found stale */
  char stale_why[PATH_MAX + 768];
  int64_t stale_since = 0;
  char source[PATH_MAX + 32];
  snprintf(source, sizeof source, "id file '%s'", path);
  for (;;) {
    int got = read_id_file(path, text, sizeof text);
    if (got < 0) return EXIT_FAIL;
    if (got == 0) stale_since = 0; /* removed: a new one may come */
    if (got > 0 && (stale_since == 0 || strcmp(text, stale_text) != 0)) {
      snprintf(stale_text, sizeof stale_text, "%s", text);
      IdFile f;
      if (!parse_id_file(text, source, &f)) return EXIT_FAIL;
      char addr[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES + 16], why[256];
      if (!f.has_launcher ||
          ccorun_probe_check(f.id, f.port, f.token, PROBE_TIMEOUT_MS, addr, sizeof addr, why,
                             sizeof why)) {
        memcpy(out, f.id, sizeof(IdText));
        return 0;
      }
      ccoUniqueId uid;
      char root[CCO_UNIQUE_ID_ADDRESS_STRING_BYTES] = "?";
      if (ccoUniqueIdFromString(f.id, &uid) == ccoSuccess)
        (void)ccoUniqueIdGetRootAddress(&uid, root, sizeof root);
      snprintf(stale_why, sizeof stale_why,
               "id file '%s' is stale: it names a root at %s, but the launcher that wrote it "
               "(pid %ld on %s) does not answer at %s (%s), so its job has ended. The file is "
               "probably left over from an earlier job: remove it",
               path, root, f.pid, f.host, addr, why);
      stale_since = ccorun_now_ns();
    }
    int64_t now = ccorun_now_ns();
    if (stale_since != 0 &&
        (now - stale_since >= ccorun_seconds_to_ns(STALE_WAIT_S) || now >= deadline)) {
      ccorun_say("%s", stale_why);
      return EXIT_FAIL;
    }
    if (now >= deadline) {
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

/* At exit: the file goes with the job, unless another launcher has put a
 * file of its own there since. Children that fail to exec leave by _exit
 * and never get here; the pid check is for any other path out of a child. */
static void remove_id_file(void) {
  if (g_written.path == NULL || getpid() != g_written.pid) return;
  char text[MAX_ID_FILE];
  int fd = open(g_written.path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n >= 0) text[n] = '\0';
    if (n >= 0 && strcmp(text, g_written.text) == 0 && unlink(g_written.path) != 0)
      ccorun_say("cannot remove id file '%s': %s", g_written.path, strerror(errno));
  }
  ccorun_close_fd(&g_written.listen_fd);
}

/* Writes the id file of this job with the launcher line, and keeps what
 * the readers' probes and the removal at exit need. Without a way to
 * answer probes (reported) the file holds the id alone. */
static bool publish_id(const char* path, const IdText id) {
  int port = 0;
  g_written.listen_fd = ccorun_probe_token(g_written.token) ? ccorun_probe_listen(id, &port) : -1;
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  host[strcspn(host, " \t\n")] = '\0';
  if (g_written.listen_fd >= 0)
    snprintf(g_written.text, sizeof g_written.text, "%s\n%s %d %s %ld %s\n", id, LAUNCHER_TAG, port,
             g_written.token, (long)getpid(), host[0] ? host : "?");
  else
    snprintf(g_written.text, sizeof g_written.text, "%s\n", id);
  if (!write_id_file(path, g_written.text)) {
    ccorun_close_fd(&g_written.listen_fd);
    return false;
  }
  g_written.path = strdup(path);
  g_written.pid = getpid();
  if (g_written.path == NULL || atexit(remove_id_file) != 0)
    ccorun_say("id file '%s' will not be removed at exit: out of memory", path);
  return true;
}

int ccorun_id_probe_fd(void) { return g_written.listen_fd; }

void ccorun_id_answer_probes(void) {
  if (g_written.listen_fd >= 0) ccorun_probe_answer(g_written.listen_fd, g_written.token);
}

/* Puts the job's id into `out`. Returns 0, or the exit status for ccorun. */
int ccorun_obtain_id(const Options* o, int64_t deadline, IdText out) {
  if (o->id_text != NULL) return check_id(o->id_text, "--id", out) ? 0 : EXIT_FAIL;
  if (o->id_file == NULL) return mint_id(out) ? 0 : EXIT_FAIL;
  /* The host of global rank 0 mints: its rank 0 listens at the address the
   * id names. */
  if (o->offset == 0) return mint_id(out) && publish_id(o->id_file, out) ? 0 : EXIT_FAIL;
  bool limited = o->timeout_s > 0;
  double wait_s = limited ? o->timeout_s : DEFAULT_ID_WAIT_S;
  if (!limited) deadline = ccorun_now_ns() + ccorun_seconds_to_ns(wait_s);
  return wait_id_file(o->id_file, deadline, limited, wait_s, out);
}
