/*
 * ccorun — starts the local ranks of a cco job.
 *
 *   ccorun -n N [options] [--] prog [args...]
 *
 * Each rank is a fork+execvp of prog, in a process group of its own so that
 * stopping a rank also stops whatever it spawned. The ranks find each other
 * through the environment: CCO_RANK, CCO_NRANKS, CCO_LOCAL_RANK,
 * CCO_LOCAL_SIZE and CCO_UNIQUE_ID (read by ccoCommCreateFromEnv).
 *
 * Everything ccorun waits for — child exits, signals, the ranks' output and
 * the time limits — goes through one poll() loop: signal handlers only write
 * a byte to a self-pipe, and SIGCHLD leads to waitpid(WNOHANG) there.
 *
 * The job's fate is decided by the first event among: a rank exits non-zero
 * or dies of a signal, the time limit passes, ccorun gets SIGINT/SIGTERM/
 * SIGHUP. ccorun then stops the other ranks (SIGTERM to each group, SIGKILL
 * after --grace seconds), prints one line saying why, and exits non-zero.
 *
 * This file holds that flow: the poll() loop and what it decides, and
 * main(). ccorun.h lists the other files.
 */
#include "ccorun.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* While stopping, a rank's group may outlive its leader; nothing signals us
 * when the group empties, so it is probed at this period until --grace. */
#define GROUP_PROBE_MS 50

/* Acts on SIGINT/SIGTERM/SIGHUP: the first one stops the job, a later one
 * skips the rest of the grace period. */
static void check_signals(Job* job) {
  int seen = ccorun_stop_signal_count();
  if (seen == job->stop_signals_seen) return;
  job->stop_signals_seen = seen;
  if (job->state == STOPPING) {
    job->grace_deadline = ccorun_now_ns();
    return;
  }
  int sig = ccorun_stop_signal();
  int stopped = ccorun_begin_stop(job, NULL);
  snprintf(job->reason, sizeof job->reason, "received %s; stopped %d rank%s",
           ccorun_stop_signal_name(sig), stopped, ccorun_plural(stopped));
  job->exit_status = 128 + sig;
}

static void check_time_limit(Job* job) {
  if (job->state != RUNNING || ccorun_now_ns() < job->deadline) return;
  int stopped = ccorun_begin_stop(job, NULL);
  snprintf(job->reason, sizeof job->reason, "time limit of %g s passed; stopped %d rank%s",
           job->opt->timeout_s, stopped, ccorun_plural(stopped));
  job->exit_status = EXIT_TIMEOUT;
}

/* Runs until every rank is reaped (and, when stopping, its group gone). */
static void run_loop(Job* job) {
  struct pollfd* fds = calloc((size_t)(2 + 2 * job->n), sizeof *fds);
  Stream** streams = calloc((size_t)(2 + 2 * job->n), sizeof *streams);
  int* stream_rank = calloc((size_t)(2 + 2 * job->n), sizeof *stream_rank);
  if (fds == NULL || streams == NULL || stream_rank == NULL) {
    ccorun_say("out of memory");
    ccorun_give_up(job);
  }
  for (;;) {
    ccorun_reap(job);
    check_signals(job);
    check_time_limit(job);
    int timeout = -1;
    if (job->state == RUNNING) {
      if (job->n_running == 0) break;
      timeout = ccorun_ms_until(job->deadline);
    } else {
      bool probe;
      if (ccorun_stop_finished(job, &probe)) break;
      if (!job->killed) timeout = ccorun_ms_until(job->grace_deadline);
      if (probe) timeout = ccorun_min_timeout(timeout, GROUP_PROBE_MS);
    }
    int nfds = 0;
    fds[nfds++] = (struct pollfd){.fd = ccorun_signal_fd(), .events = POLLIN};
    /* Readers of our id file asking whether this job still runs (fd -1:
     * poll ignores the entry). */
    fds[nfds++] = (struct pollfd){.fd = ccorun_id_probe_fd(), .events = POLLIN};
    for (int i = 0; i < job->n; i++) {
      for (int k = 0; k < 2; k++) {
        Stream* s = &job->ranks[i].out[k];
        if (s->fd < 0) continue;
        streams[nfds] = s;
        stream_rank[nfds] = job->ranks[i].rank;
        fds[nfds++] = (struct pollfd){.fd = s->fd, .events = POLLIN};
      }
    }
    if (poll(fds, (nfds_t)nfds, timeout) < 0) {
      if (errno == EINTR) continue;
      ccorun_say("poll: %s", strerror(errno));
      ccorun_give_up(job);
    }
    if (fds[0].revents != 0) ccorun_drain_self_pipe();
    if (fds[1].revents != 0) ccorun_id_answer_probes();
    for (int i = 2; i < nfds; i++)
      if (fds[i].revents != 0) ccorun_read_stream(job, streams[i], stream_rank[i]);
  }
  free(fds);
  free(streams);
  free(stream_rank);
  ccorun_drain_streams(job);
}

/* Everything after the command line. Returns ccorun's exit status. */
static int run_job(const Options* opt) {
  int64_t start = ccorun_now_ns();
  if (!ccorun_ensure_std_fds()) {
    ccorun_say("cannot open /dev/null: %s", strerror(errno));
    return EXIT_FAIL;
  }
  if (!ccorun_install_signals()) return EXIT_FAIL;

  Job job = {.opt = opt, .n = opt->np, .state = RUNNING, .deadline = NEVER};
  if (opt->timeout_s > 0) job.deadline = start + ccorun_seconds_to_ns(opt->timeout_s);

  IdText id;
  int rc = ccorun_obtain_id(opt, job.deadline, id);
  if (rc != 0) return rc;
  if (!ccorun_set_common_env(opt, id)) return EXIT_FAIL;

  job.ranks = calloc((size_t)opt->np, sizeof *job.ranks);
  if (job.ranks == NULL) {
    ccorun_say("out of memory");
    return EXIT_FAIL;
  }
  for (int i = 0; i < opt->np; i++) {
    Rank* r = &job.ranks[i];
    r->rank = opt->offset + i;
    r->out[0] = (Stream){.fd = -1, .dest = STDOUT_FILENO};
    r->out[1] = (Stream){.fd = -1, .dest = STDERR_FILENO};
  }
  ccorun_start_ranks(&job);
  run_loop(&job);
  if (job.reason[0] != '\0') ccorun_say("%s", job.reason);
  free(job.ranks);
  return job.exit_status;
}

int main(int argc, char** argv) {
  Options opt;
  ccorun_parse_options(argc, argv, &opt);
  int rc = run_job(&opt);
  free(opt.env);
  return rc;
}
