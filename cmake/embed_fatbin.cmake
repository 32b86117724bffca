# cmake -DIN=<fatbin> -DOUT=<file.c> -P embed_fatbin.cmake
# Writes the fatbin as the byte array cco_coll_fatbin (src/coll/coll.h).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "((0x..,){24})" "\\1\n  " body "${body}")
file(WRITE ${OUT} "/* Generated from ${IN} by cmake/embed_fatbin.cmake; do not edit. */
#include <stddef.h>

#include \"coll/coll.h\"

/* cuModuleLoadData reads the image in place: keep it aligned. */
__attribute__((aligned(64))) const unsigned char cco_coll_fatbin[${bytes}] = {
  ${body}
};
const size_t cco_coll_fatbin_size = ${bytes};
")
