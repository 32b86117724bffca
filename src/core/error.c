/* Result strings and last-error bookkeeping. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"

static _Thread_local char t_last_error[512];

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

const char* ccoGetLastError(const ccoComm* comm) {
  if (!comm) return t_last_error;
  if (!cco_comm_is_valid(comm)) return "invalid communicator handle";
  return comm->lastError;
}

static void record(ccoComm* comm, const char* fmt, va_list ap, char* msg, size_t size) {
  vsnprintf(msg, size, fmt, ap);
  memcpy(t_last_error, msg, size);
  if (comm && cco_comm_is_valid(comm)) cco_comm_set_last_error(comm, msg);
}

ccoResult_t cco_error_quiet(ccoComm* comm, ccoResult_t result, const char* fmt, ...) {
  char msg[sizeof(t_last_error)];
  va_list ap;
  va_start(ap, fmt);
  record(comm, fmt, ap, msg, sizeof(msg));
  va_end(ap);
  return result;
}

ccoResult_t cco_error(ccoComm* comm, ccoResult_t result, cco_log_subsys subsys, const char* fmt,
                      ...) {
  char msg[sizeof(t_last_error)];
  va_list ap;
  va_start(ap, fmt);
  record(comm, fmt, ap, msg, sizeof(msg));
  va_end(ap);
  cco_log_level level =
      (result == ccoInvalidArgument || result == ccoInvalidUsage) ? CCO_LOG_INFO : CCO_LOG_WARN;
  if (cco_log_enabled(level, subsys))
    cco_log_write(level, subsys, "%s: %s", ccoGetErrorString(result), msg);
  return result;
}
