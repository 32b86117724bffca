/* ccorun's signal handling. Handlers only write a byte to a self-pipe that
 * the poll() waits (main.c's loop, id.c's wait for the id file) watch; the
 * first stop signal and their count are read from here. The state found at
 * start-up is kept so that children can restore it before exec. */
#include "ccorun.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The signals ccorun handles. The dispositions and mask found at start-up
 * are restored in each child before exec, so that ranks start as if run
 * directly (e.g. under nohup SIGHUP stays ignored). */
static const int kSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define N_SIGNALS ((int)(sizeof kSignals / sizeof kSignals[0]))
static struct sigaction g_saved_action[N_SIGNALS];
static sigset_t g_saved_mask;

static int g_self_pipe[2] = {-1, -1};
static volatile sig_atomic_t g_stop_signal;  /* first SIGINT/SIGTERM/SIGHUP */
static volatile sig_atomic_t g_stop_signals; /* how many of them so far */

static void on_signal(int sig) {
  int saved_errno = errno;
  if (sig != SIGCHLD) {
    if (g_stop_signal == 0) g_stop_signal = sig;
    g_stop_signals++;
  }
  char byte = (char)sig;
  /* Non-blocking: when the pipe is full a wake-up is pending anyway. */
  ssize_t ignored = write(g_self_pipe[1], &byte, 1);
  (void)ignored;
  errno = saved_errno;
}

bool ccorun_install_signals(void) {
  if (pipe2(g_self_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    ccorun_say("pipe: %s", strerror(errno));
    return false;
  }
  if (sigprocmask(SIG_SETMASK, NULL, &g_saved_mask) != 0) {
    ccorun_say("sigprocmask: %s", strerror(errno));
    return false;
  }
  for (int i = 0; i < N_SIGNALS; i++) {
    int sig = kSignals[i];
    if (sigaction(sig, NULL, &g_saved_action[i]) != 0) {
      ccorun_say("sigaction: %s", strerror(errno));
      return false;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    if (sig == SIGPIPE) {
      /* A closed stdout must not kill ccorun (and orphan the ranks); the
       * failed write is handled instead. */
      sa.sa_handler = SIG_IGN;
    } else if (sig != SIGCHLD && g_saved_action[i].sa_handler == SIG_IGN) {
      continue; /* ignored by whoever started us (nohup, `cmd &`): keep it so */
    } else {
      sa.sa_handler = on_signal;
      sa.sa_flags = SA_RESTART | (sig == SIGCHLD ? SA_NOCLDSTOP : 0);
    }
    if (sigaction(sig, &sa, NULL) != 0) {
      ccorun_say("sigaction: %s", strerror(errno));
      return false;
    }
  }
  return true;
}

/* Blocks our signals around fork, so that a child never runs on_signal (it
 * would write into our self-pipe) before it has restored its dispositions. */
bool ccorun_block_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  for (int i = 0; i < N_SIGNALS; i++) sigaddset(&set, kSignals[i]);
  if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
    ccorun_say("sigprocmask: %s", strerror(errno));
    return false;
  }
  return true;
}

void ccorun_restore_signal_mask(void) {
  if (sigprocmask(SIG_SETMASK, &g_saved_mask, NULL) != 0) {
    ccorun_say("sigprocmask: %s", strerror(errno));
    abort(); /* cannot fail with valid arguments */
  }
}

/* In a child, before exec: back to the dispositions and mask found at
 * start-up (see kSignals). On failure *step names the call that failed. */
bool ccorun_restore_signals_in_child(const char** step) {
  for (int i = 0; i < N_SIGNALS; i++) {
    *step = "sigaction";
    if (sigaction(kSignals[i], &g_saved_action[i], NULL) != 0) return false;
  }
  *step = "sigprocmask";
  return sigprocmask(SIG_SETMASK, &g_saved_mask, NULL) == 0;
}

/* The read end of the self-pipe: readable once a signal came. */
int ccorun_signal_fd(void) { return g_self_pipe[0]; }

void ccorun_drain_self_pipe(void) {
  char buf[64];
  while (read(g_self_pipe[0], buf, sizeof buf) > 0) {
  }
}

/* The first SIGINT/SIGTERM/SIGHUP (0 before one came), and how many so far. */
int ccorun_stop_signal(void) { return g_stop_signal; }
int ccorun_stop_signal_count(void) { return g_stop_signals; }

const char* ccorun_stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}
