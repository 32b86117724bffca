#!/usr/bin/env bash
# GPU tests for the GPU machine (one H200): the platform smoke test, then the
# window tests with 1 and 4 ranks, the LSA tests with 2, 4 and 8 ranks and the
# SDMA tests with 2 and 4 ranks and the GDA tests with 2 and 4 ranks on two
# virtual hosts under MPS, then the examples.
# Usage: run_gpu_tests.sh BIN_DIR
set -u
bin=${1:?usage: run_gpu_tests.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tests/gpu/mps.sh
source "$here/mps.sh"
passed=0 failed=0
run() { # name, command...
  local name=$1; shift
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); echo "ok   $name"; else failed=$((failed + 1)); echo "FAIL $name"; fi
}
run "platform smoke (driver API through dlopen)" "$bin/gpu_platform_smoke"
run "windows, 1 rank (memory back to baseline)" "$bin/ccorun" -t 120 -n 1 "$bin/gpu_windows"
run "GPU choice: a communicator on a thread that chose no GPU, 1 rank" "$bin/ccorun" -t 120 -n 1 "$bin/gpu_device_choice"
mps_start
run "windows, 4 ranks under MPS" "$bin/ccorun" -t 300 -n 4 -p "$bin/gpu_windows"
run "GPU choice, 4 ranks under MPS" "$bin/ccorun" -t 120 -n 4 -p "$bin/gpu_device_choice"
for n in 2 4 8; do
  run "LSA device API (barriers, put, all-reduce, timeout, abort), $n ranks under MPS" \
    "$bin/ccorun" -t 300 -n "$n" "$bin/gpu_lsa"
done
for n in 2 4; do
  run "SDMA device API (invalid, every queue, zero bytes, signal after data, flood, gets, commit, quiet, 256 MiB, \
host API, engine error), $n ranks under MPS" "$bin/ccorun" -t 300 -n "$n" "$bin/gpu_sdma"
done
run "SDMA off (CCO_ENABLE_SDMA=0), 2 ranks under MPS" "$bin/ccorun" -t 120 -n 2 "$bin/gpu_sdma" --no-sdma
for n in 2 4; do
  run "GDA device API through the staged path (scopes, thread and doorbell modes, get, put-value, counters, \
flushAsync, barrier, statuses, 64 MiB), $n ranks on two virtual hosts under MPS" "$bin/ccorun" -t 300 -n "$n" --virtual-hosts 2 -p "$bin/gpu_gda"
done
run "example 06: GDA put + signal, 4 ranks on two virtual hosts" "$bin/ccorun" -t 120 -n 4 --virtual-hosts 2 -p "$bin/cco-example-06-gda-put"
run "demo, 4 ranks on two virtual hosts under MPS" "$bin/ccorun" -t 120 -n 4 --virtual-hosts 2 "$bin/cco-demo"
run "example 02: LSA put kernel, 4 ranks" "$bin/ccorun" -t 120 -n 4 "$bin/cco-example-02-lsa-put"
run "example 03: one-shot LSA all-reduce, fp32 and bf16, 4 ranks" "$bin/ccorun" -t 120 -n 4 "$bin/cco-example-03-lsa-allreduce"
run "example 04: SDMA all-gather, 4 ranks" "$bin/ccorun" -t 120 -n 4 "$bin/cco-example-04-sdma-allgather"
store=$(mktemp -u /tmp/cco-torch-store.XXXXXX)
run "torch symmetric-memory tensor as an external window, 4 ranks" \
  "$bin/ccorun" -t 300 -n 4 -p -x CCO_LIBRARY="$bin/../lib/libcco.so" -x CCO_TORCH_STORE="$store" \
  python3 "$here/torch_import.py"
rm -f "$store"
run "python package on the GPU (torch, cupy, allocator pool, examples), 4 ranks" \
  "$bin/ccorun" -t 300 -n 4 -p -x CCO_LIBRARY="$bin/../lib/libcco.so" -x PYTHONPATH="$here/../../python" \
  python3 "$here/test_python_gpu.py"
mps_stop
echo "run_gpu_tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
