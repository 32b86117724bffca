/* Watching and stopping the ranks: reaping their exits, judging a failure,
 * and stopping them (SIGTERM to each rank's process group, SIGKILL after
 * --grace), or killing them outright when ccorun itself cannot go on. */
#include "ccorun.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Sends sig to the rank's process group. A rank that moved itself to
 * another group (setsid) is still reached by its pid. */
static void signal_rank(Rank* r, int sig) {
  if (r->group_gone) return;
  if (kill(-r->pid, sig) == 0) return;
  if (errno == ESRCH) {
    if (r->running && kill(r->pid, sig) != 0 && errno != ESRCH)
      ccorun_say("cannot signal rank %d: %s", r->rank, strerror(errno));
    if (!r->running) r->group_gone = true;
    return;
  }
  ccorun_say("cannot signal rank %d: %s", r->rank, strerror(errno));
  r->group_gone = true; /* EPERM: nothing more we can do about it */
}

/* Starts stopping the job: SIGTERM to every running rank (and to the group
 * of `failed`, which may have left children behind). Returns how many
 * running ranks were stopped. */
int ccorun_begin_stop(Job* job, Rank* failed) {
  int stopped = 0;
  job->state = STOPPING;
  job->grace_deadline = ccorun_now_ns() + ccorun_seconds_to_ns(job->opt->grace_s);
  for (int i = 0; i < job->n; i++) {
    Rank* r = &job->ranks[i];
    if (r != failed && !r->running) continue;
    r->stopping = true;
    signal_rank(r, SIGTERM);
    if (r->running) stopped++;
  }
  return stopped;
}

/* Last resort when ccorun itself cannot go on: take the ranks down with it
 * rather than leave them running unattended. */
_Noreturn void ccorun_give_up(Job* job) {
  for (int i = 0; i < job->n; i++)
    if (job->ranks[i].running) signal_rank(&job->ranks[i], SIGKILL);
  exit(EXIT_FAIL);
}

static void describe_failure(Job* job, Rank* r, int status) {
  int stopped = ccorun_begin_stop(job, r);
  char what[128];
  if (WIFEXITED(status))
    snprintf(what, sizeof what, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(what, sizeof what, "was killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  snprintf(job->reason, sizeof job->reason, "rank %d %s; stopped %d other rank%s", r->rank, what,
           stopped, ccorun_plural(stopped));
  job->exit_status = EXIT_FAIL;
}

/* Collects every exited rank (SIGCHLD has no count: reap until none). */
void ccorun_reap(Job* job) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0) return;
    if (pid < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) return;
      ccorun_say("waitpid: %s", strerror(errno));
      ccorun_give_up(job);
    }
    for (int i = 0; i < job->n; i++) {
      Rank* r = &job->ranks[i];
      if (r->pid != pid || !r->running) continue;
      r->running = false;
      job->n_running--;
      bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && job->state == RUNNING) describe_failure(job, r, status);
      break;
    }
  }
}

/* While stopping: true once every stopped rank and its group is gone;
 * SIGKILL for what is left when the grace period ends. Sets *probe when a
 * group must be checked again later. */
bool ccorun_stop_finished(Job* job, bool* probe) {
  *probe = false;
  bool done = true;
  for (int i = 0; i < job->n; i++) {
    Rank* r = &job->ranks[i];
    if (!r->stopping) continue;
    if (r->running) {
      done = false;
    } else if (!r->group_gone && !job->killed) {
      /* The leader is reaped; its group may live on in its children. */
      if (kill(-r->pid, 0) != 0 && errno == ESRCH) {
        r->group_gone = true;
      } else {
        done = false;
        *probe = true;
      }
    }
  }
  if (done || job->killed) return job->n_running == 0;
  if (ccorun_now_ns() >= job->grace_deadline) {
    for (int i = 0; i < job->n; i++)
      if (job->ranks[i].stopping) signal_rank(&job->ranks[i], SIGKILL);
    job->killed = true; /* from now on, only the leaders are waited for */
    *probe = false;
  }
  return false;
}
