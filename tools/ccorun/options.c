/* ccorun's command line: the options, their checks, and the help text.
 * Everything here either fills Options or exits (2 for bad usage, 0 for
 * --help), so the rest of ccorun only ever sees a valid command line. */
#include "ccorun.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_GRACE_S 2.0
#define MAX_SECONDS 1e9

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
      "                       rank offset 0 writes it and removes it at exit,\n"
      "                       the others wait for it. A PATH left behind by a\n"
      "                       launcher that was killed is refused as stale.\n"
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

void ccorun_parse_options(int argc, char** argv, Options* o) {
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
    ccorun_say("out of memory");
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
