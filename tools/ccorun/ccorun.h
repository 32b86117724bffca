/* ccorun's private header: what crosses its files. main.c describes how the
 * launcher works; each file says at its top what lives there.
 *
 *   options.c  the command line (Options, --help)
 *   util.c     messages, monotonic time, small fd helpers
 *   signals.c  signal handling: the self-pipe and what children restore
 *   id.c       the job's unique id: minted, given, or shared by an id file
 *   probe.c    whether the launcher that wrote an id file still runs
 *   spawn.c    starting the ranks: environment, fork+exec, output pipes
 *   stop.c     watching and stopping the ranks: reaping, SIGTERM/SIGKILL
 *   output.c   --prefix: the ranks' output, line by line
 *   main.c     the flow and the poll() loop
 */
#ifndef CCO_TOOLS_CCORUN_H_
#define CCO_TOOLS_CCORUN_H_

#include <cco/cco.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum {
  EXIT_FAIL = 1,       /* a rank failed, or the job could not be started */
  EXIT_USAGE = 2,      /* bad command line */
  EXIT_TIMEOUT = 124,  /* --timeout passed (as timeout(1) does) */
  EXIT_NOEXEC = 127,   /* a child could not exec prog (as the shell does) */
};

/* ---- options.c ---------------------------------------------------------- */

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

/* Fills *o from the command line; exits on bad usage (2) and for --help (0). */
void ccorun_parse_options(int argc, char** argv, Options* o);

/* ---- util.c ------------------------------------------------------------- */

void ccorun_say(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* ccorun_plural(int n);

#define NEVER INT64_MAX /* a deadline that never comes */

int64_t ccorun_now_ns(void);
int64_t ccorun_seconds_to_ns(double s);
int ccorun_ms_until(int64_t deadline);
int ccorun_min_timeout(int a, int b);

bool ccorun_write_all(int fd, const char* buf, size_t len);
void ccorun_close_fd(int* fd);
bool ccorun_ensure_std_fds(void);

/* ---- signals.c ---------------------------------------------------------- */

bool ccorun_install_signals(void);
bool ccorun_block_signals(void);
void ccorun_restore_signal_mask(void);
bool ccorun_restore_signals_in_child(const char** step);
int ccorun_signal_fd(void);
void ccorun_drain_self_pipe(void);
int ccorun_stop_signal(void);
int ccorun_stop_signal_count(void);
const char* ccorun_stop_signal_name(int sig);

/* ---- id.c --------------------------------------------------------------- */

typedef char IdText[CCO_UNIQUE_ID_STRING_BYTES];

int ccorun_obtain_id(const Options* o, int64_t deadline, IdText out);
/* The launcher that wrote an id file answers its readers' probes on this fd
 * (-1 when it wrote none) until it exits, and then removes the file. */
int ccorun_id_probe_fd(void);
void ccorun_id_answer_probes(void);

/* ---- probe.c ------------------------------------------------------------ */

#define PROBE_TOKEN_BYTES 16
typedef char ProbeToken[2 * PROBE_TOKEN_BYTES + 1]; /* hex */

bool ccorun_probe_token(ProbeToken out);
/* Listens on the id's root host, on a port of the kernel's choice (*port);
 * returns the fd, or -1 (said why). */
int ccorun_probe_listen(const IdText id, int* port);
/* Answers every waiting reader with the token. */
void ccorun_probe_answer(int listen_fd, const ProbeToken token);
/* Whether the id's root host answers `token` on `port` within about
 * timeout_ms; the address tried goes into addr, and why not into why. */
bool ccorun_probe_check(const IdText id, int port, const ProbeToken token, int timeout_ms,
                        char* addr, size_t addr_size, char* why, size_t why_size);

/* ---- the job: spawn.c, stop.c, output.c, main.c ------------------------- */

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
  int stop_signals_seen;  /* ccorun_stop_signal_count() already acted on */
  bool dest_broken[3];    /* writing our stdout/stderr failed: drop output */
  int exit_status;
  char reason[512]; /* the one line printed at the end ("" when none) */
} Job;

/* spawn.c */
bool ccorun_set_common_env(const Options* o, const IdText id);
void ccorun_start_ranks(Job* job);

/* stop.c */
int ccorun_begin_stop(Job* job, Rank* failed);
_Noreturn void ccorun_give_up(Job* job);
void ccorun_reap(Job* job);
bool ccorun_stop_finished(Job* job, bool* probe);

/* output.c */
bool ccorun_read_stream(Job* job, Stream* s, int rank);
void ccorun_drain_streams(Job* job);

#endif
