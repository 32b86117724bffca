#!/usr/bin/env bash
# torch backend "CCO" on the GPU machine, under MPS, beside torch's
# "NVSHMEM" backend: builds the extension once, then
#   - tests/gpu/test_torch_backend.py with 2 and 4 ranks, for CCO and for
#     NVSHMEM, and a comparison of the ops' output digests of the two;
#   - the blog's Triton example (examples/python/torch_symm_mem_push.py)
#     under torchrun with 2 and 4 ranks, on CCO and on NVSHMEM;
#   - interpreter exit with live tensors, 4 and 8 ranks;
#   - a wait_signal that times out (rank 0 must report it and fail);
#   - with "bench" or "all": bench/bench_torch.py with 2 and 4 ranks.
# Usage: run_torch_backend.sh BIN_DIR [tests|bench|all]   (default: all)
# Each step prints "ok"/"FAIL" ("ref ok"/"ref FAIL" for NVSHMEM's, which do not
# fail the script); the last line is "run_torch_backend: N passed, N failed (...)".
set -u
bin=$(cd "${1:?usage: run_torch_backend.sh BIN_DIR [tests|bench|all]}" && pwd)
what=${2:-all}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
lib=$bin/../lib/libcco.so
export CCO_LIBRARY=$lib PYTHONPATH=$repo/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
# shellcheck source=tests/gpu/mps.sh
source "$here/mps.sh"
started_mps=0
if [ -z "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then mps_start && started_mps=1; fi
tmp=$(mktemp -d /tmp/cco-torch-backend.XXXXXX)
trap 'rm -rf "$tmp"; [ "$started_mps" = 1 ] && mps_stop' EXIT
passed=0 failed=0 ref_ok=0 ref_failed=0
result() { # name, rc
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); echo "ok   $1"; else failed=$((failed + 1)); echo "FAIL $1"; fi
}
# torch's NVSHMEM backend is the reference: its results are reported, and
# compared with CCO's, but they are torch's, so they do not fail this script.
reference() { # name, rc
  if [ "$2" -eq 0 ]; then ref_ok=$((ref_ok + 1)); echo "ref ok   $1"; else
    ref_failed=$((ref_failed + 1)); echo "ref FAIL $1"; fi
}
nvshmem_env=(NVSHMEM_DISABLE_NCCL=1 NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1
  NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NVSHMEM_DISABLE_NVLS=1)
job() { # nRanks, timeout, args...: the test script under ccorun, a fresh file store
  local n=$1 t=$2; shift 2
  "$bin/ccorun" -t "$t" -n "$n" -p -x CCO_TORCH_STORE="$tmp/store.$RANDOM$RANDOM" \
    python3 "$here/test_torch_backend.py" "$@"
}

echo "== building the extension (python3 -m cco._torch_ext build)"
t0=$(date +%s)
python3 -m cco._torch_ext build
result "extension built or found in the cache ($(($(date +%s) - t0)) s)" $?

if [ "$what" != bench ]; then
  for n in 2 4; do
    echo "== checks, backend CCO, $n ranks"
    job "$n" 600 --backend CCO --digests "$tmp/digests.jsonl"
    result "test_torch_backend: backend CCO, $n ranks under MPS" $?
    echo "== checks, backend NVSHMEM, $n ranks"
    env "${nvshmem_env[@]}" "$bin/ccorun" -t 600 -n "$n" -p -x CCO_TORCH_STORE="$tmp/store.nv$n" \
      python3 "$here/test_torch_backend.py" --backend NVSHMEM --digests "$tmp/digests.jsonl"
    reference "test_torch_backend: backend NVSHMEM, $n ranks under MPS" $?
  done
  python3 - "$tmp/digests.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])] if len(sys.argv) > 1 else []
by = {}
for r in rows:
    for name, digest in r["digests"].items():
        by.setdefault((r["world"], r["rank"], name), {})[r["backend"]] = digest
same = [k for k, v in by.items() if len(v) == 2 and len(set(v.values())) == 1]
differ = [k for k, v in by.items() if len(v) == 2 and len(set(v.values())) == 2]
alone = [k for k, v in by.items() if len(v) == 1]
print(f"digests: {len(same)} outputs identical on CCO and NVSHMEM, {len(differ)} differ, "
      f"{len(alone)} from one backend only")
for k in differ:
    print("  differ:", k, by[k])
sys.exit(1 if differ else 2 if not same else 0)
EOF
  rc=$?
  if [ $rc -eq 2 ]; then
    reference "ops' outputs compared with NVSHMEM: nothing to compare (see NVSHMEM's run above)" 1
  else
    result "ops' outputs identical on CCO and NVSHMEM (sha256 per rank and op)" $rc
  fi

  for n in 2 4; do
    for backend in CCO NVSHMEM; do
      echo "== blog example, $backend, $n ranks (torchrun)"
      env "${nvshmem_env[@]}" SYMM_MEM_BACKEND=$backend timeout 300 \
        python3 -m torch.distributed.run --standalone --nproc-per-node "$n" "$repo/examples/python/torch_symm_mem_push.py"
      rc=$?
      if [ "$backend" = CCO ]; then
        result "blog example (Triton push_kernel through hdl.buffer_ptrs_dev), CCO, $n ranks" $rc
      else
        reference "blog example, NVSHMEM, $n ranks" $rc
      fi
    done
  done

  for n in 4 8; do
    echo "== interpreter exit with live tensors, $n ranks"
    job "$n" 300 --backend CCO --part shutdown >"$tmp/shutdown.$n" 2>&1
    rc=$?
    cat "$tmp/shutdown.$n"
    if [ $rc -eq 0 ] && [ "$(grep -c 'exits with' "$tmp/shutdown.$n")" -eq "$n" ] &&
      ! grep -qiE 'segmentation|core dumped|traceback|abort' "$tmp/shutdown.$n"; then rc=0; else rc=1; fi
    result "exit with live tensors, handles, a window and a device communicator: $n ranks, no crash" $rc
  done

  echo "== wait_signal timing out (rank 0 must report it and fail)"
  t0=$(date +%s)
  job 2 120 --backend CCO --part timeout >"$tmp/timeout" 2>&1
  rc=$?
  cat "$tmp/timeout"
  took=$(($(date +%s) - t0))
  if [ $rc -ne 0 ] && grep -q "timeout: rank 0 got .*(expired)" "$tmp/timeout" && [ "$took" -lt 90 ]; then
    rc=0
  else
    rc=1
  fi
  # The kernel's own line (device printf before the trap) names the wait.
  grep -q "wait_signal: rank 0 timed out after 500 ms waiting for a signal from rank 1" "$tmp/timeout" ||
    echo "note: the kernel's message did not reach the output"
  result "wait_signal with timeout_ms=500 and no sender: the error comes after the timeout ($took s)" $rc
  # The trap was a fatal fault of an MPS client: start the next jobs on a
  # fresh server when this script owns it.
  if [ "$started_mps" = 1 ]; then mps_stop; mps_start; fi
fi

if [ "$what" != tests ]; then
  echo "== bench/bench_torch.py, 2 and 4 ranks"
  python3 "$repo/bench/bench_torch.py" --bin "$bin" --ranks 2,4
  result "bench_torch (JSON lines above, ratios last)" $?
fi
echo "run_torch_backend: $passed passed, $failed failed (reference NVSHMEM: $ref_ok ok, $ref_failed failed)"
[ "$failed" -eq 0 ]
