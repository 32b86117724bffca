# The MoE op's GPU kernels (src/ops/kernels/moe_kernels.cu): compiled like
# the collectives' (cmake/coll_kernels.cmake, included first: its nvcc and
# -gencode list) into a fatbin of their own, embedded into libcco as
# cco_moe_fatbin. Without nvcc nothing is embedded and the CUDA platform
# refuses the op with ccoUnsupported; the host platform runs it anyway.
#
# Sets CCO_MOE_FATBIN_SOURCE (the generated C file, empty without nvcc).

set(CCO_MOE_FATBIN_SOURCE "")
if(NOT CCO_COLL_FATBIN_SOURCE OR NOT gencode)
  return()
endif()
set(out ${CMAKE_BINARY_DIR}/moe_kernels)
file(GLOB_RECURSE deps CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/cco/*.h ${CMAKE_SOURCE_DIR}/src/ops/kernels/*)
add_custom_command(OUTPUT ${out}/moe_kernels.fatbin
  COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
  COMMAND ${CCO_COLL_NVCC} -fatbin -std=c++17 -O3 --threads 0 -I${CMAKE_SOURCE_DIR}/include -I${CMAKE_SOURCE_DIR}/src ${gencode}
    -o ${out}/moe_kernels.fatbin ${CMAKE_SOURCE_DIR}/src/ops/kernels/moe_kernels.cu
  DEPENDS ${deps}
  COMMENT "Compiling the MoE op's kernels into a fatbin"
  VERBATIM)
add_custom_command(OUTPUT ${out}/moe_fatbin.c
  COMMAND ${CMAKE_COMMAND} -DIN=${out}/moe_kernels.fatbin -DOUT=${out}/moe_fatbin.c -DNAME=cco_moe_fatbin
    -DHEADER=ops/moe.h -P ${CMAKE_SOURCE_DIR}/cmake/embed_fatbin.cmake
  DEPENDS ${out}/moe_kernels.fatbin ${CMAKE_SOURCE_DIR}/cmake/embed_fatbin.cmake
  COMMENT "Embedding the MoE op's fatbin into libcco"
  VERBATIM)
set(CCO_MOE_FATBIN_SOURCE ${out}/moe_fatbin.c)
