/*
 * The GDA device API under the guide's header name (docs/design.md): everything is in cco/cco_gda.h,
 * which this header includes. New code includes cco/cco_gda.h (or
 * cco/cco_device_all.h) directly.
 */
#ifndef CCO_CCO_SCALE_OUT_H_
#define CCO_CCO_SCALE_OUT_H_

#include "cco/cco_gda.h"

#endif /* CCO_CCO_SCALE_OUT_H_ */
