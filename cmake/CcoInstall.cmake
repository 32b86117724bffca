# What `cmake --install` (and `make install`) puts in place, by component:
#   runtime      libcco.so.X.Y.Z and its SONAME link, ccorun, cco-info
#   headers      include/cco/** (host and device headers, device/impl/ too)
#   device       the device bitcode, lib/cco/libcco_device*.bc, once built
#   development  the libcco.so link, libcco.a, the CMake package, cco.pc
# The wheel (pyproject.toml) installs runtime, headers and device under its
# package directory; a prefix gets all four. Included last by CMakeLists.txt,
# so that every target it names already exists.
include(CMakePackageConfigHelpers)  # GNUInstallDirs: CMakeLists.txt

set(CCO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cco)
set(CCO_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Installed programs find libcco relative to themselves, so a prefix (or the
# wheel's package) can be moved and still needs no LD_LIBRARY_PATH.
file(RELATIVE_PATH CCO_BIN_TO_LIB ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(ccorun PROPERTIES INSTALL_RPATH "$ORIGIN/${CCO_BIN_TO_LIB}")

set_target_properties(cco_static PROPERTIES EXPORT_NAME cco_static)
set_target_properties(cco_device_headers PROPERTIES EXPORT_NAME device)

install(TARGETS cco EXPORT ccoTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development)
install(TARGETS cco_static cco_device_headers EXPORT ccoTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(TARGETS ccorun cco-info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cco DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT headers FILES_MATCHING PATTERN "*.h")

# The device bitcode has its own target once it exists (cco_device_bc, which
# writes libcco_device*.bc next to the libraries); until then this is a no-op.
if(TARGET cco_device_bc)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/lib/ DESTINATION ${CMAKE_INSTALL_LIBDIR}/cco
    COMPONENT device FILES_MATCHING PATTERN "libcco_device*.bc")
endif()

# Everything the rules above install, so that `make install` and the wheel
# build only that (not the tests, examples and benchmarks).
add_custom_target(cco_dist)
add_dependencies(cco_dist cco cco_static ccorun cco-info)
if(TARGET cco_device_bc)
  add_dependencies(cco_dist cco_device_bc)
endif()

# ---- CMake package: find_package(cco CONFIG) -------------------------------
install(EXPORT ccoTargets NAMESPACE cco:: DESTINATION ${CCO_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ccoConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/ccoConfig.cmake INSTALL_DESTINATION ${CCO_CMAKE_DIR})
# Before 1.0 a minor release may break the API (the "names before 0.2" aliases
# soften renames, they do not promise compatibility), so 0.x asks for the same
# minor version; from 1.0 on, the same major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(CCO_VERSION_COMPATIBILITY SameMinorVersion)
else()
  set(CCO_VERSION_COMPATIBILITY SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/ccoConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${CCO_VERSION_COMPATIBILITY})
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ccoConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/ccoConfigVersion.cmake
  DESTINATION ${CCO_CMAKE_DIR} COMPONENT development)

# ---- pkg-config: cco.pc (shared), cco-static.pc (the archive) ---------------
# The prefix is found from the .pc file's own place (${pcfiledir}), because
# `cmake --install --prefix` may choose another prefix than configure did.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  message(FATAL_ERROR "cco: CMAKE_INSTALL_LIBDIR and CMAKE_INSTALL_INCLUDEDIR must be relative "
    "to the prefix (cco.pc and the CMake package are relocatable)")
endif()
file(RELATIVE_PATH CCO_PC_TO_PREFIX /prefix/${CCO_PKGCONFIG_DIR} /prefix)
string(REGEX REPLACE "/$" "" CCO_PC_TO_PREFIX "${CCO_PC_TO_PREFIX}")  # "../../" -> "../.."
foreach(pc cco cco-static)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/${pc}.pc DESTINATION ${CCO_PKGCONFIG_DIR}
    COMPONENT development)
endforeach()
