/* Error recording: detail strings per thread and per communicator. */
#ifndef CCO_CORE_ERROR_H_
#define CCO_CORE_ERROR_H_

#include "cco/cco.h"
#include "log.h"

/* Formats the detail of a failure, stores it as the calling thread's last
 * error and (when comm != NULL) the communicator's, logs it once (WARN for
 * failures of the system or of peers, INFO for caller mistakes) and returns
 * `result` so call sites can write `return cco_error(...)`. */
ccoResult_t cco_error(ccoComm* comm, ccoResult_t result, cco_log_subsys subsys, const char* fmt,
                      ...) __attribute__((format(printf, 4, 5)));

/* Same, without a log line: for failures already logged where found. */
ccoResult_t cco_error_quiet(ccoComm* comm, ccoResult_t result, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Thread-local last error (also used by ccoGetLastError(NULL)). */
const char* cco_thread_last_error(void);

#define CCO_CHECK(call)                     \
  do {                                      \
    ccoResult_t cco_check_res_ = (call);    \
    if (cco_check_res_ != ccoSuccess) return cco_check_res_; \
  } while (0)

#define CCO_CHECK_GOTO(call, res, label) \
  do {                                   \
    (res) = (call);                      \
    if ((res) != ccoSuccess) goto label; \
  } while (0)

#endif /* CCO_CORE_ERROR_H_ */
