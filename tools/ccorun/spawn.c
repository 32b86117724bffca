/* Starting the ranks. Each rank is a fork+execvp of prog in a process group
 * of its own; the environment common to all ranks is set once in ours, the
 * per-rank part (CCO_RANK, CCO_LOCAL_RANK, and CCO_HOSTID for
 * --virtual-hosts) just before each fork. */
#include "ccorun.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Child side of spawn_rank: never returns. */
static _Noreturn void exec_rank(const Job* job, int stdin_fd, const int out_fds[2]) {
  char* const* argv = job->opt->argv;
  const char* step = "setpgid";
  bool ok = setpgid(0, 0) == 0;
  if (ok) ok = ccorun_restore_signals_in_child(&step);
  if (ok && stdin_fd >= 0) {
    step = "dup2";
    ok = dup2(stdin_fd, STDIN_FILENO) >= 0;
  }
  for (int i = 0; ok && i < 2; i++) {
    step = "dup2";
    if (out_fds[i] >= 0) ok = dup2(out_fds[i], STDOUT_FILENO + i) >= 0;
  }
  char msg[PATH_MAX + 256];
  int len;
  if (ok) {
    execvp(argv[0], argv); /* the other fds are O_CLOEXEC: none leaks */
    len = snprintf(msg, sizeof msg, "ccorun: cannot run '%s': %s\n", argv[0], strerror(errno));
  } else {
    len = snprintf(msg, sizeof msg, "ccorun: cannot start '%s': %s: %s\n", argv[0], step,
                   strerror(errno));
  }
  if (len > (int)sizeof msg - 1) len = (int)sizeof msg - 1;
  bool written = ccorun_write_all(STDERR_FILENO, msg, (size_t)len);
  (void)written; /* nowhere else to report it */
  _exit(EXIT_NOEXEC);
}

static bool set_env_int(const char* name, int value) {
  char text[16];
  snprintf(text, sizeof text, "%d", value);
  if (setenv(name, text, 1) == 0) return true;
  ccorun_say("setenv %s: %s", name, strerror(errno));
  return false;
}

/* Opens the two output pipes of a rank (for --prefix): the read end is ours
 * and non-blocking, the write end becomes the rank's stdout/stderr. */
static bool open_output_pipes(Rank* r, int child_fds[2]) {
  for (int i = 0; i < 2; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      ccorun_say("cannot start rank %d: pipe: %s", r->rank, strerror(errno));
      return false;
    }
    r->out[i].fd = p[0];
    child_fds[i] = p[1];
    int flags = fcntl(p[0], F_GETFL);
    if (flags < 0 || fcntl(p[0], F_SETFL, flags | O_NONBLOCK) != 0) {
      ccorun_say("cannot start rank %d: fcntl: %s", r->rank, strerror(errno));
      return false;
    }
  }
  return true;
}

/* Starts rank r (local rank `local`). The environment common to all ranks
 * is already in ours; the per-rank part is set just before fork. */
static bool spawn_rank(Job* job, Rank* r, int local, int stdin_fd) {
  int child_fds[2] = {-1, -1};
  bool ok = true;
  if (job->opt->prefix) ok = open_output_pipes(r, child_fds);
  ok = ok && set_env_int("CCO_RANK", r->rank) && set_env_int("CCO_LOCAL_RANK", local);
  if (ok && job->opt->vhosts > 0) {
    char host[32];
    snprintf(host, sizeof host, "virtual-host-%d", local * job->opt->vhosts / job->opt->np);
    ok = setenv("CCO_HOSTID", host, 1) == 0;
    if (!ok) ccorun_say("setenv CCO_HOSTID: %s", strerror(errno));
  }
  ok = ok && ccorun_block_signals();
  if (ok) {
    pid_t pid = fork();
    if (pid == 0) exec_rank(job, stdin_fd, child_fds);
    int fork_errno = errno;
    ccorun_restore_signal_mask();
    if (pid < 0) {
      ccorun_say("cannot start rank %d: fork: %s", r->rank, strerror(fork_errno));
      ok = false;
    } else {
      r->pid = pid;
      r->running = true;
      job->n_running++;
      /* Also done here, so that the group exists before we may signal it.
       * EACCES: the child has exec'd, so it did it itself. */
      if (setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH)
        ccorun_say("setpgid for rank %d: %s", r->rank, strerror(errno));
    }
  }
  for (int i = 0; i < 2; i++) ccorun_close_fd(&child_fds[i]);
  if (!ok)
    for (int i = 0; i < 2; i++) ccorun_close_fd(&r->out[i].fd);
  return ok;
}

/* Environment shared by all ranks: -x entries first, so that they cannot
 * override what the launcher sets. */
bool ccorun_set_common_env(const Options* o, const IdText id) {
  for (int i = 0; i < o->n_env; i++) {
    char* eq = strchr(o->env[i], '=');
    *eq = '\0'; /* split in place: the entry lives in our argv */
    int rc = setenv(o->env[i], eq + 1, 1);
    *eq = '=';
    if (rc != 0) {
      ccorun_say("-x %s: %s", o->env[i], strerror(errno));
      return false;
    }
  }
  if (setenv("CCO_UNIQUE_ID", id, 1) != 0) {
    ccorun_say("setenv CCO_UNIQUE_ID: %s", strerror(errno));
    return false;
  }
  return set_env_int("CCO_NRANKS", o->nranks) && set_env_int("CCO_LOCAL_SIZE", o->np);
}

/* Starts the ranks one by one; when one cannot be started, the job is
 * stopped (the loop then waits for the ones already running). */
void ccorun_start_ranks(Job* job) {
  /* The ranks run in background process groups: one reading a terminal
   * would be stopped by SIGTTIN and hang the job, so they get /dev/null. */
  int stdin_fd = -1;
  if (isatty(STDIN_FILENO) && (stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    ccorun_say("cannot open /dev/null: %s", strerror(errno));
    job->exit_status = EXIT_FAIL; /* nothing started, nothing to stop */
    return;
  }
  for (int i = 0; i < job->n; i++) {
    Rank* r = &job->ranks[i];
    if (spawn_rank(job, r, i, stdin_fd)) continue;
    int stopped = ccorun_begin_stop(job, NULL);
    snprintf(job->reason, sizeof job->reason, "could not start rank %d; stopped %d rank%s",
             r->rank, stopped, ccorun_plural(stopped));
    job->exit_status = EXIT_FAIL;
    break;
  }
  ccorun_close_fd(&stdin_fd);
}
