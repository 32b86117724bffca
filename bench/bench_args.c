/*
 * The benchmarks' shared command line (bench_args.h). Numbers go through
 * strtoull/strtoll with an end check and a range check, never atoi: a typo
 * must stop the run rather than measure something else.
 */
#include "bench_args.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ITERS_MAX 1000000000LL
#define FACTOR_MAX 1024ULL

/* One line saying what was wrong, one saying where to look; BENCH_ARGS_BAD. */
static int refuse(const bench_args* a, const char* fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", a->program);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n%s: run '%s --help' for the options\n", a->program, a->program);
  return BENCH_ARGS_BAD;
}

int bench_parse_size(const char* text, unsigned long long* out) {
  /* strtoull would take "-1" as a huge number and skip spaces: digits first. */
  if (!text || !isdigit((unsigned char)text[0])) return -1;
  errno = 0;
  char* end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno == ERANGE) return -1;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: return -1;
    }
    if (end[1] != '\0') return -1;
  }
  if (shift && v > (ULLONG_MAX >> shift)) return -1;
  *out = v << shift;
  return 0;
}

static int parse_int(const char* text, long long min, long long max, long long* out) {
  if (!text || !(isdigit((unsigned char)text[0]) || (text[0] == '-' && isdigit((unsigned char)text[1]))))
    return -1;
  errno = 0;
  char* end = NULL;
  long long v = strtoll(text, &end, 10);
  if (errno == ERANGE || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* Sizes of a sweep: at least one byte and the alignment, at most sizeMax. */
static int check_size(const bench_args* a, const char* opt, const char* text, unsigned long long* out) {
  unsigned long long v = 0;
  if (bench_parse_size(text, &v))
    return refuse(a, "%s: '%s' is not a size (a number with an optional K, M or G suffix)", opt, text);
  unsigned long long align = a->sizeAlign > 1 ? a->sizeAlign : 1;
  if (v == 0) return refuse(a, "%s: the size must be at least %llu bytes", opt, align);
  if (v % align) return refuse(a, "%s: %llu bytes is not a multiple of %llu", opt, v, align);
  if (a->sizeMax && v > a->sizeMax) return refuse(a, "%s: %llu bytes is more than the %llu this program takes",
                                                  opt, v, a->sizeMax);
  *out = v;
  return BENCH_ARGS_RUN;
}

static int check_int(const bench_args* a, const char* opt, const char* text, long long min, long long max,
                     long long* out) {
  if (parse_int(text, min, max, out))
    return refuse(a, "%s: '%s' is not an integer from %lld to %lld", opt, text, min, max);
  return BENCH_ARGS_RUN;
}

static int op_index(const bench_args* a, const char* name, size_t len) {
  for (int i = 0; a->ops && a->ops[i]; i++)
    if (strlen(a->ops[i]) == len && !strncmp(a->ops[i], name, len)) return i;
  return -1;
}

/* Names from a comma-separated list into opMask. */
static int pick_ops(bench_args* a, const char* list) {
  if (!a->ops) return refuse(a, "this program has no measurements to choose ('%s')", list);
  const char* p = list;
  for (;;) {
    size_t len = strcspn(p, ",");
    int i = op_index(a, p, len);
    if (i < 0) {
      char known[256] = "";
      for (int k = 0; a->ops[k]; k++) {
        size_t used = strlen(known);
        snprintf(known + used, sizeof(known) - used, "%s%s", k ? ", " : "", a->ops[k]);
      }
      return refuse(a, "unknown measurement '%.*s' (choose from %s)", (int)len, p, known);
    }
    a->opMask |= 1u << i;
    if (p[len] == '\0') return BENCH_ARGS_RUN;
    p += len + 1;
  }
}

static int parse_list(const bench_args* a, bench_opt* o, const char* text) {
  int n = 0;
  const char* p = text;
  for (;;) {
    char item[32];
    size_t len = strcspn(p, ",");
    if (len == 0 || len >= sizeof(item) || n == BENCH_LIST_MAX)
      return refuse(a, "--%s: '%s' is not a list of at most %d integers from %lld to %lld, comma-separated",
                    o->name, text, BENCH_LIST_MAX, o->min, o->max);
    memcpy(item, p, len);
    item[len] = '\0';
    if (parse_int(item, o->min, o->max, &o->list[n]))
      return refuse(a, "--%s: '%s' is not an integer from %lld to %lld", o->name, item, o->min, o->max);
    n++;
    if (p[len] == '\0') break;
    p += len + 1;
  }
  o->count = n;
  return BENCH_ARGS_RUN;
}

static int set_own(bench_args* a, bench_opt* o, const char* value) {
  char opt[64];
  snprintf(opt, sizeof(opt), "--%s", o->name);
  o->set = 1;
  if (o->kind == BENCH_OPT_LIST) return parse_list(a, o, value);
  if (o->kind == BENCH_OPT_SIZE) {
    unsigned long long v = 0;
    if (bench_parse_size(value, &v) || v > (unsigned long long)LLONG_MAX || (long long)v < o->min ||
        (long long)v > o->max)
      return refuse(a, "%s: '%s' is not a size from %lld to %lld bytes (K, M, G suffixes)", opt, value, o->min,
                    o->max);
    o->value = (long long)v;
    return BENCH_ARGS_RUN;
  }
  return check_int(a, opt, value, o->min, o->max, &o->value);
}

static void usage(const bench_args* a) {
  printf("usage: %s [options]%s\n%s\n\noptions:\n", a->program, a->ops ? " [measurement...]" : "",
         a->about ? a->about : "");
  if (a->takes & BENCH_TAKES_SIZES) {
    printf("  -b, --minbytes SIZE   smallest size (K, M, G suffixes: powers of 1024)\n");
    printf("  -e, --maxbytes SIZE   largest size\n");
    printf("  -f, --stepfactor N    multiply the size by N (2..%llu) each step\n", FACTOR_MAX);
    printf("  -i, --stepbytes SIZE  add SIZE each step instead\n");
    if (a->sizeAlign > 1) printf("                        (sizes are multiples of %llu bytes)\n", a->sizeAlign);
  }
  if (a->takes & BENCH_TAKES_ITERS) printf("  -n, --iters N         timed iterations of each measurement\n");
  if (a->takes & BENCH_TAKES_WARMUP) printf("  -w, --warmup N        warm-up iterations (0 allowed)\n");
  if (a->ops) {
    printf("      --op LIST         measurements to run, comma-separated (default: all):");
    for (int i = 0; a->ops[i]; i++) printf(" %s", a->ops[i]);
    printf("\n");
  }
  for (int i = 0; i < a->nOpts; i++) {
    const bench_opt* o = &a->opts[i];
    char flag[80];
    snprintf(flag, sizeof(flag), "--%s %s", o->name,
             o->kind == BENCH_OPT_LIST ? "LIST" : o->kind == BENCH_OPT_SIZE ? "SIZE" : "N");
    printf("      %-17s %s (%lld..%lld", flag, o->help, o->min, o->max);
    if (o->kind == BENCH_OPT_LIST) printf(")\n");
    else printf("; default %lld)\n", o->value);
  }
  printf("  -h, --help            this text\n");
  if (a->defaults) printf("\nleft out, each measurement keeps its own: %s\n", a->defaults);
  printf("\nOne JSON object per line and measurement on stdout (docs/perf.md); anything else on stderr.\n");
}

typedef enum { OPT_NONE, OPT_MIN, OPT_MAX, OPT_FACTOR, OPT_STEP, OPT_ITERS, OPT_WARMUP, OPT_OP, OPT_HELP } common_opt;

static const struct {
  char shortName;
  const char* longName;
  unsigned needs; /* BENCH_TAKES_* bit, 0 when always there */
  common_opt which;
} g_common[] = {
    {'b', "minbytes", BENCH_TAKES_SIZES, OPT_MIN},   {'e', "maxbytes", BENCH_TAKES_SIZES, OPT_MAX},
    {'f', "stepfactor", BENCH_TAKES_SIZES, OPT_FACTOR}, {'i', "stepbytes", BENCH_TAKES_SIZES, OPT_STEP},
    {'n', "iters", BENCH_TAKES_ITERS, OPT_ITERS},     {'w', "warmup", BENCH_TAKES_WARMUP, OPT_WARMUP},
    {0, "op", 0, OPT_OP},                             {'h', "help", 0, OPT_HELP},
};

static int set_common(bench_args* a, common_opt which, const char* opt, const char* value) {
  long long v = 0;
  int rc = BENCH_ARGS_RUN;
  switch (which) {
    case OPT_MIN: return check_size(a, opt, value, &a->minBytes);
    case OPT_MAX: return check_size(a, opt, value, &a->maxBytes);
    case OPT_STEP: return check_size(a, opt, value, &a->stepBytes);
    case OPT_FACTOR:
      rc = check_int(a, opt, value, 2, (long long)FACTOR_MAX, &v);
      a->stepFactor = (unsigned long long)v;
      return rc;
    case OPT_ITERS: return check_int(a, opt, value, 1, ITERS_MAX, &a->iters);
    case OPT_WARMUP:
      a->warmupSet = 1;
      return check_int(a, opt, value, 0, ITERS_MAX, &a->warmup);
    case OPT_OP: return pick_ops(a, value);
    default: return BENCH_ARGS_RUN;
  }
}

/* Checks that need every option seen: crossing ends, two kinds of step. */
static int check_whole(const bench_args* a) {
  if (a->minBytes && a->maxBytes && a->minBytes > a->maxBytes)
    return refuse(a, "-b %llu is more than -e %llu", a->minBytes, a->maxBytes);
  if (a->stepFactor && a->stepBytes) return refuse(a, "-f and -i exclude each other: step by a factor or by bytes");
  return BENCH_ARGS_RUN;
}

int bench_args_parse(bench_args* a, int argc, char** argv) {
  if (!a || !a->program || argc < 1 || !argv || a->nOpts < 0 || (a->nOpts && !a->opts)) {
    fprintf(stderr, "bench_args_parse: bad arguments\n");
    return BENCH_ARGS_BAD;
  }
  int words = 0; /* after "--" everything is a measurement name */
  for (int i = 1; i < argc; i++) {
    const char* arg = argv[i];
    if (words || arg[0] != '-' || arg[1] == '\0') {
      int rc = a->ops ? pick_ops(a, arg) : refuse(a, "unexpected argument '%s'", arg);
      if (rc != BENCH_ARGS_RUN) return rc;
      continue;
    }
    if (!strcmp(arg, "--")) {
      words = 1;
      continue;
    }
    /* -x VALUE, -xVALUE, --name VALUE, --name=VALUE */
    const char* inlineValue = NULL;
    char name[64];
    int isLong = arg[1] == '-';
    if (isLong) {
      size_t len = strcspn(arg + 2, "=");
      if (len >= sizeof(name)) return refuse(a, "unknown option '%s'", arg);
      memcpy(name, arg + 2, len);
      name[len] = '\0';
      if (arg[2 + len] == '=') inlineValue = arg + 3 + len;
    } else {
      name[0] = arg[1];
      name[1] = '\0';
      if (arg[2]) inlineValue = arg + 2;
    }
    common_opt which = OPT_NONE;
    bench_opt* own = NULL;
    for (size_t k = 0; k < sizeof(g_common) / sizeof(g_common[0]); k++) {
      int match = isLong ? !strcmp(name, g_common[k].longName) : name[0] == g_common[k].shortName;
      int offered = !g_common[k].needs || (a->takes & g_common[k].needs);
      if (match && offered && (g_common[k].which != OPT_OP || a->ops)) which = g_common[k].which;
    }
    for (int k = 0; isLong && which == OPT_NONE && k < a->nOpts; k++)
      if (!strcmp(name, a->opts[k].name)) own = &a->opts[k];
    if (which == OPT_NONE && !own) return refuse(a, "unknown option '%s'", arg);
    if (which == OPT_HELP) {
      if (inlineValue) return refuse(a, "'%s' takes no value", arg);
      usage(a);
      return BENCH_ARGS_HELP;
    }
    const char* value = inlineValue;
    if (!value) {
      if (i + 1 >= argc) return refuse(a, "'%s' needs a value", arg);
      value = argv[++i];
    }
    char opt[72];
    snprintf(opt, sizeof(opt), "%s%s", isLong ? "--" : "-", name);
    int rc = own ? set_own(a, own, value) : set_common(a, which, opt, value);
    if (rc != BENCH_ARGS_RUN) return rc;
  }
  return check_whole(a);
}

int bench_args_exit_status(int parseResult) { return parseResult == BENCH_ARGS_HELP ? 0 : 2; }

int bench_args_want(const bench_args* a, const char* op) {
  int i = op_index(a, op, strlen(op));
  if (i < 0) {
    /* A program asking for a name it did not declare is a bug in it. */
    fprintf(stderr, "%s: internal: measurement '%s' is not declared\n", a->program, op);
    abort();
  }
  return a->opMask == 0 || (a->opMask & (1u << i)) != 0;
}

long long bench_args_iters(const bench_args* a, long long measurementDefault) {
  return a->iters ? a->iters : measurementDefault;
}

long long bench_args_warmup(const bench_args* a, long long measurementDefault) {
  return a->warmupSet ? a->warmup : measurementDefault;
}

bench_sweep bench_args_sweep(const bench_args* a, unsigned long long dMin, unsigned long long dMax,
                             unsigned long long dFactor) {
  bench_sweep sw;
  sw.min = a->minBytes ? a->minBytes : dMin;
  sw.max = a->maxBytes ? a->maxBytes : dMax;
  if (!a->maxBytes && sw.max < sw.min) sw.max = sw.min;
  if (!a->minBytes && sw.min > sw.max) sw.min = sw.max;
  sw.step = a->stepBytes;
  sw.factor = a->stepBytes ? 0 : a->stepFactor ? a->stepFactor : dFactor;
  return sw;
}

unsigned long long bench_sweep_next(const bench_sweep* sw, unsigned long long s) {
  if (sw->step) return sw->step <= sw->max && s <= sw->max - sw->step ? s + sw->step : 0;
  if (sw->factor < 2) return 0; /* a single size */
  return s <= sw->max / sw->factor ? s * sw->factor : 0;
}
