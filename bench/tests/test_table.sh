#!/usr/bin/env bash
# bench/table.py: a reference joins its figure's row (even one from another
# program, like NVSHMEM's), a lone reference gets a row of its own, and bad
# JSON is refused with exit 1.
set -u
src=${CCO_SRC:?set CCO_SRC to the repository root}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat >"$tmp/run.jsonl" <<'LINES'
{"bench": "lsa", "op": "lsa_put", "bytes": 1024, "ranks": 2, "iters": 5, "metric": "GBps", "value": 10.0, "ref": null, "writers": 1, "min_us": 3}
{"bench": "lsa", "op": "lsa_put", "bytes": 1024, "ranks": 2, "iters": 5, "metric": "GBps", "value": 20.0, "ref": null, "writers": 2}
{"bench": "lsa", "op": "lsa_put", "bytes": 1024, "ranks": 2, "iters": 5, "metric": "GBps", "value": 11.0, "ref": "cudaMemcpy", "writers": 1}
{"bench": "nvshmem", "op": "lsa_put", "bytes": 1024, "ranks": 2, "iters": 5, "metric": "GBps", "value": 19.0, "ref": "nvshmem", "writers": 2}
{"bench": "bootstrap", "op": "tcp_oneway", "bytes": 16, "ranks": 2, "iters": 5, "metric": "us", "value": 9.0, "ref": "tcp_loopback"}
LINES
out=$(python3 "$src/bench/table.py" "$tmp/run.jsonl") || fail "table.py failed"
echo "$out"
echo "$out" | grep -q "| writers=1 | 10 GBps | cudaMemcpy: 11 GBps |" || fail "cudaMemcpy is not beside the one-writer figure"
echo "$out" | grep -q "| writers=2 | 20 GBps | nvshmem: 19 GBps |" || fail "NVSHMEM is not beside the two-writer figure"
echo "$out" | grep -q "| tcp_oneway | 16 B | 2 |  |  | tcp_loopback: 9 us |" || fail "the lone reference has no row"
[ "$(echo "$out" | grep -c '^| ')" -eq 4 ] || fail "expected a header and 3 rows"
echo '{"bench": broken' >"$tmp/bad.jsonl"
python3 "$src/bench/table.py" "$tmp/bad.jsonl" 2>"$tmp/err"; rc=$?
[ "$rc" -eq 1 ] && grep -q "not JSON" "$tmp/err" || fail "bad JSON: rc=$rc, $(cat "$tmp/err")"
echo "ok: bench/table.py"
