#!/usr/bin/env bash
# SDMA on CPUs (host platform: the engine thread copies with memmove, CPU
# threads stand in for kernels):
#  - mp_sdma with 2, 4 and 8 ranks, as processes (ccorun) and as threads of
#    one process: invalid peer/queue, every queue, zero-byte puts, signal
#    after data, a flood far past the ring depth from several threads, gets,
#    commit aggregation, quiet, the completion count without a quiet, a
#    64 MiB put, the host API; once with CCO_SDMA_LAZY_COMPLETION=0;
#  - an engine error (a put outside the flat VA) failing the communicator;
#  - CCO_ENABLE_SDMA=0 (and its alias MORI_ENABLE_SDMA=0);
#  - example 04's host twin (SDMA all-gather) with 2 and 4 ranks.
# Run by ctest with CCO_BIN=<build>/bin and CCO_SRC=<repo root>. Prints one
# line per check with its time and ends with "N passed, N failed".
#
# On a 2-core machine the whole script took 12 s: mp_sdma 0.4 s with 2 ranks,
# 1.1 s with 4, 3.4 s with 8 (processes or threads alike), the thread-ranks
# engine-error run 2 s (the target rank's wait times out by design), the rest
# a few hundredths each.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
passed=0 failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_sdma.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/scripts/check_lib.sh
source "$(dirname "$0")/check_lib.sh"

# A thread-ranks run has no ccorun around it: `timeout` bounds it instead.
threads() { timeout 120 "$bin/mp_sdma" --threads "$@"; }

# ------------------------------------------------------------ mp_sdma
iters=10000 # signal-after-data iterations per (peer, queue)
# Under the sanitizers (CCO_TEST_LIGHT=1, make test-asan) a quarter: they
# look for memory errors; the main build runs the whole ordering stress.
[ "${CCO_TEST_LIGHT:-0}" = 1 ] && iters=2500
for n in 2 4 8; do
  check "mp_sdma, $n processes, $iters iterations" "$bin/ccorun" -t 120 -n "$n" "$bin/mp_sdma" --iters "$iters"
  show '^(signal after data|flood|all SDMA):'
  check "mp_sdma, $n threads of one process, $iters iterations" threads "$n" --iters "$iters"
  show '^(signal after data|flood|all SDMA):'
done

# The completion count after every pass, as before lazy completion.
check "mp_sdma, 2 processes, CCO_SDMA_LAZY_COMPLETION=0" "$bin/ccorun" -t 120 -n 2 -x CCO_SDMA_LAZY_COMPLETION=0 \
  "$bin/mp_sdma" --iters "$iters"
show '^(signal after data|flood|all SDMA):'

# A descriptor outside the flat VA fails the communicator: waiters on its
# signal return ccoDevAborted, the async error is set, later calls fail.
check "engine error, 2 processes" "$bin/ccorun" -t 60 -n 2 "$bin/mp_sdma" --engine-error
show '^engine error:'
check "engine error, 4 threads of one process" threads 4 --engine-error
show '^engine error:'

# SDMA off: dc.sdma == 0, ccoDevUnsupported, ccoUnsupported.
check "CCO_ENABLE_SDMA=0, 2 processes" "$bin/ccorun" -t 60 -n 2 -x CCO_ENABLE_SDMA=0 "$bin/mp_sdma" --no-sdma
show '^no sdma:'
check "MORI_ENABLE_SDMA=0 (the alias), 3 threads" env MORI_ENABLE_SDMA=0 timeout 60 "$bin/mp_sdma" --threads 3 --no-sdma
show '^no sdma:'

# ------------------------------------------------------------ example 04
# Each rank prints one line ending in OK or FAILED.
all_ok() { # nRanks, program args...
  local n=$1; shift
  "$bin/ccorun" -t 120 -n "$n" "$@" >"$tmp/ex.out" 2>&1
  local rc=$?
  cat "$tmp/ex.out"
  [ $rc -eq 0 ] && [ "$(grep -c ': OK$' "$tmp/ex.out")" -eq "$n" ] && ! grep -q FAILED "$tmp/ex.out"
}
for n in 2 4; do
  check "cco-example-04-sdma-allgather-host with $n ranks" all_ok "$n" "$bin/cco-example-04-sdma-allgather-host"
done

echo "test_sdma: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
