/* Result strings and last-error bookkeeping. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char t_last_error[CCO_ERROR_TEXT_BYTES];

const char* ccoGetErrorString(ccoResult_t result) {
  switch (result) {
#define CCO_RESULT_CASE_(name, value, desc) \
  case name:                               \
    return desc;
    CCO_RESULT_LIST(CCO_RESULT_CASE_)
#undef CCO_RESULT_CASE_
    default:
      return "unknown result";
  }
}

const char* cco_thread_last_error(void) { return t_last_error; }

void cco_errsink_init(cco_errsink* sink) {
  pthread_mutex_init(&sink->lock, NULL);
  sink->text[0] = '\0';
}

void cco_errsink_fini(cco_errsink* sink) { pthread_mutex_destroy(&sink->lock); }

void cco_errsink_set(cco_errsink* sink, const char* text) {
  pthread_mutex_lock(&sink->lock);
  snprintf(sink->text, sizeof(sink->text), "%s", text);
  pthread_mutex_unlock(&sink->lock);
}

void cco_errsink_copy(cco_errsink* sink, char* out, size_t size) {
  pthread_mutex_lock(&sink->lock);
  snprintf(out, size, "%s", sink->text);
  pthread_mutex_unlock(&sink->lock);
}

static void record(cco_errsink* sink, const char* fmt, va_list ap, char* msg, size_t size) {
  vsnprintf(msg, size, fmt, ap);
  memcpy(t_last_error, msg, size);
  if (sink) cco_errsink_set(sink, msg);
}

ccoResult_t cco_error_quiet(cco_errsink* sink, ccoResult_t result, const char* fmt, ...) {
  char msg[sizeof(t_last_error)];
  va_list ap;
  va_start(ap, fmt);
  record(sink, fmt, ap, msg, sizeof(msg));
  va_end(ap);
  return result;
}

ccoResult_t cco_error(cco_errsink* sink, ccoResult_t result, cco_log_subsys subsys, const char* fmt,
                      ...) {
  char msg[sizeof(t_last_error)];
  va_list ap;
  va_start(ap, fmt);
  record(sink, fmt, ap, msg, sizeof(msg));
  va_end(ap);
  cco_log_level level =
      (result == ccoInvalidArgument || result == ccoInvalidUsage) ? CCO_LOG_INFO : CCO_LOG_WARN;
  if (cco_log_enabled(level, subsys))
    cco_log_write(level, subsys, "%s: %s", ccoGetErrorString(result), msg);
  return result;
}
