/*
 * Error detail: every failure is recorded once, where it is found, as a
 * line of text kept for the calling thread and for the object it concerns.
 *
 * The object is an error sink (a communicator embeds one). Layers below
 * the communicator take the sink they should write to, never the
 * communicator, so they need not know what owns it.
 */
#ifndef CCO_BASE_ERROR_H_
#define CCO_BASE_ERROR_H_

#include <pthread.h>

#include "base/log.h"
#include "cco/cco.h"

#define CCO_ERROR_TEXT_BYTES 512

/* Where the detail of a failure is kept besides the thread's last error. */
typedef struct cco_errsink {
  pthread_mutex_t lock;
  char text[CCO_ERROR_TEXT_BYTES];
} cco_errsink;

void cco_errsink_init(cco_errsink* sink);
void cco_errsink_fini(cco_errsink* sink);
/* Replaces the sink's text (also for messages that are not failures). */
void cco_errsink_set(cco_errsink* sink, const char* text);
/* Copies the sink's text: background threads may replace it meanwhile. */
void cco_errsink_copy(cco_errsink* sink, char* out, size_t size);

/* Formats the detail of a failure, stores it as the calling thread's last
 * error and (when sink != NULL) the sink's, logs it once (WARN for failures
 * of the system or of peers, INFO for caller mistakes) and returns `result`
 * so call sites can write `return cco_error(...)`. */
ccoResult_t cco_error(cco_errsink* sink, ccoResult_t result, cco_log_subsys subsys,
                      const char* fmt, ...) __attribute__((format(printf, 4, 5)));

/* Same, without a log line: for failures already logged where found. */
ccoResult_t cco_error_quiet(cco_errsink* sink, ccoResult_t result, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Thread-local last error (also what ccoGetLastError(NULL) returns). */
const char* cco_thread_last_error(void);

#define CCO_CHECK(call)                                      \
  do {                                                       \
    ccoResult_t cco_check_res_ = (call);                     \
    if (cco_check_res_ != ccoSuccess) return cco_check_res_; \
  } while (0)

#define CCO_CHECK_GOTO(call, res, label) \
  do {                                   \
    (res) = (call);                      \
    if ((res) != ccoSuccess) goto label; \
  } while (0)

#endif /* CCO_BASE_ERROR_H_ */
