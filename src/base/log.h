/* Logging: CCO_DEBUG level, CCO_DEBUG_SUBSYS filter, CCO_DEBUG_FILE target. */
#ifndef CCO_BASE_LOG_H_
#define CCO_BASE_LOG_H_

#include <stdbool.h>

typedef enum { CCO_LOG_NONE = 0, CCO_LOG_WARN = 1, CCO_LOG_INFO = 2, CCO_LOG_TRACE = 3 } cco_log_level;

typedef enum {
  CCO_SUBSYS_INIT = 1u << 0,
  CCO_SUBSYS_BOOT = 1u << 1,
  CCO_SUBSYS_MEM = 1u << 2,
  CCO_SUBSYS_LSA = 1u << 3,
  CCO_SUBSYS_SDMA = 1u << 4,
  CCO_SUBSYS_GDA = 1u << 5,
  CCO_SUBSYS_PROXY = 1u << 6,
  CCO_SUBSYS_NET = 1u << 7,
  CCO_SUBSYS_ENV = 1u << 8,
  CCO_SUBSYS_AFFINITY = 1u << 9,
  CCO_SUBSYS_COLL = 1u << 10,
  CCO_SUBSYS_OPS = 1u << 11, /* the fused operators of src/ops (MoE) */
} cco_log_subsys;

bool cco_log_enabled(cco_log_level level, cco_log_subsys subsys);
void cco_log_write(cco_log_level level, cco_log_subsys subsys, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Parses a CCO_DEBUG_SUBSYS value into a mask (exposed for tests). */
unsigned cco_log_parse_subsys(const char* text);

#define CCO_LOG(level, subsys, ...)                                       \
  do {                                                                    \
    if (cco_log_enabled(level, subsys)) cco_log_write(level, subsys, __VA_ARGS__); \
  } while (0)
#define CCO_WARN(subsys, ...) CCO_LOG(CCO_LOG_WARN, CCO_SUBSYS_##subsys, __VA_ARGS__)
#define CCO_INFO(subsys, ...) CCO_LOG(CCO_LOG_INFO, CCO_SUBSYS_##subsys, __VA_ARGS__)
#define CCO_TRACE(subsys, ...) CCO_LOG(CCO_LOG_TRACE, CCO_SUBSYS_##subsys, __VA_ARGS__)

#endif /* CCO_BASE_LOG_H_ */
