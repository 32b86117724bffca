#!/usr/bin/env bash
# The Triton part of the GPU suite (docs/triton.md): every binding with its
# result checked (tests/gpu/test_triton_gpu.py) with 2, 4 and 8 ranks, GDA on
# two virtual hosts with 2 and 4, and the examples of examples/ir under
# ccorun and, where it exists, torchrun. Ranks share the GPU: the caller has
# started MPS and defines `run NAME COMMAND...`. No clang on the GPU machine:
# the bitcode is the prebuilt one, found next to libcco or in the checkout's
# build*/lib (copy build/lib/libcco_device_sm*.bc there from a machine with
# clang-19), or named by CCO_DEVICE_BC.
# Usage: source tests/gpu/triton_suite.sh; triton_suite BIN_DIR
triton_suite() {
  local bin=$1 here repo n t
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  repo=$(cd "$here/../.." && pwd)
  local env=(-x CCO_LIBRARY="$bin/../lib/libcco.so" -x PYTHONPATH="$repo/python")
  for n in 2 4 8; do
    run "Triton bindings (queries, LSA puts and barriers, signals, world barrier, SDMA), $n ranks under MPS" \
      "$bin/ccorun" -t 180 -n "$n" -p "${env[@]}" python3 "$here/test_triton_gpu.py"
  done
  for n in 2 4; do
    run "Triton bindings (GDA: every doorbell mode, scope and thread mode; world barrier), $n ranks on two \
virtual hosts under MPS" "$bin/ccorun" -t 180 -n "$n" --virtual-hosts 2 -p "${env[@]}" python3 "$here/test_triton_gpu.py" gda
  done
  run "Triton example: the guide's lsa_copy, 2 ranks" \
    "$bin/ccorun" -t 300 -n 2 -p "${env[@]}" python3 "$repo/examples/ir/lsa_copy.py"
  run "Triton example: the blog's gda_put_kernel / gda_wait_kernel, 2 ranks on two virtual hosts" \
    "$bin/ccorun" -t 300 -n 2 --virtual-hosts 2 -p "${env[@]}" python3 "$repo/examples/ir/gda_put.py"
  for n in 2 4; do
    for t in lsa sdma; do
      run "Triton example: test_triton_cco.py --transport $t, $n ranks" \
        "$bin/ccorun" -t 300 -n "$n" -p "${env[@]}" python3 "$repo/examples/ir/test_triton_cco.py" --transport "$t"
    done
    run "Triton example: test_triton_cco.py --transport gda, $n ranks on two virtual hosts" \
      "$bin/ccorun" -t 300 -n "$n" --virtual-hosts 2 -p "${env[@]}" python3 "$repo/examples/ir/test_triton_cco.py" \
      --transport gda
  done
  if command -v torchrun >/dev/null; then
    for t in lsa sdma gda; do
      run "Triton example under torchrun: test_triton_cco.py --transport $t, 2 ranks" \
        env CCO_LIBRARY="$bin/../lib/libcco.so" PYTHONPATH="$repo/python" \
        torchrun --standalone --nproc_per_node=2 "$repo/examples/ir/test_triton_cco.py" --transport "$t"
    done
    run "Triton example under torchrun: lsa_copy, 2 ranks" env CCO_LIBRARY="$bin/../lib/libcco.so" \
      PYTHONPATH="$repo/python" torchrun --standalone --nproc_per_node=2 "$repo/examples/ir/lsa_copy.py"
  fi
}
