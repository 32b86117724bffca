/*
 * The command line every benchmark program shares (C and CUDA): nccl-tests
 * style size sweeps (-b/-e/-f/-i), iteration and warm-up counts (-n/-w),
 * which measurements to run (--op, or their names as words), and options of
 * the program's own (integers, sizes or lists of integers).
 *
 * Options left out keep each measurement's own default (a benchmark whose
 * measurements differ in iteration count keeps them differing), so a run
 * without options measures what it always did. Bad input is refused with one
 * line on stderr and exit status 2; --help prints the options on stdout.
 *
 *   bench_args a = {0};
 *   a.program = "cco-bench-x"; a.about = "what it measures";
 *   a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS;
 *   int rc = bench_args_parse(&a, argc, argv);
 *   if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
 */
#ifndef CCO_BENCH_ARGS_H_
#define CCO_BENCH_ARGS_H_

#ifdef __cplusplus
extern "C" {
#endif

/* What bench_args_parse found. */
enum { BENCH_ARGS_RUN = 0, BENCH_ARGS_HELP = 1, BENCH_ARGS_BAD = 2 };

/* Common options a program takes (others are refused as unknown). */
enum {
  BENCH_TAKES_SIZES = 1u << 0,  /* -b -e -f -i */
  BENCH_TAKES_ITERS = 1u << 1,  /* -n */
  BENCH_TAKES_WARMUP = 1u << 2, /* -w */
};

enum { BENCH_OPT_INT = 0, BENCH_OPT_SIZE = 1, BENCH_OPT_LIST = 2 };
#define BENCH_LIST_MAX 16
#define BENCH_MAX_OPS 16

/* An option of the program's own, --name VALUE, checked against [min, max]. */
typedef struct {
  const char* name; /* without the dashes */
  int kind;         /* BENCH_OPT_INT, _SIZE (K/M/G suffixes) or _LIST (comma-separated integers) */
  long long min, max;
  const char* help;
  long long value; /* default before parsing; the parsed value after */
  long long list[BENCH_LIST_MAX];
  int count; /* entries of list */
  int set;   /* given on the command line */
} bench_opt;

typedef struct {
  /* Filled in by the program before parsing. */
  const char* program;
  const char* about;       /* one line for --help */
  unsigned takes;          /* BENCH_TAKES_* */
  const char* const* ops;  /* measurement names, NULL-terminated; NULL: none to pick */
  bench_opt* opts;         /* the program's own options */
  int nOpts;
  unsigned long long sizeAlign; /* sizes must be multiples of this (0 or 1: any) */
  unsigned long long sizeMax;   /* largest size accepted (0: no limit) */
  const char* defaults;         /* --help text: each measurement's sizes and counts */

  /* Parsed; 0 means "not given" (see bench_args_sweep, _iters, _warmup). */
  unsigned long long minBytes, maxBytes, stepFactor, stepBytes;
  long long iters, warmup;
  int warmupSet;    /* -w 0 is a value */
  unsigned opMask;  /* bit i: ops[i] asked for; 0: none named, so all */
} bench_args;

/* BENCH_ARGS_RUN, BENCH_ARGS_HELP (usage printed) or BENCH_ARGS_BAD (why printed). */
int bench_args_parse(bench_args* a, int argc, char** argv);
/* What main returns for a result other than BENCH_ARGS_RUN: 0 for help, 2 for bad input. */
int bench_args_exit_status(int parseResult);

/* Whether measurement `op` (one of a->ops) is to run. */
int bench_args_want(const bench_args* a, const char* op);
long long bench_args_iters(const bench_args* a, long long measurementDefault);
long long bench_args_warmup(const bench_args* a, long long measurementDefault);

/* A size sweep: min, min*factor, ... (or min, min+step, ...) up to max. */
typedef struct {
  unsigned long long min, max, factor, step;
} bench_sweep;

/* The sweep asked for, each end or step not given taking the measurement's
 * default; a given end moves the other one if they would cross. */
bench_sweep bench_args_sweep(const bench_args* a, unsigned long long dMin, unsigned long long dMax,
                             unsigned long long dFactor);
/* The size after s, or 0 past the end:
 *   for (unsigned long long s = sw.min; s; s = bench_sweep_next(&sw, s)) ... */
unsigned long long bench_sweep_next(const bench_sweep* sw, unsigned long long s);

/* "4096", "64K", "1M", "2G" (powers of 1024): 0 and *out on success, -1 otherwise. */
int bench_parse_size(const char* text, unsigned long long* out);

#ifdef __cplusplus
}
#endif

#endif /* CCO_BENCH_ARGS_H_ */
