/*
 * CPU affinity at communicator creation (as the guide does it; docs/design.md).
 *
 * The GPU-local CPU list (sysfs local_cpulist of the GPU's PCI device) is
 * intersected with the current cpuset, so cgroup limits and an outer binding
 * are respected. Within that set the CPUs are grouped into physical cores by
 * thread_siblings_list and split into one disjoint slice of whole cores per
 * GPU on the same NUMA node, so two ranks never share the SMT siblings of a
 * core. The split applies only when the process sees more than one GPU on
 * that NUMA node and there is at least one physical core per GPU; otherwise
 * the whole intersection is used.
 */
#ifndef CCO_BOOT_AFFINITY_H_
#define CCO_BOOT_AFFINITY_H_

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

#include "cco/cco.h"

typedef struct {
  const char* sysfsRoot;               /* "" for the real /sys; a fake tree's root in tests */
  const char* gpuBusId;                /* this rank's GPU, e.g. "0000:3b:00.0" */
  const char* const* visibleGpuBusIds; /* every GPU the process sees, gpuBusId included */
  int nVisibleGpus;
  bool noSplit; /* CCO_CPU_AFFINITY_NO_SPLIT: bind the whole GPU-local set */
} cco_affinity_query;

typedef enum {
  CCO_AFFINITY_UNCHANGED = 0, /* keep `current` (see `why`) */
  CCO_AFFINITY_NODE = 1,      /* GPU-local CPUs intersected with `current` */
  CCO_AFFINITY_SLICE = 2,     /* this GPU's slice of whole cores of that set */
} cco_affinity_kind;

/* Pure computation from sysfs and the current cpuset. Never fails on missing
 * or malformed sysfs files: it falls back (to the whole set, or to
 * `current`) and says why in `why`. Returns ccoInvalidArgument only for bad
 * arguments. */
ccoResult_t cco_affinity_compute(const cco_affinity_query* q, const cpu_set_t* current,
                                 cpu_set_t* result, cco_affinity_kind* kind, char* why,
                                 size_t whySize);

/* Computes from sched_getaffinity of the calling thread and binds the calling
 * thread with sched_setaffinity, so threads it creates later inherit it. */
ccoResult_t cco_affinity_bind_calling_thread(const cco_affinity_query* q, cco_affinity_kind* kind);

/* Linux cpulist text ("0-3,8,10-11"; also "0-10:2" strides) <-> cpu_set_t.
 * parse returns 0 or -1 on malformed text; format returns 0 or -1 if the
 * buffer is too small. */
int cco_cpulist_parse(const char* text, cpu_set_t* set);
int cco_cpulist_format(const cpu_set_t* set, char* buf, size_t size);

#endif /* CCO_BOOT_AFFINITY_H_ */
