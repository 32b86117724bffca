/*
 * What bench_args makes of a command line, for bench/tests/test_args.sh:
 * every common option, measurements and one option of each kind of the
 * program's own, then one line with what was parsed and the sweep it gives
 * (defaults -b 1K -e 1M -f 4, as a benchmark would pass them).
 */
#include <stdio.h>

#include "bench_args.h"

int main(int argc, char** argv) {
  static const char* const ops[] = {"put", "pingpong", "barrier", NULL};
  bench_opt opts[] = {
      {.name = "reps", .kind = BENCH_OPT_INT, .min = 1, .max = 64, .help = "repetitions", .value = 15},
      {.name = "block-bytes", .kind = BENCH_OPT_SIZE, .min = 4, .max = 1 << 20, .help = "bytes", .value = 2048},
      {.name = "ranks", .kind = BENCH_OPT_LIST, .min = 2, .max = 64, .help = "rank counts"},
  };
  bench_args a = {0};
  a.program = "args_probe";
  a.about = "Prints what bench_args parsed.";
  a.takes = BENCH_TAKES_SIZES | BENCH_TAKES_ITERS | BENCH_TAKES_WARMUP;
  a.ops = ops;
  a.opts = opts;
  a.nOpts = 3;
  a.sizeAlign = 4;
  a.sizeMax = 1ull << 30;
  int rc = bench_args_parse(&a, argc, argv);
  if (rc != BENCH_ARGS_RUN) return bench_args_exit_status(rc);
  bench_sweep sw = bench_args_sweep(&a, 1024, 1 << 20, 4);
  printf("sizes=");
  for (unsigned long long s = sw.min; s; s = bench_sweep_next(&sw, s))
    printf("%llu%s", s, bench_sweep_next(&sw, s) ? "," : "");
  printf(" iters=%lld warmup=%lld ops=", bench_args_iters(&a, 7), bench_args_warmup(&a, 3));
  for (int i = 0; ops[i]; i++)
    if (bench_args_want(&a, ops[i])) printf("%s;", ops[i]);
  printf(" reps=%lld block=%lld ranks=", opts[0].value, opts[1].value);
  for (int i = 0; i < opts[2].count; i++) printf("%lld;", opts[2].list[i]);
  printf("\n");
  return 0;
}
