# The version has one source, the CCO_VERSION_MAJOR/MINOR/PATCH macros of
# include/cco/cco.h: that is what ccoGetVersion reports at run time, so the
# CMake project, the SONAME, the CMake package, cco.pc and the Python wheel
# (pyproject.toml reads the same lines) all take it from there and cannot
# disagree with the library.
function(cco_read_version header out_var)
  file(STRINGS "${header}" lines REGEX "^#define CCO_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+ *$")
  set(parts "")
  foreach(part MAJOR MINOR PATCH)
    string(REGEX MATCH "CCO_VERSION_${part} +([0-9]+)" found "${lines}")
    if(NOT found)
      message(FATAL_ERROR "cco: no '#define CCO_VERSION_${part} <number>' line in ${header}")
    endif()
    list(APPEND parts "${CMAKE_MATCH_1}")
  endforeach()
  list(JOIN parts "." version)
  set(${out_var} "${version}" PARENT_SCOPE)
endfunction()
