/* --prefix: each rank's stdout and stderr come through pipes, and every
 * complete line is printed with "[RANK] " in front, in one write, so that
 * lines of different ranks never mix. Without --prefix the ranks inherit
 * ccorun's stdout and stderr, and there are no pipes. */
#include "ccorun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK 65536
/* A rank that writes this much without a newline gets it printed as a line
 * anyway, so that ccorun's memory stays bounded. */
#define MAX_HELD_LINE (1u << 20)

static void emit(Job* job, int dest, const char* buf, size_t len) {
  if (job->dest_broken[dest]) return;
  if (!ccorun_write_all(dest, buf, len)) {
    job->dest_broken[dest] = true; /* e.g. `ccorun ... | head`: drop the rest */
    if (dest != STDERR_FILENO) ccorun_say("cannot write output: %s", strerror(errno));
  }
}

/* Prints the complete lines held in s (all of it when `all`, ending the last
 * line), each prefixed, in one write so lines of ranks never mix. */
static void flush_lines(Job* job, Stream* s, int rank, bool all) {
  size_t end = s->len;
  if (!all) {
    while (end > 0 && s->buf[end - 1] != '\n') end--;
    if (end == 0 && s->len >= MAX_HELD_LINE) end = s->len; /* see MAX_HELD_LINE */
  }
  if (end == 0) return;
  char prefix[24];
  size_t plen = (size_t)snprintf(prefix, sizeof prefix, "[%d] ", rank);
  size_t lines = 0;
  for (size_t i = 0; i < end; i++) lines += s->buf[i] == '\n';
  lines += s->buf[end - 1] != '\n'; /* an unfinished last line */
  char* text = malloc(end + lines * (plen + 1));
  if (text == NULL) {
    ccorun_say("out of memory");
    ccorun_give_up(job);
  }
  size_t n = 0;
  for (size_t i = 0; i < end;) {
    const char* nl = memchr(s->buf + i, '\n', end - i);
    size_t line = nl ? (size_t)(nl - (s->buf + i)) : end - i;
    memcpy(text + n, prefix, plen);
    memcpy(text + n + plen, s->buf + i, line);
    n += plen + line;
    text[n++] = '\n';
    i += line + (nl != NULL);
  }
  emit(job, s->dest, text, n);
  free(text);
  memmove(s->buf, s->buf + end, s->len - end);
  s->len -= end;
}

static void close_stream(Job* job, Stream* s, int rank) {
  flush_lines(job, s, rank, true);
  ccorun_close_fd(&s->fd);
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
}

/* One read from a rank's pipe (one per wake-up keeps the ranks fair).
 * Returns true when data came, false at EOF or when nothing is there. */
bool ccorun_read_stream(Job* job, Stream* s, int rank) {
  if (s->cap - s->len < READ_CHUNK) {
    char* grown = realloc(s->buf, s->len + READ_CHUNK);
    if (grown == NULL) {
      ccorun_say("out of memory");
      ccorun_give_up(job);
    }
    s->buf = grown;
    s->cap = s->len + READ_CHUNK;
  }
  for (;;) {
    ssize_t r = read(s->fd, s->buf + s->len, READ_CHUNK);
    if (r > 0) {
      s->len += (size_t)r;
      flush_lines(job, s, rank, false);
      return true;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno == EAGAIN) return false;
    if (r < 0) ccorun_say("reading output of rank %d: %s", rank, strerror(errno));
    close_stream(job, s, rank);
    return false;
  }
}

/* After the last rank is gone: print what is left in the pipes. A pipe still
 * held open by something the rank left behind is not waited for. */
void ccorun_drain_streams(Job* job) {
  for (int i = 0; i < job->n; i++) {
    for (int k = 0; k < 2; k++) {
      Stream* s = &job->ranks[i].out[k];
      while (s->fd >= 0 && ccorun_read_stream(job, s, job->ranks[i].rank)) {
      }
      if (s->fd >= 0) close_stream(job, s, job->ranks[i].rank);
    }
  }
}
