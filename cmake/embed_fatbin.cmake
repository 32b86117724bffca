# cmake -DIN=<fatbin> -DOUT=<file.c> [-DNAME=<array> -DHEADER=<header>] -P embed_fatbin.cmake
# Writes the fatbin as the byte array NAME (default cco_coll_fatbin, declared
# in HEADER, default src/coll/coll.h) and its size NAME_size.
if(NOT NAME)
  set(NAME cco_coll_fatbin)
endif()
if(NOT HEADER)
  set(HEADER coll/coll.h)
endif()
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n  " body "${body}")
file(WRITE ${OUT} "/* Generated from ${IN} by cmake/embed_fatbin.cmake; do not edit. */
#include <stddef.h>

#include \"${HEADER}\"

/* cuModuleLoadData reads the image in place: keep it aligned. */
__attribute__((aligned(64))) const unsigned char ${NAME}[${bytes}] = {
  ${body}
};
const size_t ${NAME}_size = ${bytes};
")
