/*
 * Platforms: where symmetric memory lives. `host` (CPU memory, always
 * present) and `cuda` (GPU memory through the driver API, loaded at run time
 * so libcco never links libcuda and runs on machines without a driver).
 */
#ifndef CCO_PLATFORM_PLATFORM_H_
#define CCO_PLATFORM_PLATFORM_H_

#include <stdbool.h>

#include "cco/cco.h"

#define CCO_BUS_ID_BYTES 32
#define CCO_MAX_GPUS 64

typedef struct {
  bool available;  /* libcuda loaded, cuInit succeeded, at least one device */
  int deviceCount;
  int driverVersion; /* e.g. 13000 */
  char detail[160];  /* why not available, or a summary */
} cco_cuda_probe_result;

/* Loads libcuda.so.1 once per process and reports what it found. */
void cco_cuda_probe(cco_cuda_probe_result* out);

/* PCI bus ids ("0000:3b:00.0") of the calling thread's current device
 * (device 0 when no context is current) and of every visible device. */
ccoResult_t cco_cuda_bus_ids(char current[CCO_BUS_ID_BYTES],
                             char visible[][CCO_BUS_ID_BYTES], int maxVisible, int* nVisible);

#endif /* CCO_PLATFORM_PLATFORM_H_ */
