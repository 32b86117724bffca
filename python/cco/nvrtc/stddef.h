/*
 * <stddef.h> for NVRTC, which ships no C standard headers: just what the cco
 * device headers use. NVRTC predefines size_t and ptrdiff_t itself. Put on
 * the include path by cco.cuda.nvrtc_options(), ahead of nothing else, so a
 * compiler that has a real <stddef.h> never sees this one (nvcc and gcc do
 * not get this directory).
 */
#ifndef CCO_NVRTC_STDDEF_H_
#define CCO_NVRTC_STDDEF_H_
#ifndef NULL
#define NULL 0
#endif
#ifndef offsetof
/* EDG's constant-expression form: the headers' static_asserts need one. */
#define offsetof(type, member) ((::size_t)__INTADDR__(&(((type*)0)->member)))
#endif
/* NVRTC spells GNU inline assembly `asm`; the arch layer writes __asm__. */
#if defined(__CUDACC_RTC__) && !defined(__asm__)
#define __asm__ asm
#endif
#endif
