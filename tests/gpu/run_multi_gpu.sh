#!/usr/bin/env bash
# GPU tests and benchmarks with one process per GPU (no MPS), for machines
# with several GPUs: the suite of run_gpu_tests.sh with 2, 4 and 8 ranks
# (as many as there are GPUs), then the LSA, all-reduce, SDMA, GDA, NCCL and
# NVSHMEM benchmarks. Logs and JSON lines go
# under OUT_DIR.
# Usage: run_multi_gpu.sh BIN_DIR OUT_DIR
set -u
bin=${1:?usage: run_multi_gpu.sh BIN_DIR OUT_DIR}
out=${2:?usage: run_multi_gpu.sh BIN_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 2 ] || { echo "run_multi_gpu: $gpus GPU(s) here, at least 2 needed"; exit 1; }
nvidia-smi topo -m >"$out/topo.txt" 2>&1
passed=0 failed=0
run() { # name, log, command...
  local name=$1 log=$2; shift 2
  echo "== $name"
  if "$@" >"$out/$log" 2>&1; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; tail -15 "$out/$log"; fi
}
sizes=()
for n in 2 4 8; do [ "$n" -le "$gpus" ] && sizes+=("$n"); done
for n in "${sizes[@]}"; do
  run "windows, $n GPUs" "gpu_windows_$n.txt" "$bin/ccorun" -t 300 -n "$n" -p "$bin/gpu_windows"
  run "LSA device API, $n GPUs" "gpu_lsa_$n.txt" "$bin/ccorun" -t 300 -n "$n" -p "$bin/gpu_lsa"
  run "SDMA device API, $n GPUs" "gpu_sdma_$n.txt" "$bin/ccorun" -t 300 -n "$n" -p "$bin/gpu_sdma"
  run "GDA device API, $n GPUs on two virtual hosts" "gpu_gda_$n.txt" \
    "$bin/ccorun" -t 300 -n "$n" --virtual-hosts 2 -p "$bin/gpu_gda"
  # From here on the programs choose no GPU themselves: each rank's
  # communicator takes GPU CCO_LOCAL_RANK, which the first test checks.
  run "GPU choice (CCO_LOCAL_RANK), $n GPUs" "gpu_device_choice_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" -p "$bin/gpu_device_choice"
  run "example 02: LSA put kernel, $n GPUs" "example_02_$n.txt" "$bin/ccorun" -t 120 -n "$n" "$bin/cco-example-02-lsa-put"
  run "example 03: one-shot LSA all-reduce, $n GPUs" "example_03_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" "$bin/cco-example-03-lsa-allreduce"
  run "example 04: SDMA all-gather, $n GPUs" "example_04_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" "$bin/cco-example-04-sdma-allgather"
  run "example 06: GDA put + signal, $n GPUs on two virtual hosts" "example_06_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" --virtual-hosts 2 -p "$bin/cco-example-06-gda-put"
  run "demo, $n GPUs on two virtual hosts" "demo_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" --virtual-hosts 2 "$bin/cco-demo"
  store=$(mktemp -u /tmp/cco-torch-store.XXXXXX)
  run "torch symmetric-memory tensor as an external window, $n GPUs" "torch_import_$n.txt" \
    "$bin/ccorun" -t 300 -n "$n" -p -x CCO_LIBRARY="$bin/../lib/libcco.so" -x CCO_TORCH_STORE="$store" \
    python3 "$here/torch_import.py"
  rm -f "$store"
  run "python package on the GPU (torch, cupy, allocator pool, examples), $n GPUs" "python_gpu_$n.txt" \
    "$bin/ccorun" -t 300 -n "$n" -p -x CCO_LIBRARY="$bin/../lib/libcco.so" -x PYTHONPATH="$here/../../python" \
    python3 "$here/test_python_gpu.py"
done
for n in "${sizes[@]}"; do
  run "bench LSA, $n GPUs" "bench_lsa_$n.jsonl" "$bin/ccorun" -t 300 -n "$n" "$bin/cco-bench-lsa"
done
for n in "${sizes[@]}"; do
  run "bench one-shot all-reduce in CUDA graphs, $n GPUs" "bench_allreduce_$n.jsonl" \
    "$bin/ccorun" -t 300 -n "$n" "$bin/cco-bench-allreduce"
  run "NCCL references (all-gather bus bandwidth, AllReduce in CUDA graphs), $n GPUs" "nccl_ref_$n.jsonl" \
    "$bin/ccorun" -t 300 -n "$n" python3 "$here/../../bench/nccl_ref.py"
done
run "bench SDMA, 2 GPUs" bench_sdma_2.jsonl "$bin/ccorun" -t 300 -n 2 "$bin/cco-bench-sdma"
run "bench GDA, 2 GPUs" bench_gda_2.jsonl "$bin/ccorun" -t 300 -n 2 "$bin/cco-bench-gda"
if bash "$here/../../bench/build_nvshmem_ref.sh" "$(dirname "$bin")" >"$out/nvshmem_build.log" 2>&1; then
  for n in "${sizes[@]}"; do
    run "NVSHMEM reference, $n GPUs" "nvshmem_ref_$n.log" env NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_NVLS=1 \
      NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME="${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo}" \
      "$bin/ccorun" -t 300 -n "$n" "$bin/nvshmem_ref"
  done
else
  echo "nvshmem_ref: build failed (see nvshmem_build.log)"; failed=$((failed + 1))
fi
echo "run_multi_gpu: $passed passed, $failed failed ($gpus GPUs)"
[ "$failed" -eq 0 ]
