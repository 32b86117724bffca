/*
 * SDMA: copy-engine transfers posted by kernels, driven by an engine thread.
 *
 * Each device communicator with SDMA has, per LSA peer and queue, a ring
 * (include/cco/device/cco_sdma_types.h) and a stream. One engine thread per
 * communicator drains every ring: for each descriptor it issues the copy on
 * the ring's stream, then (in stream order, so never ahead of the data) the
 * peer's signal and the ring's completion count, and returns credits to
 * the producers in batches.
 */
#ifndef CCO_TRANSPORT_SDMA_SDMA_H_
#define CCO_TRANSPORT_SDMA_SDMA_H_

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "cco/cco.h"
#include "transport/transport.h"

typedef struct cco_sdma_state cco_sdma_state;   /* one device communicator's rings */
typedef struct cco_sdma_engine cco_sdma_engine; /* one communicator's thread */

/* The transport's state: its context and the engine, started by the first
 * device communicator that has SDMA queues (src/transport/sdma/sdma_transport.c). */
typedef struct cco_sdma_transport {
  const cco_transport_ctx* ctx;
  pthread_mutex_t lock; /* starting the engine */
  cco_sdma_engine* engine;
} cco_sdma_transport;

extern const cco_transport_ops cco_sdma_transport_ops;

/* Whether CCO_ENABLE_SDMA allows SDMA. */
bool cco_sdma_enabled(void);

/* Bytes of signal slots the resource window needs: uint64_t[lsaSize][queues]. */
size_t cco_sdma_signal_bytes(int lsaSize, uint32_t queues);

/* Builds the rings of a device communicator whose resource window starts
 * at resourceBase (LSA rank 0's copy) with its signal slots at
 * signalsOffset, registers them with the engine (started on first use), and
 * returns the device address of its ccoSdmaDev. oneDevice: every LSA peer
 * is this GPU (ccoDevComm.lsaScopeGpu), which lets CCO_SDMA_POST_FENCE=auto
 * order posts at GPU scope. */
ccoResult_t cco_sdma_state_create(cco_sdma_transport* t, uint32_t queues, uint64_t resourceBase,
                                  uint64_t signalsOffset, bool oneDevice, cco_sdma_state** state,
                                  uint64_t* devAddr);
/* Unregisters and frees (the engine no longer touches it on return). */
void cco_sdma_state_destroy(cco_sdma_transport* t, cco_sdma_state* state);

/* Stops and joins the engine thread (communicator teardown). */
void cco_sdma_engine_stop(cco_sdma_transport* t);

#endif /* CCO_TRANSPORT_SDMA_SDMA_H_ */
