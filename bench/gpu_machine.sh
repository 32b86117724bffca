#!/usr/bin/env bash
# Builds cco on the GPU machine, runs the test suite and the benchmarks, and
# writes every log under $OUT (or ./gpu-logs). Usage: bash bench/gpu_machine.sh
set -u
out=${OUT:-$PWD/gpu-logs}
mkdir -p "$out"
build=/tmp/cco-build
{
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader 2>&1
  echo "cpus: $(nproc)"; uname -r
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDACXX=$nvcc cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$out/build.log" 2>&1 &&
  cmake --build "$build" -j "$(nproc)" >>"$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
bin=$build/bin
"$bin/cco-info" -e >"$out/cco-info.txt" 2>&1; head -6 "$out/cco-info.txt"
CCO_DEBUG=INFO CCO_DEBUG_SUBSYS=AFFINITY,INIT "$bin/ccorun" -n 4 -t 60 "$bin/cco-demo" >"$out/demo.txt" 2>&1
echo "demo rc=$?"; grep -v "cco INFO INIT" "$out/demo.txt" | head -30
(cd "$build" && ctest --output-on-failure --timeout 300) >"$out/ctest.txt" 2>&1
echo "ctest rc=$?"; tail -15 "$out/ctest.txt"
"$bin/cco-bench-bootstrap" 16 15 5000 | tee "$out/bench_bootstrap.jsonl"
