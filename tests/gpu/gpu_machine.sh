#!/usr/bin/env bash
# Builds cco on the GPU machine, runs the CPU and GPU test suites and the
# benchmarks, and writes every log under $OUT (or ./gpu-logs).
# Usage: bash tests/gpu/gpu_machine.sh [tests|gpu|bench|all|LIST]
#   tests: the CPU suite (ctest) and the GPU suite; gpu: the GPU suite alone;
#   bench: the benchmarks; all (default): all three.
#   LIST: focused runs of a few minutes each, comma-separated, in this order:
#   check (LSA, collectives and MoE tests at 2 and 8 ranks), lsa (ping-pong,
#   barrier, message rate at 2 and 8 ranks, beside NVSHMEM's), moe (the MoE
#   benchmark beside torch's exchange at 2 ranks), sdma, gda (2 ranks),
#   moe-tests (the MoE GPU test at CCO_MOE_TEST_RANKS ranks, default "4 8", then
#   at 4 on two virtual hosts), fused-tests (the fused-op GPU test at
#   CCO_FUSED_TEST_RANKS ranks, default "4 8", extra arguments from
#   CCO_FUSED_TEST_ARGS, e.g. "--only gemm_rs:sequential"), fused-bench (bench_fused at 8
#   ranks beside torch's fused ops on its NVSHMEM backend and on cco's, tokens
#   from CCO_BENCH_FUSED_TOKENS, default 1024,8192, jobs from
#   CCO_BENCH_FUSED_JOBS, default torch,torch_cco,cco), fused-examples
#   (examples 05 and 06 at 4 ranks), fused (all three).
# CCO_KERNEL_ARCHS (default: every SM the build knows) narrows the embedded
# kernels, e.g. 90 for a quicker build on Hopper. CCO_PACK_LOGS=1 leaves
# only machine.txt, the JSON lines and one archive of every log in the log
# folder, for runners that return a few files.
# The paths below are the repository's: the script runs from its root,
# wherever it is called from ($OUT or ./gpu-logs stays relative to the caller).
set -u
what=${1:-all}
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
build=/tmp/cco-build
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader 2>&1
  echo "cpus: $(nproc)"; uname -r
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# A machine with libfabric but without its headers: a copied include tree
# (rdma/fabric.h ...) in .fabric-headers builds the network engine.
fabric=()
[ -f .fabric-headers/rdma/fabric.h ] && fabric=(-DCCO_LIBFABRIC_INCLUDE="$PWD/.fabric-headers")
archs=()
[ -n "${CCO_KERNEL_ARCHS:-}" ] && archs=(-DCCO_KERNEL_ARCHS="$CCO_KERNEL_ARCHS")
CUDACXX=$nvcc cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${fabric[@]}" "${archs[@]}" >"$out/build.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
bin=$build/bin
echo "[$SECONDS s] built"
"$bin/cco-info" -e >"$out/cco-info.txt" 2>&1; head -6 "$out/cco-info.txt"
source tests/gpu/mps.sh
if [ "$what" = tests ] || [ "$what" = all ]; then
  (cd "$build" && ctest --output-on-failure --timeout 300) >"$out/ctest.txt" 2>&1
  echo "ctest rc=$?"; grep -E "tests passed|Failed|\*\*\*" "$out/ctest.txt" | head -20
fi
if [ "$what" = tests ] || [ "$what" = gpu ] || [ "$what" = all ]; then
  bash tests/gpu/run_gpu_tests.sh "$bin" >"$out/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$?"; grep -E "^(ok|FAIL)|passed|cco-demo" "$out/gpu_tests.txt" | head -40
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # One way to run benchmarks: bench/cco_perf.py (docs/perf.md). Every JSON line
  # goes to bench.jsonl (one date for the whole run), each program's own output
  # under bench-logs/, the plots of bench/plot.py under plots/.
  date=$(date -u +%Y-%m-%dT%H:%MZ)
  rm -f "$out/bench.jsonl"
  perf() { python3 bench/cco_perf.py "$@" --bin "$bin" --date "$date" --append -o "$out/bench.jsonl" \
    --log-dir "$out/bench-logs"; echo "cco_perf $1 rc=$?"; }
  perf bootstrap
  # The NVSHMEM 3.4 reference (pip package nvidia-nvshmem-cu13); "gpu" runs it when built.
  bash bench/build_nvshmem_ref.sh "$build" >"$out/nvshmem_build.log" 2>&1 ||
    { echo "nvshmem_ref: build failed (continuing); see $out/nvshmem_build.log:"; tail -20 "$out/nvshmem_build.log"; }
  mps_start
  # windows and LSA with 2, 4, 8 ranks; SDMA and GDA with 2 (GDA's barriers on two
  # virtual hosts); NVSHMEM's LSA figures with 2, 4, 8: each beside its references.
  # Triton kernels against the same CUDA C kernels (bench_triton.py) at 2, 4, 8 ranks; the
  # collectives in CUDA graphs against torch's kernels on NVSHMEM (coll) at 2, 4, 8 ranks; torch
  # backend "CCO" against torch's NVSHMEM backend (torch): rendezvous and one_shot_all_reduce.
  perf gpu
  python3 bench/bench_moe.py --bin "$bin" --ranks 2,4 --tokens 4096,128 --jobs cco,torch >>"$out/bench.jsonl" \
    2>"$out/bench_moe.log"
  echo "bench_moe rc=$?"
  mps_stop
  # shellcheck source=tests/scripts/pyvenv.sh
  source tests/scripts/pyvenv.sh
  cco_pyvenv "$build/pyvenv" matplotlib:matplotlib
  "$CCO_PYTHON" bench/plot.py "$out/bench.jsonl" -o "$out/plots" || echo "plots: not drawn (see above)"
fi
# The focused runs, in the order given (lsa,moe,...): each prints its JSON lines.
want() { case ",$what," in *",$1,"*) return 0 ;; esac; return 1; }
focused=0
for m in check moe-tests lsa moe sdma gda fused fused-tests fused-examples fused-bench; do want "$m" && focused=1; done
if [ "$focused" = 1 ]; then
  date=$(date -u +%Y-%m-%dT%H:%MZ)
  rm -f "$out/bench.jsonl"
  mps_start
  stamp() { echo "[$SECONDS s] $*"; }
  pyx=(-x CCO_LIBRARY="$build/lib/libcco.so" -x PYTHONPATH="$PWD/python")
  if want check; then
    # The GPU code a performance change touches, before its figures count:
    # LSA waits and barriers, the collectives' syncs, the MoE kernels.
    for n in 2 8; do
      "$bin/ccorun" -t 300 -n "$n" "$bin/gpu_lsa" >"$out/check-lsa-$n.txt" 2>&1; stamp "gpu_lsa $n ranks rc=$?"
      "$bin/ccorun" -t 300 -n "$n" "$bin/test_coll_gpu" --quick >"$out/check-coll-$n.txt" 2>&1
      stamp "test_coll_gpu --quick $n ranks rc=$?"
    done
    "$bin/ccorun" -t 300 -n 2 -p "${pyx[@]}" python3 tests/gpu/test_moe_gpu.py >"$out/check-moe-2.txt" 2>&1
    stamp "test_moe_gpu.py 2 ranks rc=$?"; grep -hE "passed|FAIL" "$out"/check-*.txt | sort | uniq -c | head -20
  fi
  if want moe-tests; then
    for n in ${CCO_MOE_TEST_RANKS-4 8}; do
      "$bin/ccorun" -t 300 -n "$n" -p "${pyx[@]}" python3 tests/gpu/test_moe_gpu.py >"$out/moe-tests-$n.txt" 2>&1
      stamp "test_moe_gpu.py $n ranks rc=$?"; grep -h "^\[0\] test_moe_gpu" "$out/moe-tests-$n.txt"
    done
    # Across hosts: GDA between two virtual hosts, LSA inside each.
    "$bin/ccorun" -t 300 -n 4 --virtual-hosts 2 -p "${pyx[@]}" python3 tests/gpu/test_moe_gpu.py \
      >"$out/moe-tests-4x2hosts.txt" 2>&1
    stamp "test_moe_gpu.py 4 ranks on 2 virtual hosts rc=$?"; grep -h "^\[0\] test_moe_gpu" "$out/moe-tests-4x2hosts.txt"
  fi
  perf() { python3 bench/cco_perf.py "$@" --bin "$bin" --date "$date" --append -o "$out/bench.jsonl" \
    --log-dir "$out/bench-logs"; stamp "cco_perf $1 rc=$?"; }
  if want lsa; then
    bash bench/build_nvshmem_ref.sh "$build" >"$out/nvshmem_build.log" 2>&1 || tail -5 "$out/nvshmem_build.log"
    perf lsa --ranks 2,8 --op pingpong,barrier,rate
    perf nvshmem --ranks 2,8 --op pingpong,barrier,rate
  fi
  if want moe; then
    python3 bench/bench_moe.py --bin "$bin" --ranks 2 --tokens 4096,128 --jobs cco,torch >>"$out/bench.jsonl" \
      2>"$out/bench_moe.log"
    stamp "bench_moe rc=$?"
  fi
  want sdma && perf sdma --ranks 2
  want gda && perf gda --ranks 2 --op overhead,bw,latency,rate
  if want fused || want fused-tests; then
    # The Triton kernels need the device bitcode (build*/lib, built where clang is).
    for n in ${CCO_FUSED_TEST_RANKS-4 8}; do
      "$bin/ccorun" -t "${CCO_FUSED_TEST_TIMEOUT:-400}" -n "$n" -p "${pyx[@]}" python3 tests/gpu/test_fused_gpu.py --quick \
        ${CCO_FUSED_TEST_ARGS:-} >"$out/fused-tests-$n.txt" 2>&1
      stamp "test_fused_gpu.py --quick $n ranks rc=$?"; grep -h "^test_fused_gpu: [0-9]" "$out/fused-tests-$n.txt"
    done
  fi
  if want fused || want fused-examples; then
    for ex in 05_tp_mlp 06_gemm_a2a; do
      "$bin/ccorun" -t 300 -n 4 -p "${pyx[@]}" python3 "examples/python/$ex.py" >"$out/example-$ex.txt" 2>&1
      stamp "example $ex, 4 ranks rc=$?"; tail -3 "$out/example-$ex.txt"
    done
  fi
  if want fused || want fused-bench; then
    jobs=${CCO_BENCH_FUSED_JOBS:-torch,torch_cco,cco}
    case ",$jobs," in  # torch's ops on backend "CCO": its extension built once, before the ranks start
      *,torch_cco,*) CCO_LIBRARY="$build/lib/libcco.so" PYTHONPATH="$PWD/python" python3 -m cco._torch_ext build \
        >"$out/torch_ext_build.log" 2>&1; stamp "torch extension build rc=$?" ;;
    esac
    python3 bench/bench_fused.py --bin "$bin" --ranks 8 --tokens "${CCO_BENCH_FUSED_TOKENS:-1024,8192}" \
      --jobs "$jobs" >>"$out/bench.jsonl" 2>"$out/bench_fused.log"
    stamp "bench_fused rc=$?"
  fi
  mps_stop
  cat "$out/bench.jsonl"
fi
# Several GPUs: the suite and the benchmarks again, one process per GPU.
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
  bash tests/gpu/run_multi_gpu.sh "$bin" "$out/multi" >"$out/multi_gpu.txt" 2>&1
  echo "multi-GPU rc=$?"; grep -E "^(ok|FAIL)|run_multi_gpu" "$out/multi_gpu.txt"
fi
if [ "${CCO_PACK_LOGS:-0}" = 1 ]; then
  (cd "$out" && tar czf logs.tar.gz --exclude=logs.tar.gz --exclude=bench.jsonl --exclude=machine.txt . &&
    find . -mindepth 1 -maxdepth 1 ! -name logs.tar.gz ! -name bench.jsonl ! -name machine.txt -exec rm -rf {} +)
  echo "logs packed: $out/logs.tar.gz"
fi
