# The collectives' GPU kernels (src/coll/kernels/coll_kernels.cu), compiled by
# nvcc into one fatbin for sm_80, sm_90 and sm_100 (those this nvcc knows;
# PTX of the newest too, so newer GPUs can JIT it) and embedded into libcco
# as a byte array, which the CUDA platform loads with cuModuleLoadData. A
# build without nvcc embeds nothing: libcco then refuses collectives on the
# CUDA platform with ccoUnsupported, and the host platform runs them anyway.
# The wheel's build (CCO_BUILD_CUDA=OFF) still embeds them when nvcc exists.
#
# Sets CCO_COLL_FATBIN_SOURCE (the generated C file, empty without nvcc).

option(CCO_COLL_KERNELS "Embed the collectives' GPU kernels into libcco (needs nvcc)" ON)
set(CCO_COLL_FATBIN_SOURCE "")
if(NOT CCO_COLL_KERNELS)
  message(STATUS "cco: CCO_COLL_KERNELS=OFF, the collectives' GPU kernels are not embedded")
  return()
endif()

if(CMAKE_CUDA_COMPILER)
  set(CCO_COLL_NVCC ${CMAKE_CUDA_COMPILER})
else()
  find_program(CCO_COLL_NVCC nvcc HINTS ENV CUDACXX PATHS /usr/local/cuda/bin
    DOC "nvcc that compiles the collectives' kernels")
endif()
if(NOT CCO_COLL_NVCC)
  message(STATUS "cco: nvcc not found, libcco has no GPU kernels for the collectives")
  return()
endif()

# CCO_KERNEL_ARCHS narrows the list (a developer's build for one GPU, about
# three times faster to compile): -DCCO_KERNEL_ARCHS=90.
set(CCO_KERNEL_ARCHS "80;90;100" CACHE STRING "SM versions of the embedded kernels (among 80, 90, 100)")
execute_process(COMMAND ${CCO_COLL_NVCC} --list-gpu-arch OUTPUT_VARIABLE known ERROR_QUIET
  RESULT_VARIABLE rc)
set(archs "")
foreach(sm ${CCO_KERNEL_ARCHS})
  if(rc EQUAL 0 AND known MATCHES "compute_${sm}([^0-9]|$)")
    list(APPEND archs ${sm})
  endif()
endforeach()
if(NOT archs)
  message(STATUS "cco: ${CCO_COLL_NVCC} knows none of sm_${CCO_KERNEL_ARCHS}; no collectives' kernels")
  return()
endif()
set(gencode "")
foreach(sm ${archs})
  list(APPEND gencode -gencode arch=compute_${sm},code=sm_${sm})
endforeach()
list(GET archs -1 newest)
list(APPEND gencode -gencode arch=compute_${newest},code=compute_${newest})

# The device building blocks come from include/cco/cco_coll.h.
set(includes -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/src)
file(GLOB_RECURSE deps CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/cco/*.h ${CMAKE_SOURCE_DIR}/src/coll/kernels/*)

set(out ${CMAKE_BINARY_DIR}/coll_kernels)
add_custom_command(OUTPUT ${out}/coll_kernels.fatbin
  COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
  COMMAND ${CCO_COLL_NVCC} -fatbin -std=c++17 -O3 --threads 0 ${includes} ${gencode}
    -o ${out}/coll_kernels.fatbin ${CMAKE_SOURCE_DIR}/src/coll/kernels/coll_kernels.cu
  DEPENDS ${deps}
  COMMENT "Compiling the collectives' kernels (sm_${archs}) into a fatbin"
  VERBATIM)
add_custom_command(OUTPUT ${out}/coll_fatbin.c
  COMMAND ${CMAKE_COMMAND} -DIN=${out}/coll_kernels.fatbin -DOUT=${out}/coll_fatbin.c
    -P ${CMAKE_SOURCE_DIR}/cmake/embed_fatbin.cmake
  DEPENDS ${out}/coll_kernels.fatbin ${CMAKE_SOURCE_DIR}/cmake/embed_fatbin.cmake
  COMMENT "Embedding the collectives' fatbin into libcco"
  VERBATIM)
set(CCO_COLL_FATBIN_SOURCE ${out}/coll_fatbin.c)
string(REPLACE ";" ", sm_" archlist "${archs}")
message(STATUS "cco: the collectives' kernels are embedded (sm_${archlist}; ${CCO_COLL_NVCC})")
