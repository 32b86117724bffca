#!/usr/bin/env bash
# The device API on CPUs, plus the device header under every compiler it
# targets:
#  - LSA barrier stress (mp_lsa_barrier): 2, 4 and 8 ranks, as processes
#    (ccorun) and as threads of one process; a rank dying mid-stress; an abort
#    waking a blocked device wait;
#  - the examples' host twins (01, 02-host, 03-host) with 2 and 4 ranks;
#  - every device function (cco/cco_device_all.h: the core, SDMA and GDA)
#    and examples/lsa_examples.h in one source, built with only the current
#    names (CCO_NO_COMPAT_NAMES): nvcc sm_90 kernels and their PTX,
#    gcc/g++ (and clang/clang++) host code run on a fake one-rank
#    communicator, clang to NVPTX bitcode (the Triton flags: -nostdlibinc,
#    no -ffreestanding) and, with ptxas, its PTX; each skipped with a note
#    when its compiler is missing here. test_headers.sh compiles each header
#    alone.
# Run by ctest with CCO_BIN=<build>/bin and CCO_SRC=<repo root>. Prints one
# line per check with its time and ends with "N passed, N failed".
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_device_api.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"

# ----------------------------------------------------------- LSA barrier
# 100k rounds for every rank count: on a 2-core machine 8 processes took
# 10-15 us a round (1-1.5 s; 5 s under ASan), 8 threads 8-12 us, so even 8
# ranks need no cut. The whole script took 15 s (24 s under ASan).
rounds=100000
for n in 2 4 8; do
  check "LSA barrier stress, $n processes, $rounds rounds + 4 concurrent indices" \
    "$bin/ccorun" -t 300 -n "$n" "$bin/mp_lsa_barrier" --rounds "$rounds"
  show '^(stress|concurrent):'
  check "LSA barrier stress, $n threads of one process, $rounds rounds + 4 concurrent indices" \
    "$bin/mp_lsa_barrier" --threads "$n" --rounds "$rounds"
  show '^(stress|concurrent):'
done

# Every survivor must report, with ccoDevTimeout or ccoDevAborted.
survivors_report() { # nRanks
  "$bin/ccorun" -t 60 -n "$1" "$bin/mp_lsa_barrier" --die 1 --rounds 20000 >"$tmp/die.out" 2>&1
  local rc=$?
  cat "$tmp/die.out"
  [ $rc -eq 0 ] && [ "$(grep -c '^die: rank .* left its barrier' "$tmp/die.out")" -eq $(($1 - 1)) ]
}
for n in 2 4; do
  check "rank 1 of $n dies mid-stress: survivors leave their barrier within 10 s" survivors_report "$n"
  show '^die:'
done
check "ccoCommAbort wakes a blocked ccoLsaBarrierWait (and a peer's, after its host barrier fails)" \
  "$bin/mp_lsa_barrier" --abort
show '^abort:'

# ------------------------------------------------------------- examples
# Each rank prints one line ending in OK or FAILED.
all_ok() { # nRanks, program args...
  local n=$1; shift
  "$bin/ccorun" -t 120 -n "$n" "$@" >"$tmp/ex.out" 2>&1
  local rc=$?
  cat "$tmp/ex.out"
  [ $rc -eq 0 ] && [ "$(grep -c ': OK$' "$tmp/ex.out")" -eq "$n" ] && ! grep -q FAILED "$tmp/ex.out"
}
for n in 2 4; do
  for ex in cco-example-01-barrier cco-example-02-lsa-put-host cco-example-03-lsa-allreduce-host; do
    check "$ex with $n ranks" all_ok "$n" "$bin/$ex"
  done
done
check "cco-example-03-lsa-allreduce-host with 4 ranks, 7 blocks, 1001 elements" \
  all_ok 4 "$bin/cco-example-03-lsa-allreduce-host" --parts 7 --count 1001 --iters 5

# ------------------------------------------------------ compile checks
# One source calls every device function (and the examples' bodies) from a
# few entry points: kernels under nvcc, plain functions elsewhere. Under
# -DCHECK_MAIN it also runs them on the host against a fake one-rank
# communicator and checks the results.
cat >"$tmp/uses.c" <<'EOF'
#include "cco/cco_device_all.h"
#include "lsa_examples.h"

#if defined(__CUDACC__)
#define ENTRY extern "C" __global__ void
#else
#define ENTRY void
#endif

ENTRY dev_arch(uint32_t* u32, uint64_t* u64, uint64_t* out) {
  uint64_t acc = cco_impl_ld_acquire_u32(u32) + cco_impl_ld_acquire_u64(u64) + cco_impl_ld_relaxed_u32(u32);
  cco_impl_st_release_u32(u32, 1);
  cco_impl_st_release_u64(u64, 2);
  cco_impl_st_relaxed_u32(u32 + 1, 3);
  acc += cco_impl_atomic_add_release_u64(u64 + 1, 4);
  acc += cco_impl_atomic_add_release_u32(u32 + 2, 5);
  cco_impl_fence_acq_rel_sys();
  acc += cco_impl_thread_in_block() + cco_impl_block_size() + cco_impl_lane() + cco_impl_warp_size();
  cco_impl_sync_warp();
  cco_impl_sync_block();
  acc += cco_impl_clock_ns() != 0;
  cco_impl_spin_pause(63);
  /* One thread: the warp's maximum and the block's "any" are its own value. */
  acc += cco_impl_warp_max_u32(7) + (uint64_t)cco_impl_block_any(0) + cco_impl_coop_broadcast3(2, 0, 5);
  *out = acc;
}

/* Scoped orderings: GPU scope when every LSA peer is on this GPU. */
ENTRY dev_scoped(uint32_t* u32, uint64_t* u64, int gpuScope, uint64_t* out) {
  cco_impl_st_release_scoped_u32(u32, 7, gpuScope);
  cco_impl_st_release_scoped_u64(u64, 9, gpuScope);
  uint64_t old = cco_impl_atomic_add_release_scoped_u64(u64, 1, gpuScope);
  *out = old + cco_impl_ld_acquire_scoped_u32(u32, gpuScope) + cco_impl_ld_acquire_scoped_u64(u64, gpuScope);
}

ENTRY dev_teams(ccoDevComm dc, ccoWindow_t win, int64_t* out) {
  out[0] = ccoDevTeam(&dc, ccoTeamLsa).nRanks;
  out[1] = ccoDevTeamRankToWorld(&dc, ccoTeamWorld, 0);
  out[2] = ccoDevTeamRankFromWorld(&dc, ccoTeamLsa, dc.rank);
  out[3] = ccoDevTeamIsMember(&dc, ccoTeamRail, dc.rank);
  out[4] = ccoCoopSize(ccoCoopWarp) + ccoCoopRank(ccoCoopBlock);
  ccoCoopSync(ccoCoopBlock);
  out[5] = (int64_t)(uintptr_t)ccoGetLsaPeerPtr(win, 0, 8);
  out[6] = (int64_t)(uintptr_t)ccoGetLocalPtr(win, 8);
  out[7] = (int64_t)(uintptr_t)ccoGetLsaPeerPtrFlat(&dc, ccoGetLocalPtr(win, 8), 0);
}

ENTRY dev_signals(ccoDevComm dc, uint64_t* sig, uint32_t* out) {
  ccoSignalStore(sig, 1);
  ccoSignalAdd(sig, 2);
  out[0] = (uint32_t)ccoSignalLoad(sig);
  out[1] = ccoSignalWaitUntil(&dc, sig, 3, 0);
  out[2] = ccoSignalWaitUntil(&dc, sig, 4, 1000000); /* 1 ms, never reached */
  out[3] = (uint32_t)ccoDevCommAborted(&dc);
  ccoLsaSignalStore(&dc, sig + 1, 5);
  ccoLsaSignalAdd(&dc, sig + 1, 1);
  out[4] = (uint32_t)ccoLsaSignalLoad(&dc, sig + 1);
  ccoLsaSignalStoreRelaxed(&dc, sig + 2, 7);
  out[5] = (uint32_t)ccoLsaSignalAddRelaxed(&dc, sig + 2, 1);
}

/* The scope is a run-time value here, so every scope's code is compiled. */
ENTRY dev_barrier(ccoDevComm dc, uint32_t index, uint32_t coop, uint32_t* out) {
  ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(&dc, index, (ccoCoop_t)coop);
  ccoLsaBarrierArrive(&s);
  uint32_t a = ccoLsaBarrierWait(&s);
  uint32_t b = ccoLsaBarrierSync(&s);
  uint32_t c = ccoLsaBarrierSyncTimeout(&s, 1000000000ull);
  ccoLsaBarrierArrive(&s);
  uint32_t d = ccoLsaBarrierWaitTimeout(&s, 1000000000ull);
  ccoLsaBarrierSessionEnd(&s);
  if (ccoCoopRank((ccoCoop_t)coop) == 0) {
    out[0] = a | b | c | d;
    out[1] = s.epoch;
  }
}

ENTRY dev_examples(ccoDevComm dc, ccoWindow_t win, uint32_t* out) {
  ccoExampleLsaPut(win, 0, 64, 64, ccoCoopRank(ccoCoopBlock), ccoCoopSize(ccoCoopBlock));
  out[0] = ccoExampleAllReduceBlock(&dc, win, 0, 256, 16, ccoExampleF32, 0, 1);
  out[1] = ccoExampleAllReduceBlock(&dc, win, 0, 512, 16, ccoExampleBf16, 0, 1);
  out[2] = ccoExampleF32ToBf16(ccoExampleBf16ToF32(0x3f80));
  ccoExampleSumRange(win, 0, 256, 0, 16, ccoExampleF32, ccoCoopRank(ccoCoopBlock), ccoCoopSize(ccoCoopBlock));
}

/* Every GDA call; on the fake rank (no GDA state) each returns
 * ccoDevUnsupported at once. */
ENTRY dev_gda(ccoDevComm dc, ccoWindow_t win, uint32_t* out) {
  ccoGda g = ccoGdaHandle(&dc, 0, ccoGdaDoorbellImmediate);
  ccoGdaRequest req;
  out[0] = ccoGdaPut(&g, 0, win, 0, win, 8, 8, ccoGdaSigInc(0), CCO_GDA_NO_COUNTER, ccoCoopBlock, ccoGdaThreadAggregate);
  out[1] = ccoGdaPutValue(&g, 0, win, 0, 7, 8, ccoGdaSigAdd(0, 2), 0, ccoCoopWarp, ccoGdaThreadIndependent);
  out[2] = ccoGdaGet(&g, 0, win, 0, win, 8, 8, 0, ccoCoopThread, ccoGdaThreadAggregate);
  out[3] = ccoGdaSignal(&g, 0, ccoGdaSigInc(1), ccoCoopThread);
  out[4] = ccoGdaCounter(&g, 0, 0, ccoCoopThread);
  out[5] = ccoGdaFlushAsync(&g, 0, &req, ccoCoopThread);
  out[6] = ccoGdaWait(&g, &req, ccoCoopThread);
  out[7] = ccoGdaFlush(&g, ccoCoopBlock);
  out[8] = ccoGdaFlushPeer(&g, 0, ccoCoopWarp);
  out[9] = ccoGdaWaitSignal(&g, 0, 1, 1000, ccoCoopThread);
  out[10] = ccoGdaWaitCounter(&g, 0, 1, 1000, ccoCoopThread);
  ccoGdaBarrierSession b = ccoGdaBarrierSessionInit(&dc, &g, 0, ccoCoopBlock);
  out[11] = ccoGdaBarrierSync(&b);
  out[12] = (uint32_t)(ccoGdaReadSignal(&g, 0) + ccoGdaReadCounter(&g, 0)) + (uint32_t)ccoGdaHasPeer(&g, 0) +
            (ccoGdaSignalPtr(&g, 0) != 0) + (ccoGdaCounterPtr(&g, 0) != 0);
  ccoGdaResetSignal(&g, 0);
  ccoGdaResetCounter(&g, 0);
  out[13] = (uint32_t)ccoGdaTeamPeer(&dc, 0) + (uint32_t)ccoGdaTeamKind(&dc);
  ccoGdaSignalSpec none = ccoGdaSigNone();
  out[14] = none.op;
  cco_impl_spin_backoff(out[14]);
  out[15] = ccoGdaBarrierSyncTimeout(&b, 1000);
  /* World barrier 0 of none (the fake rank reserves no world barrier). */
  ccoBarrierSession w = ccoBarrierSessionInit(&dc, &g, 0, ccoCoopBlock);
  out[16] = (uint32_t)ccoBarrierSync(&w) | ((uint32_t)ccoBarrierSyncTimeout(&w, 1000) << 4);
  ccoBarrierSessionEnd(&w);
}

/* Every SDMA call; on the fake rank (no SDMA state) each returns
 * ccoDevUnsupported (a range outside the window: ccoDevInvalid). */
ENTRY dev_sdma(ccoDevComm dc, ccoWindow_t win, uint32_t* out) {
  out[0] = ccoSdmaPut(&dc, 0, win, 0, win, 8, 8, 0, ccoSdmaSignalRemote, ccoCoopBlock);
  out[1] = ccoSdmaGet(&dc, 0, win, 0, win, 8, 8, 1, ccoCoopWarp);
  out[2] = ccoSdmaCommit(&dc, 0, 0, ccoCoopThread);
  out[3] = ccoSdmaWaitSignal(&dc, 0, 0, 1, 1000, ccoCoopBlock);
  out[4] = ccoSdmaQuietQueue(&dc, 0, 0, ccoCoopWarp);
  out[5] = ccoSdmaQuiet(&dc, 0, ccoCoopThread);
  out[6] = (uint32_t)ccoSdmaReadSignal(&dc, 0, 0) + (ccoSdmaSignalPtr(&dc, 0, 0) != 0);
  out[7] = ccoSdmaPut(&dc, 0, win, win->size, win, 0, 1, 0, ccoSdmaSignalNone, ccoCoopThread);
  out[8] = ccoDevStatusName((ccoDevStatus_t)out[0])[0] == 'c';
}

#ifdef CHECK_MAIN
#include <stdio.h>
#include <string.h>

/* One rank alone: its window and resources are plain arrays. */
static uint64_t g_win[128], g_res[64], g_sig[3];
static uint32_t g_abort, g_u32[4];
static uint64_t g_u64[2];
static int32_t g_member0;
static int g_bad;

#define EXPECT(cond)                                  \
  do {                                                \
    if (!(cond)) {                                    \
      fprintf(stderr, "line %d: %s\n", __LINE__, #cond); \
      g_bad++;                                        \
    }                                                 \
  } while (0)

static ccoDevComm fake_comm(void) {
  ccoDevComm dc;
  memset(&dc, 0, sizeof(dc));
  dc.magic = CCO_DEV_COMM_MAGIC;
  dc.version = CCO_DEV_COMM_VERSION;
  dc.worldSize = dc.lsaSize = dc.nNodes = 1;
  for (int k = 0; k < 4; k++) {
    dc.teams[k].nRanks = 1;
    dc.teams[k].stride = k == 1 ? 0 : 1; /* the LSA team goes through its member table */
    dc.teamMembers[k] = (uint64_t)(uintptr_t)&g_member0;
  }
  dc.flatBase = (uint64_t)(uintptr_t)g_win;
  dc.slotSize = 4ull << 30;
  dc.resourceBase = (uint64_t)(uintptr_t)g_res;
  dc.abortFlag = (uint64_t)(uintptr_t)&g_abort;
  dc.lsaBarrierCount = 4;
  dc.lsaEpochOffset = 4 * sizeof(uint32_t); /* after 4 barriers x 1 rank of inbox */
  return dc;
}

int main(void) {
  ccoDevComm dc = fake_comm();
  ccoWindowDevice wd;
  memset(&wd, 0, sizeof(wd));
  wd.winBase = (uint64_t)(uintptr_t)g_win;
  wd.stride4G = 1;
  wd.lsaSize = 1;
  wd.magic = CCO_WINDOW_MAGIC;
  wd.size = sizeof(g_win);

  uint64_t acc = 0;
  dev_arch(g_u32, g_u64, &acc);
  EXPECT(g_u32[0] == 1 && g_u32[1] == 3 && g_u32[2] == 5 && g_u64[0] == 2 && g_u64[1] == 4 && acc == 3 + 7 + 5);

  for (int gpuScope = 0; gpuScope < 2; gpuScope++) {
    uint32_t u32 = 0;
    uint64_t u64 = 0, sum = 0;
    dev_scoped(&u32, &u64, gpuScope, &sum);
    EXPECT(u32 == 7 && u64 == 10 && sum == 9 + 7 + 10);
  }

  int64_t t[8];
  dev_teams(dc, &wd, t);
  int64_t p8 = (int64_t)(uintptr_t)((char*)g_win + 8);
  EXPECT(t[0] == 1 && t[1] == 0 && t[2] == 0 && t[3] == 1 && t[4] == 1);
  EXPECT(t[5] == p8 && t[6] == p8 && t[7] == p8);

  uint32_t s[6];
  dev_signals(dc, g_sig, s);
  EXPECT(s[0] == 3 && s[1] == ccoDevSuccess && s[2] == ccoDevTimeout && s[3] == 0 && s[4] == 6);
  EXPECT(s[5] == 7 && g_sig[2] == 8); /* relaxed store, then relaxed add (old value back) */

  for (uint32_t coop = 0; coop < 3; coop++) {
    uint32_t b[2];
    dev_barrier(dc, coop, coop, b);
    EXPECT(b[0] == ccoDevSuccess && b[1] == 4);
    dev_barrier(dc, coop, coop, b); /* the epoch carried over */
    EXPECT(b[0] == ccoDevSuccess && b[1] == 8);
  }

  float* in = (float*)g_win;
  for (int i = 0; i < 16; i++) in[i] = (float)i * 0.5f - 3.0f;
  uint32_t e[3];
  dev_examples(dc, &wd, e);
  EXPECT(e[0] == ccoDevSuccess && e[1] == ccoDevSuccess && e[2] == 0x3f80);
  EXPECT(memcmp((char*)g_win + 64, g_win, 64) == 0);             /* put to itself */
  EXPECT(memcmp((char*)g_win + 256, g_win, 16 * sizeof(float)) == 0); /* fp32 sum of one */
  EXPECT(memcmp((char*)g_win + 512, g_win, 16 * sizeof(uint16_t)) == 0); /* bf16 sum of one */

  uint32_t gda[17];
  dev_gda(dc, &wd, gda);
  for (int i = 0; i <= 11; i++) EXPECT(gda[i] == ccoDevUnsupported);
  EXPECT(gda[15] == ccoDevUnsupported && gda[16] == (ccoDevInvalid | ccoDevInvalid << 4));
  EXPECT(gda[12] == 0 && gda[13] == 0 + ccoTeamCrossNode && gda[14] == ccoGdaSignalOpNone);

  uint32_t sdma[9];
  dev_sdma(dc, &wd, sdma);
  for (int i = 0; i <= 5; i++) EXPECT(sdma[i] == ccoDevUnsupported);
  EXPECT(sdma[6] == 0 && sdma[7] == ccoDevInvalid && sdma[8] == 1);

  /* The abort word stops a wait that would never end. */
  g_abort = 1;
  EXPECT(ccoDevCommAborted(&dc));
  EXPECT(ccoSignalWaitUntil(&dc, g_sig, 100, 0) == ccoDevAborted);

  printf("host run of every device function: %s\n", g_bad ? "FAILED" : "OK");
  return g_bad != 0;
}
#endif
EOF

# Only the current names: the aliases of the "names before 0.2" blocks are
# hidden, so this proves the device API needs none of them.
inc=(-I"$src/include" -I"$src/examples" -DCCO_NO_COMPAT_NAMES)
warn=(-Wall -Wextra -Werror -pedantic)
cp "$tmp/uses.c" "$tmp/uses.cpp"
cp "$tmp/uses.c" "$tmp/uses.cu"
host_run() { # compiler, std, source
  "$1" "$2" "${warn[@]}" "${inc[@]}" -DCHECK_MAIN -O2 "$3" -o "$tmp/host_run" && "$tmp/host_run"
}
for pair in gcc:c11 g++:c++17 clang:c11 clang++:c++17; do
  cc=${pair%%:*} std=${pair#*:}
  command -v "$cc" >/dev/null || { skip "$cc -std=$std: not installed here"; continue; }
  file=$tmp/uses.c
  [ "$std" = c11 ] || file=$tmp/uses.cpp
  check "$cc -std=$std ${warn[*]}: every device function compiles and runs on a fake rank" \
    host_run "$cc" "-std=$std" "$file"
done

find_nvcc
if [ -n "$nvcc" ]; then
  check "nvcc -arch=sm_90: every device function in kernels" \
    "$nvcc" -arch=sm_90 --Werror all-warnings "${inc[@]}" -c "$tmp/uses.cu" -o "$tmp/uses.o"
  # The PTX carries the system-scope orderings and each scope's verdict.
  ptx_has_all() {
    "$nvcc" -arch=sm_90 "${inc[@]}" -ptx "$tmp/uses.cu" -o "$tmp/uses.ptx" || return 1
    local want
    for want in ld.acquire.sys st.release.sys atom.release.sys.add ld.acquire.gpu st.release.gpu atom.release.gpu.add \
      fence.acq_rel.sys redux.sync.max.u32 \
      bar.red.or.pred bar.warp.sync globaltimer nanosleep.u32 '.entry dev_barrier' '.entry dev_examples' '.entry dev_gda' \
      '.entry dev_sdma'; do
      grep -qF -- "$want" "$tmp/uses.ptx" || { echo "missing from the PTX: $want"; return 1; }
    done
  }
  check "nvcc -ptx: system- and GPU-scope orderings, warp and block verdicts present" ptx_has_all
else
  skip "nvcc: not installed here (nor at /usr/local/cuda/bin/nvcc)"
fi

# The flags of Triton's bitcode path: no CUDA headers, and no -ffreestanding
# (it marks every function no-builtins, which keeps LLVM from inlining the
# wrappers into Triton kernels).
find_nvptx_clang
if [ -n "$nvptx_cc" ]; then
  nvptx=("$nvptx_cc" --target=nvptx64-nvidia-cuda -march="$nvptx_arch" -std=c11 -nostdlibinc -O2 "${nvptx_flags[@]}")
  bitcode() {
    "${nvptx[@]}" -Wall -Wextra -Werror "${inc[@]}" -emit-llvm -c "$tmp/uses.c" -o "$tmp/uses.bc" || return 1
    [ -s "$tmp/uses.bc" ] || { echo "no bitcode written"; return 1; }
    # The same module as text, to look into (no llvm-dis needed).
    "${nvptx[@]}" "${inc[@]}" -emit-llvm -S "$tmp/uses.c" -o "$tmp/uses.ll" || return 1
    local want
    for want in 'define.*@dev_arch' 'define.*@dev_teams' 'define.*@dev_signals' 'define.*@dev_barrier' \
      'define.*@dev_examples' 'define.*@dev_scoped' 'define.*@dev_gda' 'define.*@dev_sdma' 'nanosleep.u32' \
      'ld.acquire.sys.u32' 'ld.acquire.gpu.u32' 'st.release.sys.u32' 'redux.sync.max.u32' 'bar.red.or.pred'; do
      grep -q -- "$want" "$tmp/uses.ll" || { echo "missing from the bitcode: $want"; return 1; }
    done
    # Nothing may carry the no-builtins attribute -ffreestanding would add.
    if grep -q '"no-builtins"' "$tmp/uses.ll"; then echo "functions marked no-builtins"; return 1; fi
  }
  check "${nvptx[*]} -emit-llvm: bitcode with every entry${nvptx_note:+ $nvptx_note}" bitcode
  # ptxas, when the CUDA toolkit is here, proves the inline PTX assembles.
  ptxas=${nvcc:+$(dirname "$nvcc")/ptxas}
  if [ -n "$ptxas" ] && [ -x "$ptxas" ]; then
    ptx_assembles() {
      "${nvptx[@]}" "${inc[@]}" -S "$tmp/uses.c" -o "$tmp/uses_clang.ptx" &&
        "$ptxas" -arch=sm_90 -c "$tmp/uses_clang.ptx" -o "$tmp/uses_clang.o"
    }
    check "$nvptx_cc NVPTX output assembles with ptxas -arch=sm_90" ptx_assembles
  fi
else
  skip "clang for NVPTX: no clang here knows --target=nvptx64-nvidia-cuda (scripts/install-deps.sh installs clang-19)"
fi

# Functions of the device headers that uses.c does not call yet: a note,
# not a failure, so that adding a device function does not break this test.
# Both plain definitions and ones a macro stamps out (CCO_X_(cco_name, ...)).
# Public headers and the arch layer; the other internals (cco_impl_sdma_*,
# cco_impl_gda_*, ...) are reached through the public functions.
# cco_coll.h is left out: test_coll_device.sh calls its functions.
headers=()
for h in "$src"/include/cco/cco_*.h "$src"/include/cco/device/*.h "$src/include/cco/device/impl/arch_impl.h" \
  "$src/examples/lsa_examples.h"; do
  [ "$(basename "$h")" = cco_coll.h ] || headers+=("$h")
done
device_functions() {
  grep -ho 'CCO_[A-Z_]*INLINE [^(]*(' "${headers[@]}" | sed 's/($//' | awk '{print $NF}' | sed 's/^\*//' | grep '^cco'
  grep -ho '^CCO_[A-Z_]*_(cco[A-Za-z0-9_]*' "${headers[@]}" | sed 's/.*(//'
}
uncovered=""
for f in $(device_functions | sort -u); do
  grep -q "\b$f(" "$tmp/uses.c" || uncovered="$uncovered $f"
done
[ -z "$uncovered" ] || echo "NOTE device functions not called by the compile checks:$uncovered"

echo "test_device_api: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
