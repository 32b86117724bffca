#!/usr/bin/env bash
# The perf driver (bench/cco_perf.py): it runs the CPU benchmarks (bootstrap, gda_host)
# with a tiny sweep and every line it writes is a JSON object with the common
# keys, the machine and the date; it refuses bad arguments with exit status 2,
# a benchmark's failure or a malformed line with 1, and GPU benchmarks on a
# machine without the driver with 77 ("no GPU driver here"). Run by ctest
# with CCO_BIN=<build>/bin and CCO_SRC=<repo root>.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
perf=$src/bench/cco_perf.py
command -v python3 >/dev/null || { echo "FAIL: no python3"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# check_lines FILE COUNT: COUNT lines, each a bootstrap line with every key.
check_lines() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
path, want = sys.argv[1], int(sys.argv[2])
keys = ("bench", "op", "bytes", "ranks", "iters", "metric", "value", "ref", "machine", "date")
lines = open(path, encoding="utf-8").read().splitlines()
assert len(lines) == want, f"{len(lines)} lines, wanted {want}"
ops = set()
for text in lines:
    obj = json.loads(text)
    assert isinstance(obj, dict), text
    missing = [k for k in keys if k not in obj]
    assert not missing, f"missing {missing}: {text}"
    assert obj["bench"] == "bootstrap" and obj["ranks"] in (2, 4) and obj["value"] > 0, text
    assert obj["metric"] in ("us", "ms") and obj["iters"] >= 1, text
    ops.add((obj["op"], obj["ranks"], obj["ref"]))
for n in (2, 4):
    for op, ref in (("comm_create", None), ("comm_destroy", None), ("host_barrier", None),
                    ("host_barrier", "tcp_oneway_x_rounds"), ("host_allgather", None),
                    ("host_allgather", "tcp_oneway_x_steps")):
        assert (op, n, ref) in ops, f"no {op} ({ref}) for {n} ranks"
assert ("tcp_oneway", 2, "tcp_loopback") in ops, "no TCP reference"
EOF
}

# A tiny sweep of the real benchmark: 1 reference line + 6 per rank count.
out=$tmp/bootstrap.jsonl
if python3 "$perf" bootstrap --bin "$bin" --ranks 2,4 -n 100 -w 10 -o "$out" --log-dir "$tmp/logs" \
  -- --reps 2 2>"$tmp/err"; then pass; else fail "cco_perf bootstrap: exit $?: $(cat "$tmp/err")"; fi
if check_lines "$out" 13; then pass; else fail "bootstrap lines: $(cat "$out")"; fi
[ -s "$tmp/logs/bootstrap.log" ] && pass || fail "no log of the run in $tmp/logs"
python3 "$perf" bootstrap --bin "$bin" --ranks 2,4 -n 100 -w 10 -o "$out" --append -- --reps 2 2>/dev/null
if check_lines "$out" 26; then pass; else fail "--append did not add 13 lines"; fi

# GDA between CPU ranks: two virtual hosts and the staged path by default, 2 sizes, a figure and
# its raw-engine reference each, the path and the notify flag in every line.
out=$tmp/gda_host.jsonl
if python3 "$perf" gda_host --bin "$bin" --op latency -b 8 -e 512 -f 64 -n 50 -w 5 -o "$out" 2>"$tmp/err"; then pass
else fail "cco_perf gda_host: exit $?: $(cat "$tmp/err")"; fi
if python3 - "$out" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 4, lines
for l in lines:
    assert l["bench"] == "gda_host" and l["op"] == "gda_host_latency" and l["ranks"] == 2, l
    assert l["path"] == "staged" and l["notify"] in (0, 1) and l["value"] > 0 and l["metric"] == "us", l
assert sorted((l["bytes"], l["ref"] or "") for l in lines) == [(8, ""), (8, "raw_engine"), (512, ""),
                                                                 (512, "raw_engine")], lines
EOF
then pass; else fail "gda_host lines: $(cat "$out")"; fi

# expect_status STATUS FRAGMENT ARGS...: the driver's exit status and a line of its stderr.
expect_status() {
  local want=$1 fragment=$2 rc
  shift 2
  python3 "$perf" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qF -- "$fragment" "$tmp/err"; then pass
  else fail "cco_perf $*: exit $rc (wanted $want), stderr: $(tail -3 "$tmp/err")"; fi
}
expect_status 2 "invalid choice: 'nosuch'" nosuch
expect_status 2 "bootstrap takes no sizes" bootstrap -b 1M
expect_status 2 "'0' is not an integer from 1 to 1000000000" bootstrap -n 0
expect_status 2 "'0' is not an integer from 1 to 1024" lsa --ranks 2,0
expect_status 2 "lsa runs with 2 to 1024 ranks, not 1" lsa --ranks 1
expect_status 2 "'1Q' is not a size" lsa -b 1Q
expect_status 2 "is more than -e" lsa -b 4M -e 1M
expect_status 2 "lsa takes multiples of 16 bytes" lsa -b 24
expect_status 2 "lsa has no measurement 'fly'" lsa --op put,fly
expect_status 2 "add --virtual-hosts 2" gda --op barrier
expect_status 2 "--ranks goes with one benchmark" all --ranks 2
expect_status 2 "python takes no -w" python -w 1
expect_status 1 "bootstrap: failed: exit status 2" bootstrap --bin "$bin" -- --reps 0

# A program that prints a malformed line fails the run; other text is kept apart.
mkdir -p "$tmp/fake"
cat >"$tmp/fake/cco-bench-bootstrap" <<'EOF'
#!/bin/sh
echo "some progress text"
echo '{"bench":"bootstrap","op":"x","bytes":null,"ranks":2,"iters":1,"metric":"us","value":1,"ref":null}'
echo '{"bench":"bootstrap","op":"x","ranks":2}'
EOF
chmod +x "$tmp/fake/cco-bench-bootstrap"
expect_status 1 "bad line from bootstrap: missing bytes, iters, metric, value, ref" bootstrap --bin "$tmp/fake" -o "$tmp/fake.jsonl"
if [ "$(wc -l <"$tmp/fake.jsonl")" -eq 1 ] && grep -q "some progress text" "$tmp/err"; then pass
else fail "the good line kept and the text on stderr: $(cat "$tmp/fake.jsonl")"; fi

# The GPU set as tests/gpu/gpu_machine.sh runs it.
if python3 "$perf" gpu --bin "$bin" --dry-run >"$tmp/plan" && grep -q -- "-n 8 $bin/cco-bench-lsa" "$tmp/plan" &&
  grep -q -- "--virtual-hosts 2 $bin/cco-bench-gda --op barrier" "$tmp/plan" && grep -q "nvshmem_ref" "$tmp/plan"; then
  pass
else fail "gpu --dry-run: $(cat "$tmp/plan")"; fi
if ! python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  expect_status 77 "lsa (2 ranks): skipped: no GPU driver here" lsa --bin "$bin" --ranks 2
fi
echo "test_perf_driver: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
