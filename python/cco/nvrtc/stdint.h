/* <stdint.h> for NVRTC: the fixed-width types of the LP64 device ABI. */
#ifndef CCO_NVRTC_STDINT_H_
#define CCO_NVRTC_STDINT_H_
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
#define UINT32_MAX 0xffffffffu
#define UINT64_MAX 0xffffffffffffffffull
/* NVRTC spells GNU inline assembly `asm`; the arch layer, which includes
 * only <stdint.h>, writes __asm__ (as in the <stddef.h> shim). */
#if defined(__CUDACC_RTC__) && !defined(__asm__)
#define __asm__ asm
#endif
#endif
