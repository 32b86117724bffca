#!/usr/bin/env bash
# Every header under include/cco compiles ALONE: for each public header
# (include/cco/*.h, include/cco/device/*.h) and each private one
# (include/cco/device/impl/*.h), a file that includes only that header
# (twice, for the include guard) compiles under every compiler here, with
# warnings as errors:
#   gcc -std=c11 (also with CCO_NO_COMPAT_NAMES: the headers use only the
#   current names), g++ -std=c++11 and -std=c++17, clang -std=c11,
#   clang++ -std=c++11 and -std=c++17, nvcc -arch=sm_90 (host and device
#   passes), clang --target=nvptx64-nvidia-cuda bitcode (the Triton path),
#   NVRTC with the Python package's shims (the cupy path); the device-only
#   targets skip the host-only headers named below, saying why.
# A compiler that is missing is skipped with a note. A probe header that
# misses an include must fail the same check, or the check is broken.
# Also: code written against 0.1 (its headers and the names of the "names
# before 0.2" blocks) still compiles, and stops compiling under
# CCO_NO_COMPAT_NAMES; and no in-tree code or document uses those old names
# (docs/naming.md lists them).
# Run by ctest with CCO_SRC=<repo root>. Prints one line per check and ends
# with "N passed, N failed".
set -u
src=${CCO_SRC:?set CCO_SRC to the repository root}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_headers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"

inc=$src/include
headers=()
for h in "$inc"/cco/*.h "$inc"/cco/device/*.h "$inc"/cco/device/impl/*.h; do headers+=("${h#"$inc"/}"); done
# Host API: kept off the device-only targets, for the reason given.
declare -A host_only=(
  [cco/cco_torch.h]="host API (the torch allocator hooks): ssize_t needs POSIX <sys/types.h>"
  [cco/cco.h]="host API: NVRTC refuses host function declarations in JIT mode"
  [cco/cco_moe.h]="host API (the MoE op): NVRTC refuses host function declarations in JIT mode"
)

check_layout() {
  local h
  for h in cco/cco.h cco/cco_devcomm.h cco/cco_window.h cco/cco_device.h cco/cco_sdma.h cco/cco_gda.h \
    cco/cco_scale_out.h cco/cco_device_all.h cco/device/cco_arch.h cco/device/cco_gda_types.h \
    cco/device/cco_sdma_types.h cco/device/impl/arch_impl.h cco/device/impl/lsa_impl.h \
    cco/device/impl/sdma_impl.h cco/device/impl/gda_impl.h cco/cco_coll_types.h cco/cco_coll.h \
    cco/device/impl/coll_impl.h cco/device/impl/coll_reduce_impl.h cco/device/impl/coll_ll_impl.h \
    cco/device/impl/coll_convert_impl.h; do
    [ -f "$inc/$h" ] || { echo "missing: include/$h"; return 1; }
  done
  echo "${#headers[@]} headers: ${headers[*]}"
}
check "the header layout: every public and private header is where the docs say" check_layout

# One file per header: includes it alone, twice.
mkdir -p "$tmp/alone"
for h in "${headers[@]}"; do
  f=$tmp/alone/$(echo "${h%.h}" | tr / _)
  printf '#include "%s"\n#include "%s" /* again: the include guard */\n' "$h" "$h" >"$f.c"
  cp "$f.c" "$f.cpp"
  cp "$f.c" "$f.cu"
done

# alone INCLUDE_DIR EXT SKIP HEADER... -- COMPILER ARGS...: compiles the file
# of each header with COMPILER ARGS -I INCLUDE_DIR FILE, except the headers
# in the list SKIP (host_only says why); fails naming every header that
# does not compile.
alone() {
  local dir=$1 ext=$2 skip=" $3 "; shift 3
  local hs=()
  while [ "$1" != -- ]; do hs+=("$1"); shift; done
  shift
  local h f bad=0 n=0
  for h in "${hs[@]}"; do
    if [[ "$skip" == *" $h "* ]]; then
      echo "not for this target: $h (${host_only[$h]})"
      continue
    fi
    f=$tmp/alone/$(echo "${h%.h}" | tr / _).$ext
    [ -f "$f" ] || { printf '#include "%s"\n' "$h" >"$f"; }
    if "$@" -I"$dir" "$f" >"$tmp/one.out" 2>&1; then
      n=$((n + 1))
    else
      bad=$((bad + 1))
      echo "does not compile alone: $h"
      head -15 "$tmp/one.out" | sed 's/^/  /'
    fi
  done
  echo "$n compiled alone, $bad failed"
  [ "$bad" -eq 0 ]
}

cwarn=(-Wall -Wextra -Werror -pedantic -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes -Wvla)
cxxwarn=(-Wall -Wextra -Werror -pedantic -Wshadow -Wpointer-arith)
have() { command -v "$1" >/dev/null; }

# The check itself: a header that uses uint32_t without <stdint.h> must fail.
probe_fails() {
  mkdir -p "$tmp/probe/cco"
  printf '#ifndef PROBE_H_\n#define PROBE_H_\nstatic inline uint32_t probe(void) { return 1u; }\n#endif\n' \
    >"$tmp/probe/cco/probe_missing_include.h"
  if alone "$tmp/probe" c "" cco/probe_missing_include.h -- gcc -std=c11 "${cwarn[@]}" -fsyntax-only; then
    echo "a header missing <stdint.h> compiled: the check proves nothing"
    return 1
  fi
  echo "(the failure above is expected)"
}
if have gcc; then
  check "gcc: a probe header that misses an include fails the alone check" probe_fails
fi

for cc in gcc clang; do
  have "$cc" || { skip "$cc: not installed here"; continue; }
  check "$cc -std=c11 ${cwarn[*]}: each header alone" \
    alone "$inc" c "" "${headers[@]}" -- "$cc" -std=c11 "${cwarn[@]}" -fsyntax-only
done
if have gcc; then
  check "gcc -std=c11 -DCCO_NO_COMPAT_NAMES: each header alone, without the names before 0.2" \
    alone "$inc" c "" "${headers[@]}" -- gcc -std=c11 "${cwarn[@]}" -DCCO_NO_COMPAT_NAMES -fsyntax-only
fi
for cxx in g++ clang++; do
  have "$cxx" || { skip "$cxx: not installed here"; continue; }
  for std in c++11 c++17; do
    check "$cxx -std=$std ${cxxwarn[*]}: each header alone" \
      alone "$inc" cpp "" "${headers[@]}" -- "$cxx" -std="$std" "${cxxwarn[@]}" -fsyntax-only
  done
done

find_nvcc
if [ -n "$nvcc" ]; then
  check "nvcc -arch=sm_90 --Werror all-warnings: each header alone (host and device passes)" \
    alone "$inc" cu "" "${headers[@]}" -- "$nvcc" -arch=sm_90 --Werror all-warnings -c -o "$tmp/one.o"
else
  skip "nvcc: not installed here (nor at /usr/local/cuda/bin/nvcc)"
fi

find_nvptx_clang
if [ -n "$nvptx_cc" ]; then
  # What Triton's bitcode path uses: no CUDA headers, no -ffreestanding.
  check "$nvptx_cc --target=nvptx64-nvidia-cuda -march=$nvptx_arch -std=c11 -nostdlibinc -O2 -emit-llvm: each header alone${nvptx_note:+ $nvptx_note}" \
    alone "$inc" c cco/cco_torch.h "${headers[@]}" -- "$nvptx_cc" --target=nvptx64-nvidia-cuda -march="$nvptx_arch" -std=c11 \
    -nostdlibinc -O2 -Wall -Wextra -Werror -pedantic "${nvptx_flags[@]}" -emit-llvm -c -o "$tmp/one.bc"
else
  skip "clang for NVPTX: no clang here knows --target=nvptx64-nvidia-cuda (scripts/install-deps.sh installs clang-19)"
fi

# NVRTC, what cco.cuda (cupy) compiles kernels with, through the package's
# <stddef.h>/<stdint.h> shims; a warning counts as a failure.
cat >"$tmp/nvrtc_check.c" <<'EOF'
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* nvrtc_check OPTION... FILE: compiles FILE's text; prints the log. */
int main(int argc, char** argv) {
  FILE* f = fopen(argv[argc - 1], "r");
  if (!f) return 2;
  static char text[1 << 16];
  text[fread(text, 1, sizeof text - 1, f)] = 0;
  fclose(f);
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, text, "alone.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return 2;
  nvrtcResult r = nvrtcCompileProgram(prog, argc - 2, (const char* const*)argv + 1);
  size_t n = 0;
  nvrtcGetProgramLogSize(prog, &n);
  char* log = malloc(n + 1);
  nvrtcGetProgramLog(prog, log);
  log[n] = 0;
  printf("%s%s", log, r == NVRTC_SUCCESS ? "" : nvrtcGetErrorString(r));
  return r != NVRTC_SUCCESS || strstr(log, "warning") != NULL;
}
EOF
nvrtc_ready() {
  local cuda
  cuda=$(dirname "$(dirname "$nvcc")")
  gcc -std=c11 -O1 -I"$cuda/include" "$tmp/nvrtc_check.c" -o "$tmp/nvrtc_check" -L"$cuda/lib64" -lnvrtc \
    -Wl,-rpath,"$cuda/lib64" >"$tmp/nvrtc_build.out" 2>&1
}
if [ -n "$nvcc" ] && have gcc && nvrtc_ready; then
  check "nvrtc --gpu-architecture=sm_90 with python/cco/nvrtc: each device header alone" \
    alone "$inc" cu "cco/cco.h cco/cco_torch.h cco/cco_moe.h" "${headers[@]}" -- "$tmp/nvrtc_check" --gpu-architecture=sm_90 \
    -I"$src/python/cco/nvrtc"
else
  skip "nvrtc: no CUDA toolkit with nvrtc.h and libnvrtc here"
fi

# ------------------------------------------------- names before 0.2
# Code written against 0.1: its headers, and the old name of everything the
# "names before 0.2" blocks keep.
cat >"$tmp/old.c" <<'EOF'
#include "cco/cco_device.h"
#include "cco/cco_scale_out.h"
#include "cco/device/cco_arch.h"
#include "cco/device/cco_sdma_types.h"

#if defined(__CUDACC__)
#define ENTRY extern "C" __global__ void
#else
#define ENTRY void
ENTRY old_names(ccoDevComm dc, uint32_t* u32, uint64_t* u64, uint64_t* out);
#endif

ENTRY old_names(ccoDevComm dc, uint32_t* u32, uint64_t* u64, uint64_t* out) {
  ccoTeam_t team = dc.teams[ccoTeamLsa];
  ccoDevCommRequirements reqs = CCO_DEV_COMM_REQUIREMENTS_INITIALIZER;
  uint64_t acc = (uint64_t)team.nRanks + reqs.gdaConnectionType;
  acc += CCO_GDA_CONNECTION_NONE + CCO_GDA_CONNECTION_CROSSNODE + CCO_GDA_CONNECTION_FULL + CCO_GDA_CONNECTION_RAIL;
  acc += CCO_GDA_OP_PUT + CCO_GDA_OP_GET + CCO_GDA_OP_PUT_VALUE + CCO_GDA_OP_SIGNAL + CCO_GDA_OP_COUNTER +
         CCO_GDA_OP_FENCE;
  acc += CCO_SDMA_OP_PUT + CCO_SDMA_OP_GET + CCO_SDMA_OP_SIGNAL;
  acc += cco_ld_acquire_u32(u32) + cco_ld_acquire_u64(u64) + cco_ld_relaxed_u32(u32);
  cco_st_release_u32(u32, 1);
  cco_st_release_u64(u64, 2);
  cco_st_relaxed_u32(u32, 3);
  acc += cco_ld_acquire_scoped_u32(u32, 1) + cco_ld_acquire_scoped_u64(u64, 0);
  cco_st_release_scoped_u32(u32, 4, 1);
  cco_st_release_scoped_u64(u64, 5, 0);
  acc += cco_atomic_add_release_scoped_u64(u64, 1, 1) + cco_atomic_add_release_u64(u64, 1) +
         cco_atomic_add_release_u32(u32, 1);
  cco_fence_acq_rel_sys();
  acc += cco_thread_in_block() + cco_block_size() + cco_lane() + cco_warp_size();
  cco_sync_warp();
  cco_sync_block();
  acc += cco_coop_broadcast3(0, 0, 1) + cco_clock_ns();
  cco_spin_pause(1);
  cco_spin_backoff(1);
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate); /* cco_scale_out.h still has GDA */
  acc += (uint64_t)ccoGdaHasPeer(&g, 0);
  *out = acc;
}
EOF
cp "$tmp/old.c" "$tmp/old.cpp"
cp "$tmp/old.c" "$tmp/old.cu"
compat_hidden() { # the same code under CCO_NO_COMPAT_NAMES must not compile
  if gcc -std=c11 -I"$inc" -DCCO_NO_COMPAT_NAMES -fsyntax-only "$tmp/old.c" >"$tmp/hidden.out" 2>&1; then
    echo "0.1 names still visible under CCO_NO_COMPAT_NAMES"
    return 1
  fi
  grep -c 'error' "$tmp/hidden.out" | sed 's/$/ errors, as expected/'
}
if have gcc; then
  check "gcc -std=c11: code written against 0.1 (old headers and names) compiles" \
    gcc -std=c11 "${cwarn[@]}" -I"$inc" -fsyntax-only "$tmp/old.c"
  check "gcc -DCCO_NO_COMPAT_NAMES: the same code fails (the old names are hidden)" compat_hidden
fi
if have clang; then
  check "clang -std=c11: code written against 0.1 compiles" clang -std=c11 "${cwarn[@]}" -I"$inc" -fsyntax-only "$tmp/old.c"
fi
for cxx in g++ clang++; do
  have "$cxx" || continue
  check "$cxx -std=c++17: code written against 0.1 compiles" \
    "$cxx" -std=c++17 "${cxxwarn[@]}" -I"$inc" -fsyntax-only "$tmp/old.cpp"
done
if [ -n "$nvcc" ]; then
  check "nvcc -arch=sm_90: code written against 0.1 compiles in a kernel" \
    "$nvcc" -arch=sm_90 --Werror all-warnings -I"$inc" -c "$tmp/old.cu" -o "$tmp/old.o"
fi

# The old names, as the compat blocks define them (#define OLD NEW, typedef NEW OLD;).
old_names() {
  awk '/^#ifndef CCO_NO_COMPAT_NAMES/ { on = 1; next } on && /^#endif/ { on = 0 } on' \
    "$inc"/cco/*.h "$inc"/cco/device/*.h |
    sed -nE 's/^#define ([A-Za-z_][A-Za-z_0-9]*) .*/\1/p; s/^typedef [A-Za-z_][A-Za-z_0-9]* ([A-Za-z_][A-Za-z_0-9]*);/\1/p' | sort -u
}
no_old_names_in_tree() {
  local names n
  names=$(old_names)
  n=$(echo "$names" | wc -w)
  [ "$n" -ge 30 ] || { echo "only $n old names found in the compat blocks: $names"; return 1; }
  # Anywhere but the two places that name them on purpose: this script and
  # docs/naming.md.
  if (cd "$src" && grep -rnw -E "$(echo "$names" | paste -sd'|')" README.md CONTRIBUTING.md docs examples bench \
    tests tools python src --exclude=naming.md --exclude=test_headers.sh --exclude-dir=__pycache__); then
    echo "in-tree code still uses the names before 0.2 (above)"
    return 1
  fi
  echo "none of the $n old names is used in the tree"
}
check "no code or document in the tree uses a name of the 'names before 0.2' blocks" no_old_names_in_tree

echo "test_headers: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
