#!/usr/bin/env bash
# GPU tests and benchmarks with one process per GPU (no MPS), for machines
# with several GPUs: the suite of run_gpu_tests.sh with 2, 4 and 8 ranks
# (as many as there are GPUs), then the LSA, all-reduce, SDMA, GDA, NCCL and
# NVSHMEM benchmarks, and the operators': the collectives in CUDA graphs beside
# torch's symmetric-memory kernels (its CUDA backend) and NCCL, MoE dispatch
# and combine, the fused GEMM + communication ops. Logs and JSON lines go
# under OUT_DIR.
#
# CCO_MULTI_GPU_REHEARSAL=1 runs every step with 2, 4 and 8 ranks whatever
# the GPU count, ranks sharing GPUs under MPS: it proves the script and the
# programs at each size before a machine with that many GPUs is at hand. It
# measures nothing about NVLink, and NCCL (which refuses two ranks on one
# GPU) does not run in it.
# Usage: run_multi_gpu.sh BIN_DIR OUT_DIR
set -u
bin=${1:?usage: run_multi_gpu.sh BIN_DIR OUT_DIR}
out=${2:?usage: run_multi_gpu.sh BIN_DIR OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
rehearsal=${CCO_MULTI_GPU_REHEARSAL:-0}
sizes=()
if [ "$rehearsal" = 1 ]; then
  [ "$gpus" -ge 1 ] || { echo "run_multi_gpu: no GPU here"; exit 1; }
  sizes=(2 4 8)
  unit="ranks on $gpus GPU(s) under MPS (rehearsal)"
  # shellcheck source=tests/gpu/mps.sh
  source "$here/mps.sh"
  mps_start
  trap mps_stop EXIT
else
  [ "$gpus" -ge 2 ] || { echo "run_multi_gpu: $gpus GPU(s) here, at least 2 needed"; exit 1; }
  for n in 2 4 8; do [ "$n" -le "$gpus" ] && sizes+=("$n"); done
  unit=GPUs
fi
nvidia-smi topo -m >"$out/topo.txt" 2>&1
# shellcheck source=tests/gpu/suite_programs.sh
source "$here/suite_programs.sh"
passed=0 failed=0
run() { # name, log, command...
  local name=$1 log=$2; shift 2
  echo "== $name"
  if "$@" >"$out/$log" 2>&1; then passed=$((passed + 1)); echo "ok   $name"
  else failed=$((failed + 1)); echo "FAIL $name"; tail -15 "$out/$log"; fi
}
suite_run() { run "$@"; }
for n in "${sizes[@]}"; do
  run "windows, $n $unit" "gpu_windows_$n.txt" "$bin/ccorun" -t 300 -n "$n" -p "$bin/gpu_windows"
  run "LSA device API, $n $unit" "gpu_lsa_$n.txt" "$bin/ccorun" -t 300 -n "$n" -p "$bin/gpu_lsa"
  run "SDMA device API, $n $unit" "gpu_sdma_$n.txt" "$bin/ccorun" -t 300 -n "$n" -p "$bin/gpu_sdma"
  run "GDA device API, $n $unit on two virtual hosts" "gpu_gda_$n.txt" \
    "$bin/ccorun" -t 300 -n "$n" --virtual-hosts 2 -p "$bin/gpu_gda"
  # From here on the programs choose no GPU themselves: each rank's
  # communicator takes GPU CCO_LOCAL_RANK, which the first test checks.
  run "GPU choice (CCO_LOCAL_RANK), $n $unit" "gpu_device_choice_$n.txt" \
    "$bin/ccorun" -t 120 -n "$n" -p "$bin/gpu_device_choice"
  suite_programs "$bin" "$n" "$unit"
done
for n in "${sizes[@]}"; do
  run "bench LSA, $n $unit" "bench_lsa_$n.jsonl" "$bin/ccorun" -t 300 -n "$n" "$bin/cco-bench-lsa"
done
for n in "${sizes[@]}"; do
  run "bench one-shot all-reduce in CUDA graphs, $n $unit" "bench_allreduce_$n.jsonl" \
    "$bin/ccorun" -t 300 -n "$n" "$bin/cco-bench-allreduce"
  if [ "$rehearsal" = 1 ]; then
    echo "-- NCCL references, $n $unit: not run (NCCL refuses several ranks on one GPU)"
  else
    run "NCCL references (all-gather bus bandwidth, AllReduce in CUDA graphs), $n $unit" "nccl_ref_$n.jsonl" \
      "$bin/ccorun" -t 300 -n "$n" python3 "$here/../../bench/nccl_ref.py"
  fi
done
# The collectives beside torch's kernels and NCCL, each in CUDA graphs; the rehearsal has torch's
# NVSHMEM backend only (its CUDA backend and NCCL need a GPU per rank). Then the MoE op
# (DeepSeek-V3 shape) and the fused GEMM ops (Llama-70B tensor-parallel shapes), each beside its
# references (bench/bench_moe.py, bench/bench_fused.py).
refs=$([ "$rehearsal" = 1 ] && echo torch_nvshmem || echo torch_cuda,nccl)
for n in "${sizes[@]}"; do
  run "bench collectives in CUDA graphs beside $refs, $n $unit" "bench_coll_$n.jsonl" \
    python3 "$here/../../bench/bench_coll.py" --bin "$bin" --ranks "$n" --refs "$refs" --timeout 900
  run "bench MoE dispatch and combine, $n $unit" "bench_moe_$n.jsonl" \
    python3 "$here/../../bench/bench_moe.py" --bin "$bin" --ranks "$n"
  run "bench fused GEMM + communication, $n $unit" "bench_fused_$n.jsonl" \
    python3 "$here/../../bench/bench_fused.py" --bin "$bin" --ranks "$n"
done
run "bench SDMA, 2 $unit" bench_sdma_2.jsonl "$bin/ccorun" -t 300 -n 2 "$bin/cco-bench-sdma"
run "bench GDA, 2 $unit" bench_gda_2.jsonl "$bin/ccorun" -t 300 -n 2 "$bin/cco-bench-gda"
run "bench GDA and world barriers, 2 $unit on two virtual hosts" bench_gda_barrier_2.jsonl \
  "$bin/ccorun" -t 300 -n 2 --virtual-hosts 2 "$bin/cco-bench-gda" barrier
if bash "$here/../../bench/build_nvshmem_ref.sh" "$(dirname "$bin")" >"$out/nvshmem_build.log" 2>&1; then
  for n in "${sizes[@]}"; do
    run "NVSHMEM reference, $n $unit" "nvshmem_ref_$n.log" env NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_NVLS=1 \
      NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1 \
      NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME="${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo}" \
      "$bin/ccorun" -t 300 -n "$n" "$bin/nvshmem_ref"
  done
else
  echo "nvshmem_ref: build failed (see nvshmem_build.log)"; failed=$((failed + 1))
fi
echo "run_multi_gpu: $passed passed, $failed failed ($gpus GPUs$([ "$rehearsal" = 1 ] && echo ", rehearsal"))"
[ "$failed" -eq 0 ]
