/* CPU affinity at communicator creation: sysfs topology -> cpuset (section 9). */
#include "boot/affinity.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

/* A PCI bus id is "dddd:bb:dd.f" (12 chars); leave room for longer domains. */
#define BUS_ID_MAX 64
#define PATH_MAX_LEN 4096
/* Large enough for any cpulist of CPU_SETSIZE cpus, even one item per cpu. */
#define CPULIST_TEXT_MAX 8192

/* ------------------------------------------------------------------------ */
/* cpulist text                                                             */
/* ------------------------------------------------------------------------ */

/* Reads a decimal number no larger than `max`; no sign, no base prefix, so
 * "0x1" or "+1" are rejected as the kernel does. */
static const char* parse_uint(const char* p, unsigned long max, unsigned long* out) {
  if (!isdigit((unsigned char)*p)) return NULL;
  unsigned long v = 0;
  for (; isdigit((unsigned char)*p); p++) {
    v = v * 10 + (unsigned long)(*p - '0');
    if (v > max) return NULL;
  }
  *out = v;
  return p;
}

/* One item: "N", "A-B", "A-B:S" (every S-th cpu) or the kernel's
 * "A-B:U/G" (the first U cpus of every group of G). */
static const char* parse_item(const char* p, cpu_set_t* set) {
  const unsigned long maxCpu = CPU_SETSIZE - 1;
  unsigned long first, last, used = 1, group = 1;
  p = parse_uint(p, maxCpu, &first);
  if (!p) return NULL;
  last = first;
  if (*p == '-') {
    p = parse_uint(p + 1, maxCpu, &last);
    if (!p || last < first) return NULL;
    if (*p == ':') {
      /* A stride past the end is the same as CPU_SETSIZE, so cap there. */
      p = parse_uint(p + 1, CPU_SETSIZE, &group);
      if (!p) return NULL;
      if (*p == '/') {
        used = group;
        p = parse_uint(p + 1, CPU_SETSIZE, &group);
        if (!p) return NULL;
      }
      if (group == 0 || used == 0 || used > group) return NULL;
    }
  }
  for (unsigned long start = first; start <= last; start += group)
    for (unsigned long c = start; c < start + used && c <= last; c++) CPU_SET((int)c, set);
  return p;
}

int cco_cpulist_parse(const char* text, cpu_set_t* set) {
  if (!text || !set) return -1;
  cpu_set_t parsed;
  CPU_ZERO(&parsed);
  const char* p = text;
  while (*p && !isspace((unsigned char)*p)) {
    p = parse_item(p, &parsed);
    if (!p) return -1;
    if (*p == ',') {
      p++;
      /* A trailing or doubled comma is an empty item: garbage. */
      if (!isdigit((unsigned char)*p)) return -1;
    }
  }
  /* sysfs files end in a newline; nothing but whitespace may follow. */
  for (; *p; p++)
    if (!isspace((unsigned char)*p)) return -1;
  *set = parsed;
  return 0;
}

static int append(char* buf, size_t size, size_t* len, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int append(char* buf, size_t size, size_t* len, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, size - *len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= size - *len) return -1;
  *len += (size_t)n;
  return 0;
}

int cco_cpulist_format(const cpu_set_t* set, char* buf, size_t size) {
  if (!set || !buf || size == 0) return -1;
  buf[0] = '\0';
  size_t len = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, set)) end++;
    const char* sep = len ? "," : "";
    int rc = end == c ? append(buf, size, &len, "%s%d", sep, c)
                      : append(buf, size, &len, "%s%d-%d", sep, c, end);
    if (rc != 0) {
      buf[0] = '\0'; /* never hand back a list that silently lost cpus */
      return -1;
    }
    c = end;
  }
  return 0;
}

/* ------------------------------------------------------------------------ */
/* sysfs                                                                    */
/* ------------------------------------------------------------------------ */

/* Whole small file into buf, NUL-terminated; -1 if missing, unreadable or
 * too long (a truncated cpulist would be silently wrong). */
static int read_text(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  int rc = 0;
  for (;;) {
    if (len + 1 >= size) {
      rc = -1;
      break;
    }
    ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) rc = -1;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return rc;
}

static const char* root_of(const cco_affinity_query* q) {
  return q->sysfsRoot ? q->sysfsRoot : "";
}

static int pci_path(const cco_affinity_query* q, const char* busId, const char* file,
                    char* path, size_t size) {
  int n = snprintf(path, size, "%s/sys/bus/pci/devices/%s/%s", root_of(q), busId, file);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

static int read_gpu_cpulist(const cco_affinity_query* q, const char* busId, cpu_set_t* set) {
  char path[PATH_MAX_LEN], text[CPULIST_TEXT_MAX];
  if (pci_path(q, busId, "local_cpulist", path, sizeof(path)) != 0) return -1;
  if (read_text(path, text, sizeof(text)) != 0) return -1;
  return cco_cpulist_parse(text, set);
}

/* -1 when missing or malformed, which is also what sysfs says for "unknown". */
static int read_gpu_numa_node(const cco_affinity_query* q, const char* busId) {
  char path[PATH_MAX_LEN], text[32];
  if (pci_path(q, busId, "numa_node", path, sizeof(path)) != 0) return -1;
  if (read_text(path, text, sizeof(text)) != 0) return -1;
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno || end == text || v < -1 || v > 1 << 20) return -1;
  for (; *end; end++)
    if (!isspace((unsigned char)*end)) return -1;
  return (int)v;
}

static int read_thread_siblings(const cco_affinity_query* q, int cpu, cpu_set_t* set) {
  char path[PATH_MAX_LEN], text[CPULIST_TEXT_MAX];
  int n = snprintf(path, sizeof(path),
                   "%s/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", root_of(q),
                   cpu);
  if (n < 0 || (size_t)n >= sizeof(path)) return -1;
  if (read_text(path, text, sizeof(text)) != 0) return -1;
  return cco_cpulist_parse(text, set);
}

/* ------------------------------------------------------------------------ */
/* Bus ids                                                                  */
/* ------------------------------------------------------------------------ */

/* The driver may report upper case while sysfs directories are lower case;
 * a '/' would escape the devices directory. */
static int normalize_bus_id(const char* id, char out[BUS_ID_MAX]) {
  if (!id || !id[0]) return -1;
  size_t i = 0;
  for (; id[i]; i++) {
    if (i + 1 >= BUS_ID_MAX || id[i] == '/' || isspace((unsigned char)id[i])) return -1;
    out[i] = (char)tolower((unsigned char)id[i]);
  }
  out[i] = '\0';
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Decision                                                                 */
/* ------------------------------------------------------------------------ */

static void set_why(char* why, size_t whySize, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_why(char* why, size_t whySize, const char* fmt, ...) {
  if (!why || whySize == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whySize, fmt, ap); /* truncation is fine for a description */
  va_end(ap);
}

static const char* format_or_dots(const cpu_set_t* set, char* buf, size_t size) {
  if (cco_cpulist_format(set, buf, size) != 0) snprintf(buf, size, "...");
  return buf;
}

/* Where this GPU stands among the GPUs sharing its NUMA node. */
typedef struct {
  int numaNode; /* -1: grouped by identical local_cpulist instead */
  int index;    /* position by bus id */
  int count;    /* including this GPU */
} gpu_group;

static bool same_node(const cco_affinity_query* q, const char* peer, int myNode,
                      const cpu_set_t* myGpuCpus) {
  if (myNode >= 0) return read_gpu_numa_node(q, peer) == myNode;
  cpu_set_t peerCpus;
  return read_gpu_cpulist(q, peer, &peerCpus) == 0 && CPU_EQUAL(&peerCpus, myGpuCpus);
}

static bool seen_before(const char* const* ids, int j, const char* id) {
  char other[BUS_ID_MAX];
  for (int k = 0; k < j; k++)
    if (normalize_bus_id(ids[k], other) == 0 && strcmp(other, id) == 0) return true;
  return false;
}

/* Counts instead of collecting, so no allocation: my index is the number of
 * distinct same-node peers whose bus id sorts before mine. */
static void find_group(const cco_affinity_query* q, const char* me, const cpu_set_t* myGpuCpus,
                       gpu_group* g) {
  g->numaNode = read_gpu_numa_node(q, me);
  g->index = 0;
  g->count = 1;
  char peer[BUS_ID_MAX];
  for (int j = 0; j < q->nVisibleGpus; j++) {
    if (normalize_bus_id(q->visibleGpuBusIds[j], peer) != 0) continue;
    if (strcmp(peer, me) == 0 || seen_before(q->visibleGpuBusIds, j, peer)) continue;
    if (!same_node(q, peer, g->numaNode, myGpuCpus)) continue;
    g->count++;
    if (strcmp(peer, me) < 0) g->index++;
  }
}

/* Assigns every cpu of `set` a core number; cores are numbered in order of
 * their lowest cpu because cpus are visited in ascending order. Returns the
 * number of cores. */
static int group_cores(const cco_affinity_query* q, const cpu_set_t* set,
                       int coreOf[CPU_SETSIZE]) {
  for (int c = 0; c < CPU_SETSIZE; c++) coreOf[c] = -1;
  int nCores = 0;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set) || coreOf[c] >= 0) continue;
    cpu_set_t siblings;
    if (read_thread_siblings(q, c, &siblings) != 0) CPU_ZERO(&siblings);
    CPU_SET(c, &siblings);
    for (int s = c; s < CPU_SETSIZE; s++)
      if (CPU_ISSET(s, &siblings) && CPU_ISSET(s, set) && coreOf[s] < 0) coreOf[s] = nCores;
    nCores++;
  }
  return nCores;
}

static void slice_of(const int coreOf[CPU_SETSIZE], int nCores, const gpu_group* g,
                     cpu_set_t* result) {
  int first = (int)((long)g->index * nCores / g->count);
  int end = (int)((long)(g->index + 1) * nCores / g->count);
  CPU_ZERO(result);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (coreOf[c] >= first && coreOf[c] < end) CPU_SET(c, result);
}

static bool query_valid(const cco_affinity_query* q, char me[BUS_ID_MAX]) {
  if (!q || q->nVisibleGpus < 1 || !q->visibleGpuBusIds) return false;
  if (normalize_bus_id(q->gpuBusId, me) != 0) return false;
  char peer[BUS_ID_MAX];
  for (int j = 0; j < q->nVisibleGpus; j++)
    if (normalize_bus_id(q->visibleGpuBusIds[j], peer) != 0) return false;
  return true;
}

/* Decides between the whole local set and a slice once `local` is known to
 * be non-empty. */
static cco_affinity_kind split_local(const cco_affinity_query* q, const char* me,
                                     const cpu_set_t* gpuCpus, const cpu_set_t* local,
                                     cpu_set_t* result, char* why, size_t whySize) {
  char list[CPULIST_TEXT_MAX];
  *result = *local;
  if (q->noSplit) {
    set_why(why, whySize, "gpu %s: whole gpu-local set (split disabled): cpus %s", me,
            format_or_dots(local, list, sizeof(list)));
    return CCO_AFFINITY_NODE;
  }
  gpu_group g;
  find_group(q, me, gpuCpus, &g);
  if (g.count == 1) {
    set_why(why, whySize, "gpu %s: only gpu on numa node %d: cpus %s", me, g.numaNode,
            format_or_dots(local, list, sizeof(list)));
    return CCO_AFFINITY_NODE;
  }
  int coreOf[CPU_SETSIZE];
  int nCores = group_cores(q, local, coreOf);
  if (nCores < g.count) {
    set_why(why, whySize, "gpu %s: %d cores for %d gpus on numa node %d, not split: cpus %s",
            me, nCores, g.count, g.numaNode, format_or_dots(local, list, sizeof(list)));
    return CCO_AFFINITY_NODE;
  }
  slice_of(coreOf, nCores, &g, result);
  set_why(why, whySize, "gpu %s: slice %d of %d on numa node %d: cpus %s", me, g.index, g.count,
          g.numaNode, format_or_dots(result, list, sizeof(list)));
  return CCO_AFFINITY_SLICE;
}

ccoResult_t cco_affinity_compute(const cco_affinity_query* q, const cpu_set_t* current,
                                 cpu_set_t* result, cco_affinity_kind* kind, char* why,
                                 size_t whySize) {
  char me[BUS_ID_MAX];
  if (!current || !result || !kind || !query_valid(q, me)) return ccoInvalidArgument;
  cpu_set_t gpuCpus, local;
  if (read_gpu_cpulist(q, me, &gpuCpus) != 0) {
    *result = *current;
    *kind = CCO_AFFINITY_UNCHANGED;
    set_why(why, whySize, "gpu %s: local_cpulist missing or malformed, affinity unchanged", me);
    return ccoSuccess;
  }
  CPU_AND(&local, &gpuCpus, current);
  if (CPU_COUNT(&local) == 0) {
    /* The outer binding (cgroup, numactl, launcher) excludes this GPU's CPUs
     * on purpose or not; either way it is not ours to override. */
    char list[CPULIST_TEXT_MAX];
    *result = *current;
    *kind = CCO_AFFINITY_UNCHANGED;
    set_why(why, whySize, "gpu %s: no gpu-local cpu in the current set (%s), affinity unchanged",
            me, format_or_dots(current, list, sizeof(list)));
    return ccoSuccess;
  }
  *kind = split_local(q, me, &gpuCpus, &local, result, why, whySize);
  return ccoSuccess;
}

ccoResult_t cco_affinity_bind_calling_thread(const cco_affinity_query* q, cco_affinity_kind* kind) {
  if (!q || !kind) return ccoInvalidArgument;
  cpu_set_t current, target;
  int rc = pthread_getaffinity_np(pthread_self(), sizeof(current), &current);
  if (rc != 0) {
    char eb[128];
    return cco_error(NULL, ccoSystemError, CCO_SUBSYS_AFFINITY, "pthread_getaffinity_np: %s",
                     strerror_r(rc, eb, sizeof(eb)));
  }
  cco_affinity_kind k;
  char why[512];
  ccoResult_t res = cco_affinity_compute(q, &current, &target, &k, why, sizeof(why));
  if (res != ccoSuccess) return res;
  if (k != CCO_AFFINITY_UNCHANGED && !CPU_EQUAL(&current, &target)) {
    rc = pthread_setaffinity_np(pthread_self(), sizeof(target), &target);
    if (rc != 0) {
      char eb[128];
      return cco_error(NULL, ccoSystemError, CCO_SUBSYS_AFFINITY,
                       "pthread_setaffinity_np (%s): %s", why, strerror_r(rc, eb, sizeof(eb)));
    }
  }
  CCO_INFO(AFFINITY, "%s", why);
  *kind = k;
  return ccoSuccess;
}
