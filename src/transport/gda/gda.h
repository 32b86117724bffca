/*
 * GDA: one-sided put / get / signal / counter posted by kernels into rings
 * in host-mapped memory, executed by one proxy thread per communicator on
 * the network engine (src/transport/net). See docs/gda.md.
 *
 * The rest of the library reaches it only through the transport interface
 * (src/transport/transport.h).
 */
#ifndef CCO_TRANSPORT_GDA_GDA_H_
#define CCO_TRANSPORT_GDA_GDA_H_

#include <stdbool.h>
#include <stdint.h>

#include "cco/cco.h"
#include "transport/transport.h"

typedef struct cco_gda_state cco_gda_state;         /* one device communicator's rings and slots */
typedef struct cco_gda_proxy cco_gda_proxy;         /* one communicator's thread and endpoint */
typedef struct cco_gda_transport cco_gda_transport; /* the transport's state */

/* Device communicators get their GDA state here (collective: the proxy
 * starts, and the engine opens and connects, on first use); windows keep
 * the proxy's window table (and on the direct path, the engine's
 * registrations) in step; teardown stops the proxy before memory goes. */
extern const cco_transport_ops cco_gda_transport_ops;

#endif /* CCO_TRANSPORT_GDA_GDA_H_ */
