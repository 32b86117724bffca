/*
 * GDA: one-sided put / get / signal / counter posted by kernels into rings
 * in host-mapped memory, executed by one proxy thread per communicator on
 * the network engine (src/transport/net). See docs/gda.md.
 *
 * What the rest of the library calls:
 * - ccoDevCommCreate builds a device communicator's GDA state (collective;
 *   starts the proxy, opens and connects the engine on first use);
 * - window registration and deregistration keep the proxy's window table
 *   (and, on the direct path, the engine registrations) in step;
 * - ccoCommDestroy stops the proxy before memory goes away.
 */
#ifndef CCO_TRANSPORT_GDA_GDA_H_
#define CCO_TRANSPORT_GDA_GDA_H_

#include <stdbool.h>
#include <stdint.h>

#include "cco/cco.h"
#include "cco/cco_devcomm.h"

typedef struct gda_state gda_state;           /* one device communicator's rings and slots */
typedef struct cco_gda_proxy cco_gda_proxy;   /* one communicator's thread and endpoint */

/* Whether a device communicator with these requirements needs the proxy
 * here: some rank has a peer under its connection type (FULL always;
 * CROSSNODE and RAIL only with several hosts). Same answer on every rank. */
bool cco_gda_needed(const ccoComm* comm, uint32_t connectionType);

/* Collective over the communicator: builds the GDA state of device
 * communicator `id` and returns the device address of its ccoGdaDev. On
 * failure nothing is left behind and every rank returns an error. */
ccoResult_t cco_gda_state_create(ccoComm* comm, uint64_t id, const ccoDevCommRequirements* reqs,
                                 gda_state** state, uint64_t* devAddr);
/* Unlinks from the proxy (which no longer touches it on return) and frees. */
void cco_gda_state_destroy(ccoComm* comm, gda_state* state);

/* Window registration hooks. Added is collective (called by every rank in
 * the same order, after the window is mapped); it fails on every rank if
 * it fails on one. Removed is local. Both are no-ops without a proxy. */
ccoResult_t cco_gda_window_added(ccoComm* comm, uint64_t offset, uint64_t size, void* localPtr);
void cco_gda_window_removed(ccoComm* comm, uint64_t offset);

/* Teardown, in two steps: stop joins the proxy thread (first, before
 * anything it reads goes away); free, after every device communicator's
 * state is gone and while the platform is still open, releases the bounce
 * region, the window registrations and the engine. */
void cco_gda_proxy_stop(ccoComm* comm);
void cco_gda_proxy_free(ccoComm* comm);

#endif /* CCO_TRANSPORT_GDA_GDA_H_ */
