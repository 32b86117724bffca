# The device bitcode for Triton: libcco_device_sm<arch>.bc in ${CMAKE_BINARY_DIR}/lib,
# one per GPU architecture this clang knows of 80, 90 and 100 (target cco_device_bc,
# part of ALL). The C wrappers are generated from the table in
# python/cco/ir/device_functions.py, the one the Python bindings read.
# Needs python3 and a clang that targets NVPTX (clang-19 first); without them
# the target is absent and a note says why.

find_package(Python3 COMPONENTS Interpreter)
find_program(CCO_NVPTX_CLANG NAMES clang-19 clang-20 clang-21 clang
  DOC "clang that compiles the device bitcode (--target=nvptx64-nvidia-cuda)")

# -fconvergent-functions: barriers stay where the C puts them (CLANG_FLAGS
# of python/cco/ir/wrappers.py, the flags the Python side compiles with, says why).
set(CCO_BC_FLAGS --target=nvptx64-nvidia-cuda -std=c11 -nostdlibinc -fconvergent-functions -O2 -Wall -Wextra)
if(CCO_WERROR)
  list(APPEND CCO_BC_FLAGS -Werror)
endif()

# Which of the wanted architectures this clang accepts (clang-19 stops at sm_90).
set(CCO_BC_ARCHS "")
if(CCO_NVPTX_CLANG AND Python3_Interpreter_FOUND)
  set(probe ${CMAKE_BINARY_DIR}/CMakeFiles/cco_bc_probe.c)
  file(WRITE ${probe} "int cco_bc_probe;\n")
  foreach(sm 80 90 100)
    execute_process(COMMAND ${CCO_NVPTX_CLANG} ${CCO_BC_FLAGS} -march=sm_${sm} -c ${probe} -o /dev/null
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
    if(rc EQUAL 0)
      list(APPEND CCO_BC_ARCHS ${sm})
    endif()
  endforeach()
  # A clang older than the CUDA toolkit it finds warns about the version;
  # the wrappers need nothing of the toolkit.
  execute_process(COMMAND ${CCO_NVPTX_CLANG} ${CCO_BC_FLAGS} -Wno-unknown-cuda-version -march=sm_80
    -c ${probe} -o /dev/null RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    list(APPEND CCO_BC_FLAGS -Wno-unknown-cuda-version)
  endif()
endif()

if(CCO_BC_ARCHS)
  set(gen_dir ${CMAKE_SOURCE_DIR}/python/cco/ir)
  set(wrappers_c ${CMAKE_BINARY_DIR}/bitcode/cco_device_bc.c)
  file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/bitcode)
  add_custom_command(OUTPUT ${wrappers_c}
    COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${CMAKE_SOURCE_DIR}/python
      ${Python3_EXECUTABLE} -m cco.ir.wrappers --output ${wrappers_c}
    DEPENDS ${gen_dir}/device_functions.py ${gen_dir}/wrappers.py
    COMMENT "Generating the device bitcode's C wrappers from the table")
  file(GLOB_RECURSE device_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/cco/*.h)
  set(outputs "")
  foreach(sm ${CCO_BC_ARCHS})
    set(out ${CMAKE_BINARY_DIR}/lib/libcco_device_sm${sm}.bc)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CCO_NVPTX_CLANG} ${CCO_BC_FLAGS} -march=sm_${sm} -emit-llvm -I${CMAKE_SOURCE_DIR}/include
        -c ${wrappers_c} -o ${out}
      DEPENDS ${wrappers_c} ${device_headers}
      COMMENT "Building libcco_device_sm${sm}.bc")
    list(APPEND outputs ${out})
  endforeach()
  add_custom_target(cco_device_bc ALL DEPENDS ${outputs})
  list(JOIN CCO_BC_ARCHS ", sm_" archs)
  message(STATUS "cco: device bitcode for sm_${archs} with ${CCO_NVPTX_CLANG}")
else()
  message(STATUS "cco: no device bitcode (needs python3 and a clang that targets NVPTX, e.g. clang-19)")
endif()
