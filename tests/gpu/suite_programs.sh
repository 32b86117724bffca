#!/usr/bin/env bash
# The GPU suite's programs that choose no GPU themselves (examples 02, 03,
# 04 and 05, the demo, the torch import and the Python package), shared by
# run_gpu_tests.sh (ranks sharing one GPU under MPS) and run_multi_gpu.sh
# (one process per GPU): each rank's communicator takes GPU CCO_LOCAL_RANK.
# The caller defines `suite_run NAME LOG COMMAND...`.
# Usage: source tests/gpu/suite_programs.sh; suite_programs BIN_DIR N LABEL
suite_programs() {
  local bin=$1 n=$2 label=$3 store here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  suite_run "example 02: LSA put kernel, $n $label" "example_02_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" "$bin/cco-example-02-lsa-put"
  suite_run "example 03: one-shot LSA all-reduce, fp32 and bf16, $n $label" "example_03_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" "$bin/cco-example-03-lsa-allreduce"
  suite_run "example 04: SDMA all-gather, $n $label" "example_04_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" "$bin/cco-example-04-sdma-allgather"
  suite_run "example 05: GDA put + signal, $n $label on two virtual hosts" "example_05_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" --virtual-hosts 2 -p "$bin/cco-example-05-gda-put"
  suite_run "demo, $n $label on two virtual hosts" "demo_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" --virtual-hosts 2 "$bin/cco-demo"
  store=$(mktemp -u /tmp/cco-torch-store.XXXXXX)
  suite_run "torch symmetric-memory tensor as an external window, $n $label" "torch_import_$n.txt" \
    "$bin/ccorun" -t 300 -n "$n" -p -x CCO_LIBRARY="$bin/../lib/libcco.so" -x CCO_TORCH_STORE="$store" \
    python3 "$here/torch_import.py"
  rm -f "$store"
  suite_run "python package on the GPU (torch, cupy, allocator pool, examples), $n $label" "python_gpu_$n.txt" \
    "$bin/ccorun" -t 300 -n "$n" -p -x CCO_LIBRARY="$bin/../lib/libcco.so" -x PYTHONPATH="$here/../../python" \
    python3 "$here/test_python_gpu.py"
}
