/* Log sink: one line per message, "host:pid:tid cco LEVEL SUBSYS message". */
#include "base/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/env.h"

static const struct {
  const char* name;
  unsigned bit;
} g_subsys_names[] = {
    {"INIT", CCO_SUBSYS_INIT}, {"BOOT", CCO_SUBSYS_BOOT},   {"MEM", CCO_SUBSYS_MEM},
    {"LSA", CCO_SUBSYS_LSA},   {"SDMA", CCO_SUBSYS_SDMA},   {"GDA", CCO_SUBSYS_GDA},
    {"PROXY", CCO_SUBSYS_PROXY}, {"NET", CCO_SUBSYS_NET},   {"ENV", CCO_SUBSYS_ENV},
    {"AFFINITY", CCO_SUBSYS_AFFINITY}, {"COLL", CCO_SUBSYS_COLL}, {"OPS", CCO_SUBSYS_OPS},
};
#define CCO_NUM_SUBSYS (sizeof(g_subsys_names) / sizeof(g_subsys_names[0]))
static const unsigned g_all_subsys = (1u << CCO_NUM_SUBSYS) - 1;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_level = CCO_LOG_WARN;
static unsigned g_mask;
static FILE* g_file;
static char g_host[64];

unsigned cco_log_parse_subsys(const char* text) {
  if (!text || !*text) return g_all_subsys;
  int negate = text[0] == '^';
  if (negate) text++;
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", text);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (!strcasecmp(tok, "ALL")) mask = g_all_subsys;
    for (size_t i = 0; i < CCO_NUM_SUBSYS; i++)
      if (!strcasecmp(tok, g_subsys_names[i].name)) mask |= g_subsys_names[i].bit;
  }
  return negate ? (g_all_subsys & ~mask) : mask;
}

static void open_file(const char* pattern) {
  char path[1024];
  size_t o = 0;
  for (const char* p = pattern; *p && o + 32 < sizeof(path); p++) {
    if (p[0] == '%' && p[1] == 'h') {
      o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", g_host);
      p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
      p++;
    } else {
      path[o++] = *p;
    }
  }
  path[o] = '\0';
  g_file = fopen(path, "a");
  if (!g_file) fprintf(stderr, "cco: cannot open CCO_DEBUG_FILE '%s'; logging to stderr\n", path);
}

static void init_once(void) {
  gethostname(g_host, sizeof(g_host) - 1);
  char* dot = strchr(g_host, '.');
  if (dot) *dot = '\0';
  g_level = cco_env_enum(CCO_ENV_ID_CCO_DEBUG); /* NONE=0 WARN=1 INFO=2 TRACE=3 */
  g_mask = cco_log_parse_subsys(cco_env_str(CCO_ENV_ID_CCO_DEBUG_SUBSYS));
  const char* file = cco_env_str(CCO_ENV_ID_CCO_DEBUG_FILE);
  if (file[0]) open_file(file);
  const char* detail = NULL;
  if (cco_env_status(&detail) != ccoSuccess && g_level >= CCO_LOG_WARN)
    fprintf(g_file ? g_file : stderr, "%s:%d cco WARN ENV %s\n", g_host, (int)getpid(), detail);
}

bool cco_log_enabled(cco_log_level level, cco_log_subsys subsys) {
  pthread_once(&g_once, init_once);
  return (int)level <= g_level && (g_mask & (unsigned)subsys);
}

static const char* subsys_name(unsigned bit) {
  for (size_t i = 0; i < CCO_NUM_SUBSYS; i++)
    if (g_subsys_names[i].bit == bit) return g_subsys_names[i].name;
  return "?";
}

void cco_log_write(cco_log_level level, cco_log_subsys subsys, const char* fmt, ...) {
  static const char* const levels[] = {"NONE", "WARN", "INFO", "TRACE"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  pthread_mutex_lock(&g_lock);
  FILE* out = g_file ? g_file : stderr;
  fprintf(out, "%s:%d:%ld %ld.%06ld cco %s %s %s\n", g_host, (int)getpid(),
          (long)syscall(SYS_gettid), (long)ts.tv_sec, ts.tv_nsec / 1000L, levels[level],
          subsys_name((unsigned)subsys), msg);
  fflush(out);
  pthread_mutex_unlock(&g_lock);
}
