#!/usr/bin/env bash
# Installs this build (cmake --install) into a scratch prefix, moves the
# prefix (an install must not depend on where it was made), and uses it as a
# project outside the tree would: the consumer in tests/install/consumer
# built with find_package(cco CONFIG) (shared, static, device headers) and
# with pkg-config and plain cc, each run as one rank and as two ranks under
# the installed ccorun, all without LD_LIBRARY_PATH. Also checks the
# compatibility policy of ccoConfigVersion.cmake.
# Run by ctest with CCO_BUILD=<build dir> and CCO_SRC=<repo root>; the main
# build registers it, not the sanitizer builds (the consumer would need the
# sanitizer flags). Prints one line per check and ends with "N passed,
# N failed".
set -u
build=${CCO_BUILD:?set CCO_BUILD to the build directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/scripts/check_lib.sh
source "$src/tests/scripts/check_lib.sh"

# Nothing may find libcco but the install's own paths.
unset LD_LIBRARY_PATH CCO_LIBRARY
export CCO_PLATFORM=host CCO_IGNORE_CPU_AFFINITY=1
prefix=$tmp/prefix consumer=$src/tests/install/consumer
version=$(sed -n 's/^#define CCO_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$src/include/cco/cco.h" |
  paste -sd.)
major=${version%%.*} minor=${version#*.}; minor=${minor%%.*}

install_and_move() {
  cmake --install "$build" --prefix "$tmp/staged" && mv "$tmp/staged" "$prefix"
}
check "cmake --install into a scratch prefix, then moved elsewhere" install_and_move

layout() {
  local f
  for f in "lib/libcco.so.$version" "lib/libcco.so.$major" lib/libcco.so lib/libcco.a bin/ccorun bin/cco-info \
    include/cco/cco.h include/cco/cco_device_all.h include/cco/device/impl/lsa_impl.h \
    lib/cmake/cco/ccoConfig.cmake lib/cmake/cco/ccoConfigVersion.cmake lib/pkgconfig/cco.pc \
    lib/pkgconfig/cco-static.pc; do
    [ -e "$prefix/$f" ] || { echo "missing: $f"; return 1; }
  done
  [ -L "$prefix/lib/libcco.so.$major" ] && [ -L "$prefix/lib/libcco.so" ] || { echo "SONAME links missing"; return 1; }
  # shellcheck disable=SC2016  # $ORIGIN is literal
  readelf -d "$prefix/bin/ccorun" | grep -E 'R(UN)?PATH' | grep -F '$ORIGIN/../lib'
}
check "layout: libcco $version with SONAME links, libcco.a, headers (device/impl too), programs, CMake package, cco.pc; ccorun's runpath \$ORIGIN/../lib" layout

check "installed cco-info runs" "$prefix/bin/cco-info"

# The device bitcode, when this build made it, lands in lib/cco/ (docs/install.md).
if [ -e "$build/lib/libcco_device_sm90.bc" ]; then
  check "device bitcode installed as lib/cco/libcco_device_sm90.bc" test -s "$prefix/lib/cco/libcco_device_sm90.bc"
fi

# ranks_ok N PROGRAM: one line ending in "ok" per rank, N ranks.
ranks_ok() {
  local n=$1 program=$2 out
  if [ "$n" = 1 ]; then out=$("$program"); else out=$("$prefix/bin/ccorun" -t 60 -n "$n" "$program"); fi || {
    echo "$out"; return 1; }
  echo "$out"
  [ "$(grep -c "^consumer rank .*/$n: libcco $version, .*: ok$" <<<"$out")" -eq "$n" ]
}

cmake_consumer() { # extra cmake arguments...
  cmake -S "$consumer" -B "$tmp/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release "$@"
}
build_with_cmake() {
  cmake_consumer -DCCO_REQUIRE_VERSION="$version" && cmake --build "$tmp/cmake-build" -j 2
}
check "consumer with find_package(cco $version CONFIG): cco::cco, cco::cco_static, cco::device" build_with_cmake
for kind in shared static; do
  check "find_package consumer ($kind), one rank, no LD_LIBRARY_PATH" ranks_ok 1 "$tmp/cmake-build/consumer_$kind"
  check "find_package consumer ($kind), two ranks under the installed ccorun" \
    ranks_ok 2 "$tmp/cmake-build/consumer_$kind"
done

# Before 1.0 a minor release may break the API: 0.x accepts only its own
# minor version. From 1.0 on, the next major version is what is refused.
if [ "$major" = 0 ] && [ "$minor" -gt 0 ]; then refused=0.$((minor - 1)); else refused=$((major + 1)).0; fi
refuses() { ! cmake_consumer -DCCO_REQUIRE_VERSION="$refused"; }
check "find_package(cco $refused) refuses cco $version" refuses

build_with_pkg_config() {
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  local cflags libs static libdir
  cflags=$(pkg-config --cflags cco) && libs=$(pkg-config --libs cco) && static=$(pkg-config --libs cco-static) &&
    libdir=$(pkg-config --variable=libdir cco) || return 1
  [ "$(pkg-config --modversion cco)" = "$version" ] || { echo "cco.pc says $(pkg-config --modversion cco)"; return 1; }
  # shellcheck disable=SC2086  # the flags are lists
  cc -std=c11 -o "$tmp/pc_shared" "$consumer/consumer.c" "$consumer/device_part.c" -I"$consumer" $cflags $libs \
    -Wl,-rpath,"$libdir" &&
    cc -std=c11 -o "$tmp/pc_static" "$consumer/consumer.c" "$consumer/device_part.c" -I"$consumer" $cflags $static
}
if command -v pkg-config >/dev/null; then
  check "consumer with pkg-config cco / cco-static and cc" build_with_pkg_config
  check "pkg-config consumer (shared), one rank" ranks_ok 1 "$tmp/pc_shared"
  check "pkg-config consumer (shared), two ranks under the installed ccorun" ranks_ok 2 "$tmp/pc_shared"
  check "pkg-config consumer (static), two ranks under the installed ccorun" ranks_ok 2 "$tmp/pc_static"
else
  failed=$((failed + 1)); echo "FAIL pkg-config is not installed (scripts/install-deps.sh installs it)"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
