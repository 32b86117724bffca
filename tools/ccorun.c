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
 */
#include <cco/cco.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
  EXIT_FAIL = 1,       /* a rank failed, or the job could not be started */
  EXIT_USAGE = 2,      /* bad command line */
  EXIT_TIMEOUT = 124,  /* --timeout passed (as timeout(1) does) */
  EXIT_NOEXEC = 127,   /* a child could not exec prog (as the shell does) */
};

#define DEFAULT_GRACE_S 2.0
#define DEFAULT_ID_WAIT_S 60.0
#define ID_POLL_MS 50
/* While stopping, a rank's group may outlive its leader; nothing signals us
 * when the group empties, so it is probed at this period until --grace. */
#define GROUP_PROBE_MS 50
#define READ_CHUNK 65536
/* A rank that writes this much without a newline gets it printed as a line
 * anyway, so that ccorun's memory stays bounded. */
#define MAX_HELD_LINE (1u << 20)
#define MAX_ID_FILE 4096
#define MAX_SECONDS 1e9

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
  int np;              /* ranks started here */
  int vhosts;          /* 0, or split the ranks started here into this many virtual hosts */
  int nranks;          /* ranks of the whole job */
  int offset;          /* global rank of the first rank started here */
  const char* id_file; /* --id-file, or NULL */
  const char* id_text; /* --id, or NULL */
  bool prefix;
  double timeout_s; /* 0: no time limit */
  double grace_s;
  char** env;  /* -x NAME=VALUE entries (pointers into argv) */
  int n_env;
  char** argv; /* prog and its arguments (NULL-terminated, from main's argv) */
} Options;

static void print_usage(FILE* f) {
  fputs(
      "Usage: ccorun -n N [options] [--] prog [args...]\n"
      "Starts N ranks of a cco job on this host. Each rank gets CCO_RANK,\n"
      "CCO_NRANKS, CCO_LOCAL_RANK, CCO_LOCAL_SIZE and CCO_UNIQUE_ID in its\n"
      "environment.\n"
      "\n"
      "  -n, --np N           ranks to start here (required, >= 1)\n"
      "      --nranks T       ranks of the whole job (default N)\n"
      "      --rank-offset R  global rank of the first rank started here\n"
      "                       (default 0; R + N <= T)\n"
      "      --id-file PATH   share the job's id through PATH: the launcher with\n"
      "                       rank offset 0 writes it, the others wait for it.\n"
      "                       Remove PATH before starting a new job.\n"
      "      --id HEX         use this id instead of minting one\n"
      "      --virtual-hosts K  split the ranks started here into K virtual hosts\n"
      "                       (contiguous blocks; CCO_HOSTID=virtual-host-J), so\n"
      "                       one machine plays several hosts\n"
      "  -p, --prefix         prefix every output line of a rank with \"[RANK] \"\n"
      "  -t, --timeout SEC    stop the job after SEC seconds, waiting for the id\n"
      "                       file included\n"
      "      --grace SEC      seconds between SIGTERM and SIGKILL when stopping\n"
      "                       ranks (default 2)\n"
      "  -x NAME=VALUE        extra environment for the ranks (repeatable)\n"
      "  -h, --help           show this help\n"
      "\n"
      "Exit status: 0 when every rank exits 0; 1 when a rank fails or the job\n"
      "cannot be started; 2 on bad usage; 124 when the time limit passes;\n"
      "128+SIG when ccorun gets signal SIG (SIGINT, SIGTERM or SIGHUP).\n",
      f);
}

/* One line "ccorun: ..." on stderr. */
static void say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "ccorun: %s\n", line);
}

static _Noreturn void usage_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void usage_error(const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr,
          "ccorun: %s\n"
          "Usage: ccorun -n N [options] [--] prog [args...]\n"
          "Run 'ccorun --help' for the options.\n",
          line);
  exit(EXIT_USAGE);
}

static int parse_int(const char* text, const char* what, long min) {
  char* end;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > INT_MAX)
    usage_error("%s wants an integer >= %ld, not '%s'", what, min, text);
  return (int)v;
}

static double parse_seconds(const char* text, const char* what, bool allow_zero) {
  char* end;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !isfinite(v) || v < 0 ||
      (v == 0 && !allow_zero) || v > MAX_SECONDS)
    usage_error("%s wants a number of seconds %s 0, not '%s'", what, allow_zero ? ">=" : ">",
                text);
  return v;
}

enum { OPT_NRANKS = 256, OPT_OFFSET, OPT_ID_FILE, OPT_ID, OPT_GRACE, OPT_VHOSTS };

static void parse_options(int argc, char** argv, Options* o) {
  static const struct option longopts[] = {
      {"np", required_argument, NULL, 'n'},
      {"nranks", required_argument, NULL, OPT_NRANKS},
      {"rank-offset", required_argument, NULL, OPT_OFFSET},
      {"id-file", required_argument, NULL, OPT_ID_FILE},
      {"id", required_argument, NULL, OPT_ID},
      {"prefix", no_argument, NULL, 'p'},
      {"timeout", required_argument, NULL, 't'},
      {"grace", required_argument, NULL, OPT_GRACE},
      {"virtual-hosts", required_argument, NULL, OPT_VHOSTS},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0},
  };
  *o = (Options){.np = 0, .nranks = 0, .offset = 0, .grace_s = DEFAULT_GRACE_S};
  o->env = calloc((size_t)argc, sizeof *o->env);
  if (o->env == NULL) {
    say("out of memory");
    exit(EXIT_FAIL);
  }
  opterr = 0; /* our own messages, without argv[0]'s full path */
  int c;
  /* '+': options end at prog, so prog's own options are left alone.
   * ':': a missing value is reported as ':' rather than '?'. */
  while ((c = getopt_long(argc, argv, "+:hn:pt:x:", longopts, NULL)) != -1) {
    switch (c) {
      case 'h': print_usage(stdout); exit(0);
      case 'n': o->np = parse_int(optarg, "-n", 1); break;
      case OPT_NRANKS: o->nranks = parse_int(optarg, "--nranks", 1); break;
      case OPT_OFFSET: o->offset = parse_int(optarg, "--rank-offset", 0); break;
      case OPT_ID_FILE: o->id_file = optarg; break;
      case OPT_ID: o->id_text = optarg; break;
      case 'p': o->prefix = true; break;
      case 't': o->timeout_s = parse_seconds(optarg, "--timeout", false); break;
      case OPT_GRACE: o->grace_s = parse_seconds(optarg, "--grace", true); break;
      case OPT_VHOSTS: o->vhosts = parse_int(optarg, "--virtual-hosts", 1); break;
      case 'x': {
        const char* eq = strchr(optarg, '=');
        if (eq == NULL || eq == optarg) usage_error("-x wants NAME=VALUE, not '%s'", optarg);
        o->env[o->n_env++] = optarg;
        break;
      }
      case ':': usage_error("option %s needs a value", argv[optind - 1]);
      default:
        if (optopt != 0) usage_error("unknown option -%c", optopt);
        usage_error("unknown option %s", argv[optind - 1]);
    }
  }
  if (o->np == 0) usage_error("-n N is required");
  if (optind >= argc) usage_error("no program to run");
  o->argv = argv + optind;
  if (o->nranks == 0) o->nranks = o->np;
  if ((long)o->offset + o->np > o->nranks)
    usage_error("--rank-offset %d + -n %d is more than the job's %d ranks", o->offset, o->np,
                o->nranks);
  if (o->id_file != NULL && o->id_text != NULL) usage_error("use --id-file or --id, not both");
  if (o->vhosts > o->np) usage_error("--virtual-hosts %d is more than the %d ranks started here", o->vhosts, o->np);
  /* Ranks started elsewhere must join with the same id: minting one here
   * would split the job. */
  if (o->nranks > o->np && o->id_file == NULL && o->id_text == NULL)
    usage_error("the job has %d ranks but only %d start here: share its id with --id-file "
                "(or --id)",
                o->nranks, o->np);
}

/* ------------------------------------------------------------------------ */
/* Time                                                                     */
/* ------------------------------------------------------------------------ */

#define NEVER INT64_MAX

static int64_t now_ns(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
    say("clock_gettime: %s", strerror(errno));
    abort(); /* cannot happen on Linux; no sane way to keep time without it */
  }
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t seconds_to_ns(double s) { return (int64_t)(s * 1e9); }

/* poll() timeout that wakes at `deadline` (or never), rounded up so that we
 * do not wake just before it and spin. */
static int ms_until(int64_t deadline) {
  if (deadline == NEVER) return -1;
  int64_t left = deadline - now_ns();
  if (left <= 0) return 0;
  int64_t ms = (left + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : (int)ms;
}

static int min_timeout(int a, int b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return a < b ? a : b;
}

/* ------------------------------------------------------------------------ */
/* Signals                                                                  */
/* ------------------------------------------------------------------------ */

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

static bool install_signals(void) {
  if (pipe2(g_self_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    say("pipe: %s", strerror(errno));
    return false;
  }
  if (sigprocmask(SIG_SETMASK, NULL, &g_saved_mask) != 0) {
    say("sigprocmask: %s", strerror(errno));
    return false;
  }
  for (int i = 0; i < N_SIGNALS; i++) {
    int sig = kSignals[i];
    if (sigaction(sig, NULL, &g_saved_action[i]) != 0) {
      say("sigaction: %s", strerror(errno));
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
      say("sigaction: %s", strerror(errno));
      return false;
    }
  }
  return true;
}

/* Blocks our signals around fork, so that a child never runs on_signal (it
 * would write into our self-pipe) before it has restored its dispositions. */
static bool block_signals(void) {
  sigset_t set;
  sigemptyset(&set);
  for (int i = 0; i < N_SIGNALS; i++) sigaddset(&set, kSignals[i]);
  if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
    say("sigprocmask: %s", strerror(errno));
    return false;
  }
  return true;
}

static void restore_signal_mask(void) {
  if (sigprocmask(SIG_SETMASK, &g_saved_mask, NULL) != 0) {
    say("sigprocmask: %s", strerror(errno));
    abort(); /* cannot fail with valid arguments */
  }
}

static void drain_self_pipe(void) {
  char buf[64];
  while (read(g_self_pipe[0], buf, sizeof buf) > 0) {
  }
}

static const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

/* ------------------------------------------------------------------------ */
/* Small I/O helpers                                                        */
/* ------------------------------------------------------------------------ */

/* Writes all of buf; waits out EAGAIN in case fd was left non-blocking by
 * someone sharing it. Returns false (errno set) on failure. */
static bool write_all(int fd, const char* buf, size_t len) {
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

static void close_fd(int* fd) {
  if (*fd >= 0 && close(*fd) != 0 && errno != EINTR) say("close: %s", strerror(errno));
  *fd = -1;
}

/* fds 0-2 must be open: otherwise pipe() could hand out fd 1 and a rank's
 * dup2 onto it would go wrong. */
static bool ensure_std_fds(void) {
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) >= 0) continue;
    if (errno != EBADF) return false;
    int nfd = open("/dev/null", O_RDWR);
    if (nfd < 0) return false;
    if (nfd != fd) { /* cannot happen: open returns the lowest free fd */
      close_fd(&nfd);
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------------------------------ */
/* The unique id                                                            */
/* ------------------------------------------------------------------------ */

typedef char IdText[CCO_UNIQUE_ID_STRING_BYTES];

static void say_cco_error(const char* what, ccoResult_t r) {
  const char* detail = ccoGetLastError(NULL);
  say("%s: %s%s%s", what, ccoGetErrorString(r), detail[0] ? ": " : "", detail);
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
    say("out of memory");
    return false;
  }
  memcpy(tmp, path, n);
  memcpy(tmp + n, ".XXXXXX", sizeof ".XXXXXX");
  bool ok = false;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    say("cannot create a file next to '%s': %s", path, strerror(errno));
    free(tmp);
    return false;
  }
  char text[sizeof(IdText) + 1];
  int len = snprintf(text, sizeof text, "%s\n", id);
  bool written = write_all(fd, text, (size_t)len);
  int write_errno = errno;
  if (close(fd) != 0 && written) {
    written = false;
    write_errno = errno;
  }
  if (!written)
    say("cannot write '%s': %s", tmp, strerror(write_errno));
  else if (rename(tmp, path) != 0)
    say("cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
  else
    ok = true;
  if (!ok && unlink(tmp) != 0) say("cannot remove '%s': %s", tmp, strerror(errno));
  free(tmp);
  return ok;
}

/* Reads path into text. Returns 1 when read, 0 when it does not exist yet,
 * -1 on error (reported). */
static int read_id_file(const char* path, char* text, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    say("cannot open '%s': %s", path, strerror(errno));
    return -1;
  }
  size_t len = 0;
  for (;;) {
    ssize_t r = read(fd, text + len, size - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      say("cannot read '%s': %s", path, strerror(errno));
      close_fd(&fd);
      return -1;
    }
    if (r == 0) break;
    len += (size_t)r;
    if (len == size - 1) {
      say("'%s' is too large to hold a unique id", path);
      close_fd(&fd);
      return -1;
    }
  }
  close_fd(&fd);
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
    if (now_ns() >= deadline) {
      say("id file '%s' did not appear within %g s", path, wait_s);
      return deadline_is_limit ? EXIT_TIMEOUT : EXIT_FAIL;
    }
    struct pollfd p = {.fd = g_self_pipe[0], .events = POLLIN};
    if (poll(&p, 1, min_timeout(ID_POLL_MS, ms_until(deadline))) < 0 && errno != EINTR) {
      say("poll: %s", strerror(errno));
      return EXIT_FAIL;
    }
    drain_self_pipe();
    if (g_stop_signal != 0) {
      say("received %s while waiting for id file '%s'", stop_signal_name(g_stop_signal), path);
      return 128 + g_stop_signal;
    }
  }
}

/* Puts the job's id into `out`. Returns 0, or the exit status for ccorun. */
static int obtain_id(const Options* o, int64_t deadline, IdText out) {
  if (o->id_text != NULL) return check_id(o->id_text, "--id", out) ? 0 : EXIT_FAIL;
  if (o->id_file == NULL) return mint_id(out) ? 0 : EXIT_FAIL;
  /* The host of global rank 0 mints: its rank 0 listens at the address the
   * id names. */
  if (o->offset == 0) return mint_id(out) && write_id_file(o->id_file, out) ? 0 : EXIT_FAIL;
  bool limited = o->timeout_s > 0;
  double wait_s = limited ? o->timeout_s : DEFAULT_ID_WAIT_S;
  if (!limited) deadline = now_ns() + seconds_to_ns(wait_s);
  return wait_id_file(o->id_file, deadline, limited, wait_s, out);
}

/* ------------------------------------------------------------------------ */
/* Ranks                                                                    */
/* ------------------------------------------------------------------------ */

/* One of a rank's output pipes (with --prefix). */
typedef struct {
  int fd;      /* read end, -1 once closed */
  int dest;    /* STDOUT_FILENO or STDERR_FILENO */
  char* buf;   /* bytes read but not printed: an unfinished line */
  size_t len;
  size_t cap;
} Stream;

typedef struct {
  int rank;        /* global rank */
  pid_t pid;       /* also its process group id */
  bool running;    /* started and not yet reaped */
  bool stopping;   /* its group was sent SIGTERM and must be gone, or killed */
  bool group_gone; /* its group is known to be empty */
  Stream out[2];   /* stdout, stderr */
} Rank;

enum { RUNNING, STOPPING };

typedef struct {
  const Options* opt;
  Rank* ranks;
  int n;
  int n_running;
  int state;
  int64_t deadline;       /* of --timeout, or NEVER */
  int64_t grace_deadline; /* while STOPPING: when SIGKILL follows */
  bool killed;            /* SIGKILL was sent */
  int stop_signals_seen;  /* g_stop_signals already acted on */
  bool dest_broken[3];    /* writing our stdout/stderr failed: drop output */
  int exit_status;
  char reason[512]; /* the one line printed at the end ("" when none) */
} Job;

static const char* plural(int n) { return n == 1 ? "" : "s"; }

/* Sends sig to the rank's process group. A rank that moved itself to
 * another group (setsid) is still reached by its pid. */
static void signal_rank(Rank* r, int sig) {
  if (r->group_gone) return;
  if (kill(-r->pid, sig) == 0) return;
  if (errno == ESRCH) {
    if (r->running && kill(r->pid, sig) != 0 && errno != ESRCH)
      say("cannot signal rank %d: %s", r->rank, strerror(errno));
    if (!r->running) r->group_gone = true;
    return;
  }
  say("cannot signal rank %d: %s", r->rank, strerror(errno));
  r->group_gone = true; /* EPERM: nothing more we can do about it */
}

/* Starts stopping the job: SIGTERM to every running rank (and to the group
 * of `failed`, which may have left children behind). Returns how many
 * running ranks were stopped. */
static int begin_stop(Job* job, Rank* failed) {
  int stopped = 0;
  job->state = STOPPING;
  job->grace_deadline = now_ns() + seconds_to_ns(job->opt->grace_s);
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
static _Noreturn void give_up(Job* job) {
  for (int i = 0; i < job->n; i++)
    if (job->ranks[i].running) signal_rank(&job->ranks[i], SIGKILL);
  exit(EXIT_FAIL);
}

static void describe_failure(Job* job, Rank* r, int status) {
  int stopped = begin_stop(job, r);
  char what[128];
  if (WIFEXITED(status))
    snprintf(what, sizeof what, "exited with status %d", WEXITSTATUS(status));
  else
    snprintf(what, sizeof what, "was killed by signal %d (%s)", WTERMSIG(status),
             strsignal(WTERMSIG(status)));
  snprintf(job->reason, sizeof job->reason, "rank %d %s; stopped %d other rank%s", r->rank, what,
           stopped, plural(stopped));
  job->exit_status = EXIT_FAIL;
}

/* Collects every exited rank (SIGCHLD has no count: reap until none). */
static void reap(Job* job) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid == 0) return;
    if (pid < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) return;
      say("waitpid: %s", strerror(errno));
      give_up(job);
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

/* Child side of spawn_rank: never returns. */
static _Noreturn void exec_rank(const Job* job, int stdin_fd, const int out_fds[2]) {
  char* const* argv = job->opt->argv;
  const char* step = "setpgid";
  bool ok = setpgid(0, 0) == 0;
  for (int i = 0; ok && i < N_SIGNALS; i++) {
    step = "sigaction";
    ok = sigaction(kSignals[i], &g_saved_action[i], NULL) == 0;
  }
  if (ok) {
    step = "sigprocmask";
    ok = sigprocmask(SIG_SETMASK, &g_saved_mask, NULL) == 0;
  }
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
  bool written = write_all(STDERR_FILENO, msg, (size_t)len);
  (void)written; /* nowhere else to report it */
  _exit(EXIT_NOEXEC);
}

static bool set_env_int(const char* name, int value) {
  char text[16];
  snprintf(text, sizeof text, "%d", value);
  if (setenv(name, text, 1) == 0) return true;
  say("setenv %s: %s", name, strerror(errno));
  return false;
}

/* Opens the two output pipes of a rank (for --prefix): the read end is ours
 * and non-blocking, the write end becomes the rank's stdout/stderr. */
static bool open_output_pipes(Rank* r, int child_fds[2]) {
  for (int i = 0; i < 2; i++) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
      say("cannot start rank %d: pipe: %s", r->rank, strerror(errno));
      return false;
    }
    r->out[i].fd = p[0];
    child_fds[i] = p[1];
    int flags = fcntl(p[0], F_GETFL);
    if (flags < 0 || fcntl(p[0], F_SETFL, flags | O_NONBLOCK) != 0) {
      say("cannot start rank %d: fcntl: %s", r->rank, strerror(errno));
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
    if (!ok) say("setenv CCO_HOSTID: %s", strerror(errno));
  }
  ok = ok && block_signals();
  if (ok) {
    pid_t pid = fork();
    if (pid == 0) exec_rank(job, stdin_fd, child_fds);
    int fork_errno = errno;
    restore_signal_mask();
    if (pid < 0) {
      say("cannot start rank %d: fork: %s", r->rank, strerror(fork_errno));
      ok = false;
    } else {
      r->pid = pid;
      r->running = true;
      job->n_running++;
      /* Also done here, so that the group exists before we may signal it.
       * EACCES: the child has exec'd, so it did it itself. */
      if (setpgid(pid, pid) != 0 && errno != EACCES && errno != ESRCH)
        say("setpgid for rank %d: %s", r->rank, strerror(errno));
    }
  }
  for (int i = 0; i < 2; i++) close_fd(&child_fds[i]);
  if (!ok)
    for (int i = 0; i < 2; i++) close_fd(&r->out[i].fd);
  return ok;
}

/* Environment shared by all ranks: -x entries first, so that they cannot
 * override what the launcher sets. */
static bool set_common_env(const Options* o, const IdText id) {
  for (int i = 0; i < o->n_env; i++) {
    char* eq = strchr(o->env[i], '=');
    *eq = '\0'; /* split in place: the entry lives in our argv */
    int rc = setenv(o->env[i], eq + 1, 1);
    *eq = '=';
    if (rc != 0) {
      say("-x %s: %s", o->env[i], strerror(errno));
      return false;
    }
  }
  if (setenv("CCO_UNIQUE_ID", id, 1) != 0) {
    say("setenv CCO_UNIQUE_ID: %s", strerror(errno));
    return false;
  }
  return set_env_int("CCO_NRANKS", o->nranks) && set_env_int("CCO_LOCAL_SIZE", o->np);
}

/* ------------------------------------------------------------------------ */
/* Prefixed output                                                          */
/* ------------------------------------------------------------------------ */

static void emit(Job* job, int dest, const char* buf, size_t len) {
  if (job->dest_broken[dest]) return;
  if (!write_all(dest, buf, len)) {
    job->dest_broken[dest] = true; /* e.g. `ccorun ... | head`: drop the rest */
    if (dest != STDERR_FILENO) say("cannot write output: %s", strerror(errno));
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
    say("out of memory");
    give_up(job);
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
  close_fd(&s->fd);
  free(s->buf);
  s->buf = NULL;
  s->len = s->cap = 0;
}

/* One read from a rank's pipe (one per wake-up keeps the ranks fair).
 * Returns true when data came, false at EOF or when nothing is there. */
static bool read_stream(Job* job, Stream* s, int rank) {
  if (s->cap - s->len < READ_CHUNK) {
    char* grown = realloc(s->buf, s->len + READ_CHUNK);
    if (grown == NULL) {
      say("out of memory");
      give_up(job);
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
    if (r < 0) say("reading output of rank %d: %s", rank, strerror(errno));
    close_stream(job, s, rank);
    return false;
  }
}

/* After the last rank is gone: print what is left in the pipes. A pipe still
 * held open by something the rank left behind is not waited for. */
static void drain_streams(Job* job) {
  for (int i = 0; i < job->n; i++) {
    for (int k = 0; k < 2; k++) {
      Stream* s = &job->ranks[i].out[k];
      while (s->fd >= 0 && read_stream(job, s, job->ranks[i].rank)) {
      }
      if (s->fd >= 0) close_stream(job, s, job->ranks[i].rank);
    }
  }
}

/* ------------------------------------------------------------------------ */
/* The event loop                                                           */
/* ------------------------------------------------------------------------ */

/* Acts on SIGINT/SIGTERM/SIGHUP: the first one stops the job, a later one
 * skips the rest of the grace period. */
static void check_signals(Job* job) {
  if (g_stop_signals == job->stop_signals_seen) return;
  job->stop_signals_seen = g_stop_signals;
  if (job->state == STOPPING) {
    job->grace_deadline = now_ns();
    return;
  }
  int sig = g_stop_signal;
  int stopped = begin_stop(job, NULL);
  snprintf(job->reason, sizeof job->reason, "received %s; stopped %d rank%s",
           stop_signal_name(sig), stopped, plural(stopped));
  job->exit_status = 128 + sig;
}

static void check_time_limit(Job* job) {
  if (job->state != RUNNING || now_ns() < job->deadline) return;
  int stopped = begin_stop(job, NULL);
  snprintf(job->reason, sizeof job->reason, "time limit of %g s passed; stopped %d rank%s",
           job->opt->timeout_s, stopped, plural(stopped));
  job->exit_status = EXIT_TIMEOUT;
}

/* While stopping: true once every stopped rank and its group is gone;
 * SIGKILL for what is left when the grace period ends. Sets *probe when a
 * group must be checked again later. */
static bool stop_finished(Job* job, bool* probe) {
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
  if (now_ns() >= job->grace_deadline) {
    for (int i = 0; i < job->n; i++)
      if (job->ranks[i].stopping) signal_rank(&job->ranks[i], SIGKILL);
    job->killed = true; /* from now on, only the leaders are waited for */
    *probe = false;
  }
  return false;
}

/* Runs until every rank is reaped (and, when stopping, its group gone). */
static void run_loop(Job* job) {
  struct pollfd* fds = calloc((size_t)(1 + 2 * job->n), sizeof *fds);
  Stream** streams = calloc((size_t)(1 + 2 * job->n), sizeof *streams);
  int* stream_rank = calloc((size_t)(1 + 2 * job->n), sizeof *stream_rank);
  if (fds == NULL || streams == NULL || stream_rank == NULL) {
    say("out of memory");
    give_up(job);
  }
  for (;;) {
    reap(job);
    check_signals(job);
    check_time_limit(job);
    int timeout = -1;
    if (job->state == RUNNING) {
      if (job->n_running == 0) break;
      timeout = ms_until(job->deadline);
    } else {
      bool probe;
      if (stop_finished(job, &probe)) break;
      if (!job->killed) timeout = ms_until(job->grace_deadline);
      if (probe) timeout = min_timeout(timeout, GROUP_PROBE_MS);
    }
    int nfds = 0;
    fds[nfds++] = (struct pollfd){.fd = g_self_pipe[0], .events = POLLIN};
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
      say("poll: %s", strerror(errno));
      give_up(job);
    }
    if (fds[0].revents != 0) drain_self_pipe();
    for (int i = 1; i < nfds; i++)
      if (fds[i].revents != 0) read_stream(job, streams[i], stream_rank[i]);
  }
  free(fds);
  free(streams);
  free(stream_rank);
  drain_streams(job);
}

/* ------------------------------------------------------------------------ */

/* Starts the ranks one by one; when one cannot be started, the job is
 * stopped (the loop then waits for the ones already running). */
static void start_ranks(Job* job) {
  /* The ranks run in background process groups: one reading a terminal
   * would be stopped by SIGTTIN and hang the job, so they get /dev/null. */
  int stdin_fd = -1;
  if (isatty(STDIN_FILENO) && (stdin_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
    say("cannot open /dev/null: %s", strerror(errno));
    job->exit_status = EXIT_FAIL; /* nothing started, nothing to stop */
    return;
  }
  for (int i = 0; i < job->n; i++) {
    Rank* r = &job->ranks[i];
    if (spawn_rank(job, r, i, stdin_fd)) continue;
    int stopped = begin_stop(job, NULL);
    snprintf(job->reason, sizeof job->reason, "could not start rank %d; stopped %d rank%s",
             r->rank, stopped, plural(stopped));
    job->exit_status = EXIT_FAIL;
    break;
  }
  close_fd(&stdin_fd);
}

/* Everything after the command line. Returns ccorun's exit status. */
static int run_job(const Options* opt) {
  int64_t start = now_ns();
  if (!ensure_std_fds()) {
    say("cannot open /dev/null: %s", strerror(errno));
    return EXIT_FAIL;
  }
  if (!install_signals()) return EXIT_FAIL;

  Job job = {.opt = opt, .n = opt->np, .state = RUNNING, .deadline = NEVER};
  if (opt->timeout_s > 0) job.deadline = start + seconds_to_ns(opt->timeout_s);

  IdText id;
  int rc = obtain_id(opt, job.deadline, id);
  if (rc != 0) return rc;
  if (!set_common_env(opt, id)) return EXIT_FAIL;

  job.ranks = calloc((size_t)opt->np, sizeof *job.ranks);
  if (job.ranks == NULL) {
    say("out of memory");
    return EXIT_FAIL;
  }
  for (int i = 0; i < opt->np; i++) {
    Rank* r = &job.ranks[i];
    r->rank = opt->offset + i;
    r->out[0] = (Stream){.fd = -1, .dest = STDOUT_FILENO};
    r->out[1] = (Stream){.fd = -1, .dest = STDERR_FILENO};
  }
  start_ranks(&job);
  run_loop(&job);
  if (job.reason[0] != '\0') say("%s", job.reason);
  free(job.ranks);
  return job.exit_status;
}

int main(int argc, char** argv) {
  Options opt;
  parse_options(argc, argv, &opt);
  int rc = run_job(&opt);
  free(opt.env);
  return rc;
}
