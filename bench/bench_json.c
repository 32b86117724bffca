/* The benchmarks' JSON lines (bench_json.h). */
#include "bench_json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Appends to a buffer; a part that does not fit marks the line bad instead
 * of cutting a JSON object in the middle. */
static void append(char* buf, size_t size, int* overflow, const char* fmt, ...) {
  size_t used = strlen(buf);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + used, size - used, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size - used) {
    buf[used] = '\0';
    *overflow = 1;
  }
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void append_string(char* buf, size_t size, int* overflow, const char* s) {
  append(buf, size, overflow, "\"");
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') append(buf, size, overflow, "\\%c", c);
    else if (c < 0x20) append(buf, size, overflow, "\\u%04x", c);
    else append(buf, size, overflow, "%c", c);
  }
  append(buf, size, overflow, "\"");
}

/* Six significant digits; JSON has no NaN or infinity, so those are null. */
static void append_number(char* buf, size_t size, int* overflow, double v) {
  if (isfinite(v)) append(buf, size, overflow, "%.6g", v);
  else append(buf, size, overflow, "null");
}

void bench_line_start(bench_line* l, const char* bench, const char* op, long long bytes, int ranks, long long iters) {
  l->common[0] = l->extras[0] = '\0';
  l->overflow = 0;
  append(l->common, sizeof(l->common), &l->overflow, "\"bench\":");
  append_string(l->common, sizeof(l->common), &l->overflow, bench);
  append(l->common, sizeof(l->common), &l->overflow, ",\"op\":");
  append_string(l->common, sizeof(l->common), &l->overflow, op);
  if (bytes < 0) append(l->common, sizeof(l->common), &l->overflow, ",\"bytes\":null");
  else append(l->common, sizeof(l->common), &l->overflow, ",\"bytes\":%lld", bytes);
  append(l->common, sizeof(l->common), &l->overflow, ",\"ranks\":%d,\"iters\":%lld", ranks, iters);
}

static void append_key(bench_line* l, const char* key) {
  append(l->extras, sizeof(l->extras), &l->overflow, ",");
  append_string(l->extras, sizeof(l->extras), &l->overflow, key);
  append(l->extras, sizeof(l->extras), &l->overflow, ":");
}

void bench_line_str(bench_line* l, const char* key, const char* value) {
  append_key(l, key);
  append_string(l->extras, sizeof(l->extras), &l->overflow, value);
}

void bench_line_int(bench_line* l, const char* key, long long value) {
  append_key(l, key);
  append(l->extras, sizeof(l->extras), &l->overflow, "%lld", value);
}

void bench_line_num(bench_line* l, const char* key, double value) {
  append_key(l, key);
  append_number(l->extras, sizeof(l->extras), &l->overflow, value);
}

int bench_line_emit(const bench_line* l, const char* metric, double value, const char* ref) {
  char tail[128] = "";
  int overflow = l->overflow;
  append(tail, sizeof(tail), &overflow, ",\"metric\":");
  append_string(tail, sizeof(tail), &overflow, metric);
  append(tail, sizeof(tail), &overflow, ",\"value\":");
  append_number(tail, sizeof(tail), &overflow, value);
  append(tail, sizeof(tail), &overflow, ",\"ref\":");
  if (ref) append_string(tail, sizeof(tail), &overflow, ref);
  else append(tail, sizeof(tail), &overflow, "null");
  if (overflow) {
    fprintf(stderr, "bench_line_emit: a line of %s does not fit its buffer; not printed\n", metric);
    return -1;
  }
  printf("{%s%s%s}\n", l->common, tail, l->extras);
  fflush(stdout);
  return 0;
}
