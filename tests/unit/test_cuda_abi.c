/*
 * ABI check of src/platform/cuda/cuda_driver.h against the CUDA toolkit's
 * <cuda.h> and <cudaTypedefs.h>: libcco declares the driver's types, constants
 * and entry points by hand (it must build without the toolkit), so every one
 * of them is compared here, at compile time, with the real declaration.
 *
 * Built with the toolkit's include directory on the path when CMake finds
 * one; without it the test only says so and passes.
 */
#include "platform/cuda/cuda_driver.h"

#include <stddef.h>

#include "test.h"

#if __has_include(<cuda.h>) && __has_include(<cudaTypedefs.h>)
#include <cuda.h>
#include <cudaTypedefs.h>

#define SAME_TYPE(a, b) __builtin_types_compatible_p(a, b)

/* Same size and alignment. */
#define CHECK_SCALAR(mirror, real)                                                   \
  _Static_assert(sizeof(mirror) == sizeof(real), #mirror " size differs from " #real); \
  _Static_assert(_Alignof(mirror) == _Alignof(real), #mirror " alignment differs from " #real)

/* Same offset and size of a field (path may name a sub-struct's field). */
#define CHECK_FIELD(mirror, real, path)                                                     \
  _Static_assert(offsetof(mirror, path) == offsetof(real, path),                             \
                 #mirror "." #path " offset differs");                                       \
  _Static_assert(sizeof(((mirror*)0)->path) == sizeof(((real*)0)->path),                     \
                 #mirror "." #path " size differs")

#define CHECK_CONST(mirror, real) _Static_assert((long long)(mirror) == (long long)(real), #mirror " != " #real)

/* An entry point's type is exactly that of the driver's versioned function. */
#define MEMBER_TYPE(member) __typeof__(((cco_cu_api*)0)->member)
#define CHECK_ENTRY(member, pfn) \
  _Static_assert(SAME_TYPE(MEMBER_TYPE(member), pfn), "cco_cu_api." #member " differs from " #pfn)

/* ---- scalar and handle types */
CHECK_SCALAR(cco_cu_result, CUresult);
_Static_assert(SAME_TYPE(cco_cu_result, CUresult), "CUresult is not unsigned int here");
CHECK_SCALAR(cco_cu_device, CUdevice);
_Static_assert(SAME_TYPE(cco_cu_device, CUdevice), "CUdevice");
CHECK_SCALAR(cco_cu_context, CUcontext);
CHECK_SCALAR(cco_cu_stream, CUstream);
CHECK_SCALAR(cco_cu_module, CUmodule);
_Static_assert(SAME_TYPE(cco_cu_module, CUmodule), "CUmodule");
CHECK_SCALAR(cco_cu_function, CUfunction);
_Static_assert(SAME_TYPE(cco_cu_function, CUfunction), "CUfunction");
CHECK_SCALAR(cco_cu_capture_status, CUstreamCaptureStatus);
CHECK_SCALAR(cco_cu_deviceptr, CUdeviceptr);
_Static_assert(SAME_TYPE(cco_cu_deviceptr, CUdeviceptr), "CUdeviceptr");
CHECK_SCALAR(cco_cu_mem_handle, CUmemGenericAllocationHandle);
_Static_assert(SAME_TYPE(cco_cu_mem_handle, CUmemGenericAllocationHandle), "handle");
_Static_assert(sizeof(cco_cu_mem_handle) == sizeof(((cco_chunk*)0)->handle),
               "cco_chunk.handle cannot hold a CUmemGenericAllocationHandle");
CHECK_SCALAR(cco_cu_device_attribute, CUdevice_attribute);
CHECK_SCALAR(cco_cu_mem_handle_type, CUmemAllocationHandleType);
CHECK_SCALAR(cco_cu_mem_granularity_flags, CUmemAllocationGranularity_flags);
CHECK_SCALAR(cco_cu_proc_query_result, CUdriverProcAddressQueryResult);
CHECK_SCALAR(unsigned int, CUmemLocationType);
CHECK_SCALAR(unsigned int, CUmemAllocationType);
CHECK_SCALAR(unsigned int, CUmemAccess_flags);
CHECK_SCALAR(uint64_t, cuuint64_t);

/* ---- structs */
CHECK_SCALAR(cco_cu_mem_location, CUmemLocation);
CHECK_FIELD(cco_cu_mem_location, CUmemLocation, type);
CHECK_FIELD(cco_cu_mem_location, CUmemLocation, id);

CHECK_SCALAR(cco_cu_mem_alloc_prop, CUmemAllocationProp);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, type);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, requestedHandleTypes);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, location);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, location.type);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, location.id);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, win32HandleMetaData);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, allocFlags);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, allocFlags.compressionType);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, allocFlags.gpuDirectRDMACapable);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, allocFlags.usage);
CHECK_FIELD(cco_cu_mem_alloc_prop, CUmemAllocationProp, allocFlags.reserved);

CHECK_SCALAR(cco_cu_mem_access_desc, CUmemAccessDesc);
CHECK_FIELD(cco_cu_mem_access_desc, CUmemAccessDesc, location);
CHECK_FIELD(cco_cu_mem_access_desc, CUmemAccessDesc, location.type);
CHECK_FIELD(cco_cu_mem_access_desc, CUmemAccessDesc, location.id);
CHECK_FIELD(cco_cu_mem_access_desc, CUmemAccessDesc, flags);

CHECK_SCALAR(cco_cu_batch_mem_op, CUstreamBatchMemOpParams);
CHECK_FIELD(cco_cu_batch_mem_op, CUstreamBatchMemOpParams, operation);
CHECK_FIELD(cco_cu_batch_mem_op, CUstreamBatchMemOpParams, writeValue.operation);
CHECK_FIELD(cco_cu_batch_mem_op, CUstreamBatchMemOpParams, writeValue.address);
CHECK_FIELD(cco_cu_batch_mem_op, CUstreamBatchMemOpParams, writeValue.value64);
CHECK_FIELD(cco_cu_batch_mem_op, CUstreamBatchMemOpParams, writeValue.flags);
CHECK_FIELD(cco_cu_batch_mem_op, CUstreamBatchMemOpParams, writeValue.alias);

CHECK_SCALAR(cco_cu_memcpy_attributes, CUmemcpyAttributes);
CHECK_FIELD(cco_cu_memcpy_attributes, CUmemcpyAttributes, srcAccessOrder);
CHECK_FIELD(cco_cu_memcpy_attributes, CUmemcpyAttributes, srcLocHint);
CHECK_FIELD(cco_cu_memcpy_attributes, CUmemcpyAttributes, dstLocHint);
CHECK_FIELD(cco_cu_memcpy_attributes, CUmemcpyAttributes, flags);

/* ---- constants */
CHECK_CONST(CCO_CU_SUCCESS, CUDA_SUCCESS);
CHECK_CONST(CCO_CU_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
CHECK_CONST(CCO_CU_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
CHECK_CONST(CCO_CU_MEM_ALLOCATION_TYPE_PINNED, CU_MEM_ALLOCATION_TYPE_PINNED);
CHECK_CONST(CCO_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
CHECK_CONST(CCO_CU_MEM_LOCATION_TYPE_DEVICE, CU_MEM_LOCATION_TYPE_DEVICE);
CHECK_CONST(CCO_CU_MEM_ACCESS_FLAGS_PROT_READWRITE, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
CHECK_CONST(CCO_CU_MEM_ALLOC_GRANULARITY_MINIMUM, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
CHECK_CONST(CCO_CU_MEM_ALLOC_GRANULARITY_RECOMMENDED, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
CHECK_CONST(CCO_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
            CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED);
CHECK_CONST(CCO_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED);
CHECK_CONST(CCO_CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
            CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED);
CHECK_CONST(CCO_CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
CHECK_CONST(CCO_CU_MEMHOSTALLOC_PORTABLE, CU_MEMHOSTALLOC_PORTABLE);
CHECK_CONST(CCO_CU_MEMHOSTALLOC_DEVICEMAP, CU_MEMHOSTALLOC_DEVICEMAP);
CHECK_CONST(CCO_CU_STREAM_WAIT_VALUE_GEQ, CU_STREAM_WAIT_VALUE_GEQ);
CHECK_CONST(CCO_CU_STREAM_WRITE_VALUE_DEFAULT, CU_STREAM_WRITE_VALUE_DEFAULT);
CHECK_CONST(CCO_CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
CHECK_CONST(CCO_CU_GET_PROC_ADDRESS_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS);
CHECK_CONST(CCO_CU_STREAM_MEM_OP_WRITE_VALUE_64, CU_STREAM_MEM_OP_WRITE_VALUE_64);
CHECK_CONST(CCO_CU_MEMCPY_SRC_ACCESS_ORDER_STREAM, CU_MEMCPY_SRC_ACCESS_ORDER_STREAM);
CHECK_CONST(CCO_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
CHECK_CONST(CCO_CU_STREAM_CAPTURE_STATUS_NONE, CU_STREAM_CAPTURE_STATUS_NONE);
CHECK_CONST(CCO_CU_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NO_BINARY_FOR_GPU);
_Static_assert(CCO_CU_ABI_VERSION >= 12000 && CCO_CU_ABI_VERSION <= CUDA_VERSION,
               "the ABI version must be one this toolkit describes");

/* ---- entry points: each against the newest PFN typedef at or below
 * CCO_CU_ABI_VERSION (12000), i.e. what cuGetProcAddress returns for it. */
_Static_assert(SAME_TYPE(cco_cu_get_proc_address_fn, PFN_cuGetProcAddress_v12000), "cuGetProcAddress");
_Static_assert(SAME_TYPE(cco_cu_get_proc_address_fn, __typeof__(&cuGetProcAddress_v2)),
               "cuGetProcAddress_v2 (the symbol dlsym looks up)");
CHECK_ENTRY(init, PFN_cuInit_v2000);
CHECK_ENTRY(driverGetVersion, PFN_cuDriverGetVersion_v2020);
CHECK_ENTRY(getErrorName, PFN_cuGetErrorName_v6000);
CHECK_ENTRY(getErrorString, PFN_cuGetErrorString_v6000);
CHECK_ENTRY(deviceGet, PFN_cuDeviceGet_v2000);
CHECK_ENTRY(deviceGetCount, PFN_cuDeviceGetCount_v2000);
CHECK_ENTRY(deviceGetPCIBusId, PFN_cuDeviceGetPCIBusId_v4010);
CHECK_ENTRY(deviceGetByPCIBusId, PFN_cuDeviceGetByPCIBusId_v4010);
CHECK_ENTRY(deviceCanAccessPeer, PFN_cuDeviceCanAccessPeer_v4000);
CHECK_ENTRY(deviceGetAttribute, PFN_cuDeviceGetAttribute_v2000);
CHECK_ENTRY(ctxGetCurrent, PFN_cuCtxGetCurrent_v4000);
CHECK_ENTRY(ctxSetCurrent, PFN_cuCtxSetCurrent_v4000);
CHECK_ENTRY(ctxGetDevice, PFN_cuCtxGetDevice_v2000); /* not the CUDA 13.0 two-argument form */
CHECK_ENTRY(devicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000);
CHECK_ENTRY(devicePrimaryCtxRelease, PFN_cuDevicePrimaryCtxRelease_v11000);
CHECK_ENTRY(streamCreate, PFN_cuStreamCreate_v2000);
CHECK_ENTRY(streamDestroy, PFN_cuStreamDestroy_v4000);
CHECK_ENTRY(streamSynchronize, PFN_cuStreamSynchronize_v2000);
CHECK_ENTRY(ctxSynchronize, PFN_cuCtxSynchronize_v2000);
CHECK_ENTRY(memHostAlloc, PFN_cuMemHostAlloc_v2020);
CHECK_ENTRY(memHostGetDevicePointer, PFN_cuMemHostGetDevicePointer_v3020);
CHECK_ENTRY(memFreeHost, PFN_cuMemFreeHost_v2000);
CHECK_ENTRY(memcpyAsync, PFN_cuMemcpyAsync_v4000);
CHECK_ENTRY(streamWriteValue64, PFN_cuStreamWriteValue64_v11070);
CHECK_ENTRY(streamWaitValue64, PFN_cuStreamWaitValue64_v11070);
CHECK_ENTRY(memAlloc, PFN_cuMemAlloc_v3020);
CHECK_ENTRY(memFree, PFN_cuMemFree_v3020);
CHECK_ENTRY(memGetAddressRange, PFN_cuMemGetAddressRange_v3020);
CHECK_ENTRY(memcpyHtoD, PFN_cuMemcpyHtoD_v3020);
CHECK_ENTRY(memcpyDtoH, PFN_cuMemcpyDtoH_v3020);
CHECK_ENTRY(memcpyHtoDAsync, PFN_cuMemcpyHtoDAsync_v3020);
CHECK_ENTRY(memAddressReserve, PFN_cuMemAddressReserve_v10020);
CHECK_ENTRY(memAddressFree, PFN_cuMemAddressFree_v10020);
CHECK_ENTRY(memRelease, PFN_cuMemRelease_v10020);
CHECK_ENTRY(memMap, PFN_cuMemMap_v10020);
CHECK_ENTRY(memUnmap, PFN_cuMemUnmap_v10020);
CHECK_ENTRY(memExportToShareableHandle, PFN_cuMemExportToShareableHandle_v10020);
CHECK_ENTRY(memImportFromShareableHandle, PFN_cuMemImportFromShareableHandle_v10020);
CHECK_ENTRY(memRetainAllocationHandle, PFN_cuMemRetainAllocationHandle_v11000);
CHECK_ENTRY(moduleLoadData, PFN_cuModuleLoadData_v2000);
CHECK_ENTRY(moduleUnload, PFN_cuModuleUnload_v2000);
CHECK_ENTRY(moduleGetFunction, PFN_cuModuleGetFunction_v2000);
CHECK_ENTRY(launchKernel, PFN_cuLaunchKernel_v4000);
CHECK_ENTRY(occupancyMaxActiveBlocksPerMultiprocessor, PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050);
CHECK_ENTRY(streamIsCapturing, PFN_cuStreamIsCapturing_v10000);

/* Entry points taking one of the mirrored structs: C never makes two struct
 * types compatible, so the PFN is compared with the prototype written with
 * the real struct, and the member with the same prototype written with the
 * mirror (whose layout is checked above). */
#define CHECK_STRUCT_ENTRY(member, pfn, real_proto, mirror_proto)                     \
  _Static_assert(SAME_TYPE(pfn, real_proto), #pfn " is not the expected prototype"); \
  _Static_assert(SAME_TYPE(MEMBER_TYPE(member), mirror_proto), "cco_cu_api." #member " differs from " #pfn)

CHECK_STRUCT_ENTRY(memGetAllocationGranularity, PFN_cuMemGetAllocationGranularity_v10020,
                   CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags),
                   CUresult (*)(size_t*, const cco_cu_mem_alloc_prop*, CUmemAllocationGranularity_flags));
CHECK_STRUCT_ENTRY(memCreate, PFN_cuMemCreate_v10020,
                   CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                unsigned long long),
                   CUresult (*)(CUmemGenericAllocationHandle*, size_t, const cco_cu_mem_alloc_prop*,
                                unsigned long long));
CHECK_STRUCT_ENTRY(memSetAccess, PFN_cuMemSetAccess_v10020,
                   CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t),
                   CUresult (*)(CUdeviceptr, size_t, const cco_cu_mem_access_desc*, size_t));
CHECK_STRUCT_ENTRY(memGetAllocationPropertiesFromHandle, PFN_cuMemGetAllocationPropertiesFromHandle_v10020,
                   CUresult (*)(CUmemAllocationProp*, CUmemGenericAllocationHandle),
                   CUresult (*)(cco_cu_mem_alloc_prop*, CUmemGenericAllocationHandle));

CHECK_STRUCT_ENTRY(streamBatchMemOp, PFN_cuStreamBatchMemOp_v11070,
                   CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int),
                   CUresult (*)(CUstream, unsigned int, cco_cu_batch_mem_op*, unsigned int));
CHECK_STRUCT_ENTRY(memcpyBatchAsync, PFN_cuMemcpyBatchAsync_v13000,
                   CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                                size_t*, size_t, CUstream),
                   CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, cco_cu_memcpy_attributes*,
                                size_t*, size_t, CUstream));

/* The versioned symbols cuda_probe.c falls back to with dlsym exist under
 * these names with these types (cuda.h maps the base names onto them). */
#define CHECK_SYMBOL(member, symbol)                                       \
  _Static_assert(SAME_TYPE(MEMBER_TYPE(member), __typeof__(&symbol)),     \
                 "cco_cu_api." #member " differs from " #symbol)
CHECK_SYMBOL(devicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
CHECK_SYMBOL(streamDestroy, cuStreamDestroy_v2);
CHECK_SYMBOL(memAlloc, cuMemAlloc_v2);
CHECK_SYMBOL(memFree, cuMemFree_v2);
CHECK_SYMBOL(memGetAddressRange, cuMemGetAddressRange_v2);
CHECK_SYMBOL(memcpyHtoD, cuMemcpyHtoD_v2);
CHECK_SYMBOL(memcpyDtoH, cuMemcpyDtoH_v2);
CHECK_SYMBOL(memcpyHtoDAsync, cuMemcpyHtoDAsync_v2);
CHECK_SYMBOL(ctxGetDevice, cuCtxGetDevice);
/* (mirrored structs: the symbol against the PFN the member was checked with) */
_Static_assert(SAME_TYPE(__typeof__(&cuStreamBatchMemOp_v2), PFN_cuStreamBatchMemOp_v11070), "cuStreamBatchMemOp_v2");
_Static_assert(SAME_TYPE(__typeof__(&cuMemcpyBatchAsync_v2), PFN_cuMemcpyBatchAsync_v13000), "cuMemcpyBatchAsync_v2");

TEST(abi) {
  /* Everything above is checked at compile time; compiling is passing. */
  printf("  abi ok (CUDA_VERSION %d, cco_cu_api of %zu entry points)\n", CUDA_VERSION,
         sizeof(cco_cu_api) / sizeof(void (*)(void)));
  CHECK(sizeof(cco_cu_mem_alloc_prop) == sizeof(CUmemAllocationProp));
}

#else

TEST(abi) { printf("  cuda.h not found: ABI not checked\n"); }

#endif

int main(void) { return RUN_TESTS(); }
