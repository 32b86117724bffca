#!/usr/bin/env bash
# The public header is C11 and also valid C++, under gcc and clang, with
# warnings as errors.
set -u
src=${CCO_SRC:?set CCO_SRC to the repository root}
passed=0 failed=0
try() { # name, command...
  local name=$1; shift
  if out=$("$@" 2>&1); then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; echo "$out" | head -20 | sed 's/^/    /'; fi
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '#include <cco/cco.h>\nint main(void) { ccoUniqueId id; (void)id; return ccoSuccess; }\n' >"$tmp/use.c"
cp "$tmp/use.c" "$tmp/use.cpp"
warn="-Wall -Wextra -Werror -pedantic"
for cc in gcc clang; do
  # make test installs clang; a machine that only runs the suite may lack it.
  command -v $cc >/dev/null || { echo "SKIP $cc: not installed here"; continue; }
  try "$cc -std=c11" $cc -std=c11 $warn -I"$src/include" -fsyntax-only "$tmp/use.c"
done
for cxx in g++ clang++; do
  command -v $cxx >/dev/null || { echo "SKIP $cxx: not installed here"; continue; }
  try "$cxx -std=c++11" $cxx -std=c++11 $warn -I"$src/include" -fsyntax-only "$tmp/use.cpp"
  try "$cxx -std=c++17" $cxx -std=c++17 $warn -I"$src/include" -fsyntax-only "$tmp/use.cpp"
done
[ "$passed" -gt 0 ] || { echo "no compiler found"; exit 1; }
echo "test_headers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
