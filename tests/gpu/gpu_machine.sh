#!/usr/bin/env bash
# Builds cco on the GPU machine, runs the CPU and GPU test suites and the
# benchmarks, and writes every log under $OUT (or ./gpu-logs).
# Usage: bash tests/gpu/gpu_machine.sh [tests|bench|all]
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
CUDACXX=$nvcc cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${fabric[@]}" >"$out/build.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
bin=$build/bin
"$bin/cco-info" -e >"$out/cco-info.txt" 2>&1; head -6 "$out/cco-info.txt"
source tests/gpu/mps.sh
if [ "$what" != bench ]; then
  (cd "$build" && ctest --output-on-failure --timeout 300) >"$out/ctest.txt" 2>&1
  echo "ctest rc=$?"; grep -E "tests passed|Failed|\*\*\*" "$out/ctest.txt" | head -20
  bash tests/gpu/run_gpu_tests.sh "$bin" >"$out/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$?"; grep -E "^(ok|FAIL)|passed|cco-demo" "$out/gpu_tests.txt" | head -40
fi
if [ "$what" != tests ]; then
  "$bin/cco-bench-bootstrap" 16 15 5000 | tee "$out/bench_bootstrap.jsonl"
  mps_start
  for n in 2 4 8; do "$bin/ccorun" -t 300 -n "$n" "$bin/cco-bench-windows"; done | tee "$out/bench_windows.jsonl"
  for n in 2 4 8; do "$bin/ccorun" -t 300 -n "$n" "$bin/cco-bench-lsa"; done | tee "$out/bench_lsa.jsonl"
  # SDMA: put bandwidth against cudaMemcpyAsync, put-to-signal latency against the naive host floor.
  "$bin/ccorun" -t 300 -n 2 "$bin/cco-bench-sdma" | tee "$out/bench_sdma.jsonl"
  # GDA: proxy overhead against the raw ring round trip, put bandwidth and latency against the raw engine.
  "$bin/ccorun" -t 300 -n 2 "$bin/cco-bench-gda" | tee "$out/bench_gda.jsonl"
  # GDA and world barriers between two virtual hosts, against the raw engine's half round trip.
  "$bin/ccorun" -t 300 -n 2 --virtual-hosts 2 "$bin/cco-bench-gda" barrier | tee -a "$out/bench_gda.jsonl"
  # The same measurements with NVSHMEM 3.4 (pip package nvidia-nvshmem-cu13).
  if bash bench/build_nvshmem_ref.sh "$build" >"$out/nvshmem_build.log" 2>&1; then
    for n in 2 4 8; do
      NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_NVLS=1 NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1 \
        NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo} \
        "$bin/ccorun" -t 300 -n "$n" "$bin/nvshmem_ref" 2>&1
    done | tee "$out/nvshmem_ref.log" | grep '^{' >"$out/nvshmem_ref.jsonl"
    cat "$out/nvshmem_ref.jsonl"
  else
    echo "nvshmem_ref: build failed (continuing); see $out/nvshmem_build.log:"
    tail -20 "$out/nvshmem_build.log"
  fi
  # torch backend "CCO" against torch's NVSHMEM backend: rendezvous and one_shot_all_reduce.
  python3 bench/bench_torch_symm.py --bin "$bin" --ranks 2 | tee "$out/bench_torch_symm.jsonl"
  mps_stop
fi
# Several GPUs: the suite and the benchmarks again, one process per GPU.
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -ge 2 ]; then
  bash tests/gpu/run_multi_gpu.sh "$bin" "$out/multi" >"$out/multi_gpu.txt" 2>&1
  echo "multi-GPU rc=$?"; grep -E "^(ok|FAIL)|run_multi_gpu" "$out/multi_gpu.txt"
fi
