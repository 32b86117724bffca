#!/usr/bin/env bash
# The collectives' device building blocks (cco/cco_coll.h) under every
# compiler the device API targets, each block called from its own entry
# point (test_headers.sh compiles each header alone; mp_coll_device runs
# the blocks over several ranks):
#  - gcc/g++ (and clang/clang++) -Werror: host code that also runs every
#    block on a fake one-rank communicator and checks the outputs;
#  - nvcc -arch=sm_90: kernels; their PTX has the 16-byte vector accesses,
#    the LL lines' 8-byte-element vectors, the packed half conversions and
#    no local memory, and ptxas assembles it without a stack frame;
#  - clang for NVPTX with the device bitcode's flags (cmake/device_bitcode.cmake):
#    bitcode without "no-builtins", and PTX that ptxas assembles.
# A compiler that is missing is skipped with a note. Run by ctest with
# CCO_SRC=<repo root>; about 30 s on 2 cores, most of it nvcc and ptxas.
# Prints one line per check and ends with "N passed, N failed".
set -u
src=${CCO_SRC:?set CCO_SRC to the repository root}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_coll_device.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"

cat >"$tmp/coll.c" <<'SRC'
#include "cco/cco_coll.h"

#if defined(__CUDACC__)
#define ENTRY(name) extern "C" __global__ void name
#elif defined(__NVPTX__)
#define ENTRY(name) __attribute__((nvptx_kernel)) void name
#else
#define ENTRY(name) void name
#endif

/* One entry per block: the block's status lands in st[part]. */
#define COLL_ENTRY(name, fn)                                                               \
  ENTRY(name)(ccoDevComm dc, ccoCollArgs a, uint32_t part, uint32_t nParts, uint32_t * st); \
  ENTRY(name)(ccoDevComm dc, ccoCollArgs a, uint32_t part, uint32_t nParts, uint32_t * st) { \
    uint32_t s = (uint32_t)fn(&dc, &a, part, nParts);                                      \
    if (ccoCoopRank(ccoCoopBlock) == 0) st[part] = s;                                      \
  }
COLL_ENTRY(k_oneshot, ccoDevAllReduceOneShot)
COLL_ENTRY(k_ll, ccoDevAllReduceLL)
COLL_ENTRY(k_twoshot, ccoDevAllReduceTwoShot)
COLL_ENTRY(k_allgather, ccoDevAllGather)
COLL_ENTRY(k_reducescatter, ccoDevReduceScatter)
COLL_ENTRY(k_alltoall, ccoDevAlltoAll)
COLL_ENTRY(k_alltoallv, ccoDevAlltoAllv)
COLL_ENTRY(k_broadcast, ccoDevBroadcast)
COLL_ENTRY(k_hier, ccoDevAllReduceHier)
COLL_ENTRY(k_hier_allgather, ccoDevAllGatherHier)
COLL_ENTRY(k_hier_broadcast, ccoDevBroadcastHier)
COLL_ENTRY(k_hier_reducescatter, ccoDevReduceScatterHier)
COLL_ENTRY(k_hier_alltoall, ccoDevAlltoAllHier)

ENTRY(k_convert)(const float* f, const uint16_t* h, uint32_t* out);
ENTRY(k_convert)(const float* f, const uint16_t* h, uint32_t* out) {
  out[0] = ccoFloatToBfloat16(f[0]);
  out[1] = ccoFloatToFloat16(f[1]);
  out[2] = cco_impl_f32_to_bits(ccoBfloat16ToFloat(h[0]));
  out[3] = cco_impl_f32_to_bits(ccoFloat16ToFloat(h[1]));
  out[4] = (uint32_t)ccoDevCollScratchBytes(8, 64);
}

#ifdef CHECK_MAIN
#include <stdio.h>
#include <string.h>

/* One rank alone: windows, scratch and resources are plain arrays; every
 * block then copies (a reduction of one input). */
static uint64_t g_data[4096], g_scratch[120000], g_res[64];
static uint32_t g_abort;
static int32_t g_member0;
static int g_bad;

#define EXPECT(cond)                                     \
  do {                                                   \
    if (!(cond)) {                                       \
      fprintf(stderr, "line %d: %s\n", __LINE__, #cond); \
      g_bad++;                                           \
    }                                                    \
  } while (0)

static ccoWindowDevice window_of(void* base, size_t size) {
  ccoWindowDevice w;
  memset(&w, 0, sizeof(w));
  w.winBase = (uint64_t)(uintptr_t)base;
  w.stride4G = 1;
  w.lsaSize = 1;
  w.magic = CCO_WINDOW_MAGIC;
  w.size = size;
  return w;
}

int main(void) {
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  dc.magic = CCO_DEV_COMM_MAGIC;
  dc.version = CCO_DEV_COMM_VERSION;
  dc.worldSize = dc.lsaSize = dc.nNodes = 1;
  for (int k = 0; k < 4; k++) {
    dc.teams[k].nRanks = 1;
    dc.teamMembers[k] = (uint64_t)(uintptr_t)&g_member0;
  }
  dc.flatBase = (uint64_t)(uintptr_t)g_data;
  dc.slotSize = 4ull << 30;
  dc.resourceBase = (uint64_t)(uintptr_t)g_res;
  dc.abortFlag = (uint64_t)(uintptr_t)&g_abort;
  dc.lsaBarrierCount = 4;
  dc.lsaEpochOffset = 4 * sizeof(uint32_t); /* after 4 barriers x 1 rank of inbox */
  ccoWindowDevice data = window_of(g_data, sizeof(g_data)), scratch = window_of(g_scratch, sizeof(g_scratch));
  EXPECT(ccoDevCollScratchBytes(1, 2) <= sizeof(g_scratch));
  EXPECT(ccoDevCollHierScratchBytes(1, 1, 2) <= sizeof(g_scratch));

  typedef void (*entry)(ccoDevComm, ccoCollArgs, uint32_t, uint32_t, uint32_t*);
  static const entry entries[] = {k_oneshot, k_ll, k_twoshot, k_allgather, k_reducescatter, k_alltoall, k_alltoallv,
                                  k_broadcast, k_hier, k_hier_allgather, k_hier_broadcast,
                                  k_hier_reducescatter, k_hier_alltoall}; /* hier: one host, no GDA */
  float* in = (float*)(void*)((char*)g_data + 4);
  int64_t* table = (int64_t*)(void*)((char*)g_data + 16000);
  table[0] = 37, table[1] = 0, table[2] = 0;
  for (int e = 0; e < 13; e++) {
    for (int i = 0; i < 37; i++) in[i] = (float)(i * 3 + e) * 0.25f;
    memset((char*)g_data + 8000, 0, 200);
    ccoCollArgs a;
    memset(&a, 0, sizeof(a));
    a.sendWin = a.recvWin = &data;
    a.sendOff = 4;
    a.recvOff = 8004; /* 37 floats, shifted differently from the input */
    a.count = 37;
    a.dtype = ccoFloat32;
    a.op = ccoSum;
    a.scratchWin = &scratch;
    a.scratchBytes = e >= 8 ? ccoDevCollHierScratchBytes(1, 1, 2) : ccoDevCollScratchBytes(1, 2);
    a.vTableOff = 16000;
    a.signature = e % 2 ? 0x1234 : 0;
    uint32_t st[2] = {99, 99};
    for (uint32_t p = 0; p < 2; p++) entries[e](dc, a, p, 2, st);
    EXPECT(st[0] == ccoDevSuccess && st[1] == ccoDevSuccess);
    EXPECT(memcmp((char*)g_data + 8004, in, 37 * sizeof(float)) == 0);
    if (st[0] || memcmp((char*)g_data + 8004, in, 37 * sizeof(float))) fprintf(stderr, "entry %d\n", e);
  }
  float f[2] = {1.00390625f, 65520.0f};
  uint16_t h[2] = {0x3f80, 0x0001};
  uint32_t out[5];
  k_convert(f, h, out);
  EXPECT(out[0] == 0x3f80 && out[1] == 0x7c00 && out[2] == 0x3f800000u && out[3] == 0x33800000u);
  EXPECT(out[4] == ccoDevCollScratchBytes(8, 1));
  printf("host run of every collective block on one rank: %s\n", g_bad ? "FAILED" : "OK");
  return g_bad != 0;
}
#endif
SRC

inc=(-I"$src/include" -DCCO_NO_COMPAT_NAMES)
warn=(-Wall -Wextra -Werror -pedantic -Wshadow)
cp "$tmp/coll.c" "$tmp/coll.cpp"
cp "$tmp/coll.c" "$tmp/coll.cu"
host_run() { # compiler, std, source
  "$1" "$2" "${warn[@]}" "${inc[@]}" -DCHECK_MAIN -O2 "$3" -o "$tmp/host_run" && "$tmp/host_run"
}
for pair in gcc:c11 g++:c++11 clang:c11 clang++:c++17; do
  cc=${pair%%:*} std=${pair#*:}
  command -v "$cc" >/dev/null || { skip "$cc -std=$std: not installed here"; continue; }
  file=$tmp/coll.c
  [ "$std" = c11 ] || file=$tmp/coll.cpp
  check "$cc -std=$std ${warn[*]}: every block compiles and runs on a fake rank" host_run "$cc" "-std=$std" "$file"
done

# PTX: what the GPU paths are made of, and no local memory (a spill or an
# array the compiler could not keep in registers).
ptx_has() { # file, instructions...
  local f=$1 want
  shift
  for want in "$@"; do
    grep -qF -- "$want" "$f" || { echo "missing from the PTX: $want"; return 1; }
  done
  if grep -q '\.local' "$f"; then echo "local memory in the PTX"; return 1; fi
  echo "$(grep -c '^\.\(visible \)\?\.\(entry\|func\)' "$f") functions"
}
want_ptx=(ld.v4.u32 st.v4.u32 ld.volatile.v2.u64 st.volatile.v2.u64 cvt.rn.bf16x2.f32 cvt.rn.f16x2.f32 cvt.f32.f16
  cvt.rn.bf16.f32 cvt.rn.f16.f32 bar.red.or.pred ld.acquire.sys.u32 fence.acq_rel.sys st.relaxed.sys.u32 '.entry k_oneshot'
  '.entry k_ll' '.entry k_alltoallv' '.entry k_hier')
find_nvcc
ptxas=${nvcc:+$(dirname "$nvcc")/ptxas}
if [ -n "$nvcc" ]; then
  # With a timeout, so that the clock reads of the timeout path are there too.
  nvcc_ptx() {
    "$nvcc" -arch=sm_90 --Werror all-warnings "${inc[@]}" -DCCO_COLL_TIMEOUT_NS=10000000000ull -ptx "$tmp/coll.cu" \
      -o "$tmp/coll.ptx" && ptx_has "$tmp/coll.ptx" "${want_ptx[@]}" globaltimer
  }
  check "nvcc -arch=sm_90 -ptx: every block in a kernel, vector accesses and cvt in the PTX, no local memory" nvcc_ptx
  assembles() { # ptx: ptxas assembles it, no kernel with a stack frame
    "$ptxas" -arch=sm_90 -v -c "$1" -o "$tmp/coll.cubin" >"$tmp/ptxas.txt" 2>&1 || { cat "$tmp/ptxas.txt"; return 1; }
    if grep 'stack frame' "$tmp/ptxas.txt" | grep -qv ' 0 bytes stack frame'; then
      grep -B2 'stack frame' "$tmp/ptxas.txt" | grep -v ' 0 bytes stack' | head
      return 1
    fi
    grep -o 'Used [0-9]* registers' "$tmp/ptxas.txt" | sort -t' ' -k2 -n | tail -1 | sed 's/^/most: /'
  }
  [ -x "$ptxas" ] && check "ptxas -arch=sm_90: nvcc's PTX assembles, no stack frame" assembles "$tmp/coll.ptx"
else
  skip "nvcc: not installed here (nor at /usr/local/cuda/bin/nvcc)"
fi

# The device bitcode's flags (cmake/device_bitcode.cmake), -Werror and
# -pedantic added.
find_nvptx_clang
if [ -n "$nvptx_cc" ]; then
  nvptx=("$nvptx_cc" --target=nvptx64-nvidia-cuda -march="$nvptx_arch" -std=c11 -nostdlibinc -fconvergent-functions -O2
    "${nvptx_flags[@]}" "${warn[@]}" "${inc[@]}")
  bitcode() {
    "${nvptx[@]}" -emit-llvm -c "$tmp/coll.c" -o "$tmp/coll.bc" || return 1
    "${nvptx[@]}" -emit-llvm -S "$tmp/coll.c" -o "$tmp/coll.ll" || return 1
    if grep -q '"no-builtins"' "$tmp/coll.ll"; then echo "functions marked no-builtins"; return 1; fi
    "${nvptx[@]}" -S "$tmp/coll.c" -o "$tmp/coll_clang.ptx" && ptx_has "$tmp/coll_clang.ptx" "${want_ptx[@]}"
  }
  check "${nvptx[*]}: bitcode and PTX of every block${nvptx_note:+ $nvptx_note}" bitcode
  if [ -n "$ptxas" ] && [ -x "$ptxas" ]; then
    check "ptxas -arch=sm_90: clang's PTX assembles" assembles "$tmp/coll_clang.ptx"
  fi
else
  skip "clang for NVPTX: no clang here knows --target=nvptx64-nvidia-cuda (scripts/install-deps.sh installs clang-19)"
fi

echo "test_coll_device: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
