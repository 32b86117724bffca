/* What consumer.c asks of the device headers, compiled apart (cco::device). */
#ifndef CCO_CONSUMER_DEVICE_PART_H_
#define CCO_CONSUMER_DEVICE_PART_H_

#include "cco/cco_devcomm.h"

/* The world rank of this rank's own slot in the LSA team, as a kernel
 * would compute it: equal to the rank when the headers and the library
 * agree on ccoDevComm. */
int consumer_own_world_rank(const ccoDevComm* dc);

#endif /* CCO_CONSUMER_DEVICE_PART_H_ */
