/*
 * The whole device API in one include, for kernels that want it all: the
 * core (cco/cco_device.h: scopes, teams, peer pointers, signals, LSA
 * barriers), SDMA (cco/cco_sdma.h) and GDA with the world barrier
 * (cco/cco_gda.h). Each also works alone.
 */
#ifndef CCO_CCO_DEVICE_ALL_H_
#define CCO_CCO_DEVICE_ALL_H_

#include "cco/cco_device.h"
#include "cco/cco_gda.h"
#include "cco/cco_sdma.h"

#endif /* CCO_CCO_DEVICE_ALL_H_ */
