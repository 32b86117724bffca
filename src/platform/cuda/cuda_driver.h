/*
 * The CUDA driver API as libcco sees it: mirror types with the driver's ABI
 * and a table of entry points loaded at run time from libcuda.so.1.
 *
 * libcco must build where no CUDA toolkit exists and run where no driver
 * exists, so it never includes <cuda.h> nor links libcuda. Everything here is
 * spelled out by hand instead; tests/unit/test_cuda_abi.c checks every type,
 * offset, constant and entry-point signature against the real <cuda.h> and
 * <cudaTypedefs.h> wherever the toolkit is installed.
 *
 * Names carry a cco_cu / CCO_CU prefix so this header can be included next
 * to <cuda.h> (which #defines many cu* names to their _v2 symbols).
 */
#ifndef CCO_PLATFORM_CUDA_CUDA_DRIVER_H_
#define CCO_PLATFORM_CUDA_CUDA_DRIVER_H_

#include <stddef.h>
#include <stdint.h>

#include "platform/platform.h"

/* ------------------------------------------------------------ types */

/* The driver's enums have no negative values, so gcc and clang give them
 * unsigned int as compatible type; mirroring them as unsigned int keeps the
 * entry-point types compatible with the real prototypes (which the ABI test
 * checks with __builtin_types_compatible_p). */
typedef unsigned int cco_cu_result;       /* CUresult */
typedef int cco_cu_device;                /* CUdevice */
/* The driver's own (never completed) struct tags, so the handle types are
 * the very types of <cuda.h> wherever both are seen. */
typedef struct CUctx_st* cco_cu_context;    /* CUcontext */
typedef struct CUstream_st* cco_cu_stream;  /* CUstream */
typedef struct CUmod_st* cco_cu_module;     /* CUmodule */
typedef struct CUfunc_st* cco_cu_function;  /* CUfunction */
typedef unsigned long long cco_cu_deviceptr;       /* CUdeviceptr (64-bit hosts) */
typedef unsigned long long cco_cu_mem_handle;      /* CUmemGenericAllocationHandle */
typedef unsigned int cco_cu_device_attribute;      /* CUdevice_attribute */
typedef unsigned int cco_cu_mem_handle_type;       /* CUmemAllocationHandleType */
typedef unsigned int cco_cu_mem_granularity_flags; /* CUmemAllocationGranularity_flags */
typedef unsigned int cco_cu_proc_query_result;     /* CUdriverProcAddressQueryResult */
typedef unsigned int cco_cu_capture_status;        /* CUstreamCaptureStatus */

/* CUmemLocation */
typedef struct {
  unsigned int type; /* CUmemLocationType */
  int id;
} cco_cu_mem_location;

/* CUmemAllocationProp */
typedef struct {
  unsigned int type;                 /* CUmemAllocationType */
  unsigned int requestedHandleTypes; /* CUmemAllocationHandleType (a bit mask) */
  cco_cu_mem_location location;
  void* win32HandleMetaData; /* must be NULL off Windows */
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
} cco_cu_mem_alloc_prop;

/* CUmemAccessDesc */
typedef struct {
  cco_cu_mem_location location;
  unsigned int flags; /* CUmemAccess_flags */
} cco_cu_mem_access_desc;

/* CUstreamBatchMemOpParams, its writeValue member (the only one used). */
typedef union {
  unsigned int operation; /* CUstreamBatchMemOpType */
  struct {
    unsigned int operation;
    cco_cu_deviceptr address;
    uint64_t value64;
    unsigned int flags; /* CUstreamWriteValue_flags */
    cco_cu_deviceptr alias;
  } writeValue;
  uint64_t pad[6];
} cco_cu_batch_mem_op;

/* CUmemcpyAttributes */
typedef struct {
  unsigned int srcAccessOrder; /* CUmemcpySrcAccessOrder */
  cco_cu_mem_location srcLocHint;
  cco_cu_mem_location dstLocHint;
  unsigned int flags; /* CUmemcpyFlags */
} cco_cu_memcpy_attributes;

/* ------------------------------------------------------------ constants */

enum {
  CCO_CU_SUCCESS = 0,                  /* CUDA_SUCCESS */
  CCO_CU_ERROR_INVALID_VALUE = 1,      /* CUDA_ERROR_INVALID_VALUE */
  CCO_CU_ERROR_OUT_OF_MEMORY = 2,      /* CUDA_ERROR_OUT_OF_MEMORY */
  CCO_CU_MEM_ALLOCATION_TYPE_PINNED = 1,
  CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
  CCO_CU_MEM_LOCATION_TYPE_DEVICE = 1,
  CCO_CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
  CCO_CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
  CCO_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1,
  CCO_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  CCO_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
  CCO_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 110,
  CCO_CU_STREAM_NON_BLOCKING = 1,
  CCO_CU_MEMHOSTALLOC_PORTABLE = 0x01,
  CCO_CU_STREAM_WAIT_VALUE_GEQ = 0x0,
  CCO_CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
  CCO_CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
  CCO_CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CCO_CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CCO_CU_STREAM_MEM_OP_WRITE_VALUE_64 = 5,
  CCO_CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 1,
  CCO_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CCO_CU_STREAM_CAPTURE_STATUS_NONE = 0,
  CCO_CU_STREAM_CAPTURE_MODE_RELAXED = 2,
  CCO_CU_ERROR_NO_BINARY_FOR_GPU = 209,
  CCO_CU_ERROR_NOT_READY = 600, /* CUDA_ERROR_NOT_READY: cuStreamQuery of a busy stream */
};

/* The CUDA version whose ABI the entry points below are declared with.
 * cuGetProcAddress hands out, for each name, the variant that was current in
 * that version; asking with the installed driver's version instead would
 * return newer variants whose signatures differ (CUDA 13 has a two-argument
 * cuCtxGetDevice, for one). */
#define CCO_CU_ABI_VERSION 12000

/* ------------------------------------------------------------ entry points */

/* cuGetProcAddress as exported since CUDA 12.0 (symbol cuGetProcAddress_v2;
 * the CUDA 11.3 form lacks symbolStatus). symbol is the base name
 * ("cuMemAlloc"), flags a CUdriverProcAddress_flags value. */
typedef cco_cu_result (*cco_cu_get_proc_address_fn)(const char* symbol, void** pfn,
                                                    int cudaVersion, uint64_t flags,
                                                    cco_cu_proc_query_result* symbolStatus);

typedef struct {
  cco_cu_result (*init)(unsigned int flags);
  cco_cu_result (*driverGetVersion)(int* version);
  cco_cu_result (*getErrorName)(cco_cu_result error, const char** str);
  cco_cu_result (*getErrorString)(cco_cu_result error, const char** str);

  cco_cu_result (*deviceGet)(cco_cu_device* dev, int ordinal);
  cco_cu_result (*deviceGetCount)(int* count);
  cco_cu_result (*deviceGetPCIBusId)(char* busId, int len, cco_cu_device dev);
  cco_cu_result (*deviceGetByPCIBusId)(cco_cu_device* dev, const char* busId);
  cco_cu_result (*deviceCanAccessPeer)(int* canAccess, cco_cu_device dev, cco_cu_device peer);
  cco_cu_result (*deviceGetAttribute)(int* value, cco_cu_device_attribute attrib,
                                      cco_cu_device dev);

  cco_cu_result (*ctxGetCurrent)(cco_cu_context* ctx);
  cco_cu_result (*ctxSetCurrent)(cco_cu_context ctx);
  cco_cu_result (*ctxGetDevice)(cco_cu_device* dev); /* the CUDA 2.0 form */
  cco_cu_result (*devicePrimaryCtxRetain)(cco_cu_context* ctx, cco_cu_device dev);
  cco_cu_result (*devicePrimaryCtxRelease)(cco_cu_device dev); /* _v2 */

  cco_cu_result (*streamCreate)(cco_cu_stream* stream, unsigned int flags);
  cco_cu_result (*streamDestroy)(cco_cu_stream stream); /* _v2 */
  cco_cu_result (*streamSynchronize)(cco_cu_stream stream);
  cco_cu_result (*streamQuery)(cco_cu_stream stream);
  cco_cu_result (*threadExchangeStreamCaptureMode)(int* mode); /* CUstreamCaptureMode */
  cco_cu_result (*ctxSynchronize)(void);
  cco_cu_result (*memHostAlloc)(void** pp, size_t bytesize, unsigned int flags);
  cco_cu_result (*memHostGetDevicePointer)(cco_cu_deviceptr* pdptr, void* p, unsigned int flags);
  cco_cu_result (*memFreeHost)(void* p);
  cco_cu_result (*memcpyAsync)(cco_cu_deviceptr dst, cco_cu_deviceptr src, size_t bytes,
                               cco_cu_stream stream);
  cco_cu_result (*streamWriteValue64)(cco_cu_stream stream, cco_cu_deviceptr addr, uint64_t value,
                                      unsigned int flags);
  cco_cu_result (*streamWaitValue64)(cco_cu_stream stream, cco_cu_deviceptr addr, uint64_t value,
                                     unsigned int flags);

  cco_cu_result (*memAlloc)(cco_cu_deviceptr* dptr, size_t size); /* _v2 */
  cco_cu_result (*memFree)(cco_cu_deviceptr dptr);                /* _v2 */
  cco_cu_result (*memGetAddressRange)(cco_cu_deviceptr* base, size_t* size,
                                      cco_cu_deviceptr dptr); /* _v2 */
  cco_cu_result (*memcpyHtoD)(cco_cu_deviceptr dst, const void* src, size_t size); /* _v2 */
  cco_cu_result (*memcpyDtoH)(void* dst, cco_cu_deviceptr src, size_t size);       /* _v2 */
  cco_cu_result (*memcpyHtoDAsync)(cco_cu_deviceptr dst, const void* src, size_t size,
                                   cco_cu_stream stream); /* _v2 */

  cco_cu_result (*memGetAllocationGranularity)(size_t* granularity,
                                               const cco_cu_mem_alloc_prop* prop,
                                               cco_cu_mem_granularity_flags option);
  cco_cu_result (*memAddressReserve)(cco_cu_deviceptr* ptr, size_t size, size_t alignment,
                                     cco_cu_deviceptr addr, unsigned long long flags);
  cco_cu_result (*memAddressFree)(cco_cu_deviceptr ptr, size_t size);
  cco_cu_result (*memCreate)(cco_cu_mem_handle* handle, size_t size,
                             const cco_cu_mem_alloc_prop* prop, unsigned long long flags);
  cco_cu_result (*memRelease)(cco_cu_mem_handle handle);
  cco_cu_result (*memMap)(cco_cu_deviceptr ptr, size_t size, size_t offset,
                          cco_cu_mem_handle handle, unsigned long long flags);
  cco_cu_result (*memUnmap)(cco_cu_deviceptr ptr, size_t size);
  cco_cu_result (*memSetAccess)(cco_cu_deviceptr ptr, size_t size,
                                const cco_cu_mem_access_desc* desc, size_t count);
  cco_cu_result (*memExportToShareableHandle)(void* shareableHandle, cco_cu_mem_handle handle,
                                              cco_cu_mem_handle_type handleType,
                                              unsigned long long flags);
  cco_cu_result (*memImportFromShareableHandle)(cco_cu_mem_handle* handle, void* osHandle,
                                                cco_cu_mem_handle_type handleType);
  cco_cu_result (*memRetainAllocationHandle)(cco_cu_mem_handle* handle, void* addr);
  cco_cu_result (*memGetAllocationPropertiesFromHandle)(cco_cu_mem_alloc_prop* prop,
                                                        cco_cu_mem_handle handle);

  /* Kernels of libcco's own (the collectives' fatbin). */
  cco_cu_result (*moduleLoadData)(cco_cu_module* module, const void* image);
  cco_cu_result (*moduleUnload)(cco_cu_module module);
  cco_cu_result (*moduleGetFunction)(cco_cu_function* fn, cco_cu_module module, const char* name);
  cco_cu_result (*launchKernel)(cco_cu_function fn, unsigned int gridX, unsigned int gridY,
                                unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                                unsigned int blockZ, unsigned int sharedMemBytes, cco_cu_stream stream,
                                void** params, void** extra);
  cco_cu_result (*occupancyMaxActiveBlocksPerMultiprocessor)(int* blocks, cco_cu_function fn,
                                                             int blockSize, size_t dynamicSmem);
  cco_cu_result (*streamIsCapturing)(cco_cu_stream stream, cco_cu_capture_status* status);

  /* Optional: NULL on drivers without them (callers fall back to one call
   * per operation). */
  cco_cu_result (*streamBatchMemOp)(cco_cu_stream stream, unsigned int count,
                                    cco_cu_batch_mem_op* params, unsigned int flags); /* _v2 */
  cco_cu_result (*memcpyBatchAsync)(cco_cu_deviceptr* dsts, cco_cu_deviceptr* srcs, size_t* sizes,
                                    size_t count, cco_cu_memcpy_attributes* attrs,
                                    size_t* attrsIdxs, size_t numAttrs,
                                    cco_cu_stream stream); /* the CUDA 13.0 form (_v2) */
  /* CUmoduleLoadingMode: 1 eager, 2 lazy (CUDA 11.7). */
  cco_cu_result (*moduleGetLoadingMode)(int* mode);
} cco_cu_api;

/* The loaded driver (loading it once per process, like cco_cuda_probe), or
 * NULL when it is not usable: no libcuda, cuInit failed, no device, or an
 * entry point above is missing. */
const cco_cu_api* cco_cu(void);

/* Why cco_cu() returns NULL ("" when it does not). */
const char* cco_cu_unavailable_reason(void);

/* "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result; safe to
 * call with any value and without a driver. Returns buf. */
const char* cco_cu_error_text(cco_cu_result r, char* buf, size_t size);

/* Releases what cco_platform_cuda_open took (the primary context when it
 * retained one, its stream, its state) and clears *p. */
/* PCI bus ids ("0000:3b:00.0", lowercase) of every visible device, in
 * ordinal order (the cuda platform's visible_gpus). */
ccoResult_t cco_cuda_visible_bus_ids(char visible[][CCO_BUS_ID_BYTES], int maxVisible, int* nVisible);

void cco_platform_cuda_close(cco_platform* p);

#endif /* CCO_PLATFORM_CUDA_CUDA_DRIVER_H_ */
