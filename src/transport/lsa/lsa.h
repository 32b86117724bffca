/*
 * LSA: load/store access to the peers of this host, through the flat VA.
 *
 * What lives here: the check that every LSA peer's memory can be reached
 * (the same GPU, NVLink or PCIe P2P), whether all of them share this GPU
 * (then GPU-scope ordering is enough), and the LSA part of a device
 * communicator (barrier inboxes and epochs in its resource window). The
 * device side is include/cco/cco_device.h. Mapping the peers' memory into
 * the flat VA is memory's job (src/mem/window.c): SDMA and GDA use the
 * same mappings.
 */
#ifndef CCO_TRANSPORT_LSA_LSA_H_
#define CCO_TRANSPORT_LSA_LSA_H_

#include "transport/transport.h"

extern const cco_transport_ops cco_lsa_transport_ops;

#endif /* CCO_TRANSPORT_LSA_LSA_H_ */
