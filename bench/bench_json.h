/*
 * The benchmarks' JSON lines (docs/perf.md): one object per line and
 * measurement, starting with the keys every line has,
 *
 *   {"bench":"lsa","op":"lsa_put","bytes":268435456,"ranks":2,"iters":10,
 *    "metric":"GBps","value":1927.4,"ref":null, ...extras}
 *
 * where "ref" names the reference when the line measures one (null for
 * cco's own figure) and the extras say what else tells the line apart
 * (writers, provider, ...). A figure and its references share everything
 * but metric, value and ref, so one bench_line makes all of them:
 *
 *   bench_line l;
 *   bench_line_start(&l, "lsa", "lsa_put", bytes, ranks, iters);
 *   bench_line_int(&l, "writers", 1);
 *   bench_line_emit(&l, "GBps", putGBps, NULL);
 *   bench_line_emit(&l, "GBps", memcpyGBps, "cudaMemcpy");
 */
#ifndef CCO_BENCH_JSON_H_
#define CCO_BENCH_JSON_H_

#ifdef __cplusplus
extern "C" {
#endif

/* bytes for a measurement without a size: written as null. */
#define BENCH_NO_BYTES (-1LL)

typedef struct {
  char common[256];
  char extras[768];
  int overflow; /* an extra did not fit: emit refuses the line */
} bench_line;

void bench_line_start(bench_line* l, const char* bench, const char* op, long long bytes, int ranks, long long iters);
void bench_line_str(bench_line* l, const char* key, const char* value);
void bench_line_int(bench_line* l, const char* key, long long value);
void bench_line_num(bench_line* l, const char* key, double value);
/* Prints the line with this metric, value and reference (NULL: cco's own)
 * on stdout and flushes it. Returns 0, or -1 (and says so on stderr) when
 * the extras overflowed. */
int bench_line_emit(const bench_line* l, const char* metric, double value, const char* ref);

#ifdef __cplusplus
}
#endif

#endif /* CCO_BENCH_JSON_H_ */
