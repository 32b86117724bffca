#!/usr/bin/env bash
# The benchmarks' command line (bench/bench_args.c): bad input ends with exit
# status 2 and a line saying what was wrong, good input parses as asked (a
# probe program prints what it got), every benchmark program built here takes
# it, and on a machine without the GPU driver the GPU benchmarks say "no GPU
# driver here" with exit status 77. Run by ctest with CCO_BIN=<build>/bin.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
probe=$bin/bench_args_probe
[ -x "$probe" ] || { echo "FAIL: no $probe (build first)"; exit 1; }
passed=0 failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_bad PROGRAM FRAGMENT ARGS...: exit 2, FRAGMENT on stderr, nothing on stdout.
expect_bad() {
  local program=$1 want=$2 out err rc
  shift 2
  err=$("$program" "$@" 2>&1 >/dev/null)
  rc=$?
  out=$("$program" "$@" 2>/dev/null)
  if [ "$rc" -eq 2 ] && grep -qF -- "$want" <<<"$err" && [ -z "$out" ]; then pass
  else fail "$(basename "$program") $*: exit $rc, stderr '$err', stdout '$out' (wanted 2 and '$want')"; fi
}

# expect_good WANT ARGS...: exit 0 and exactly WANT on stdout.
expect_good() {
  local want=$1 out rc
  shift
  out=$("$probe" "$@" 2>&1)
  rc=$?
  if [ "$rc" -eq 0 ] && [ "$out" = "$want" ]; then pass
  else fail "args_probe $*: exit $rc, got '$out', wanted '$want'"; fi
}

# Garbage, zero, crossing ends, bad suffixes, overflow, ranges, unknowns.
expect_bad "$probe" "'abc' is not a size" -b abc
expect_bad "$probe" "'1X' is not a size" -b 1X
expect_bad "$probe" "'1KB' is not a size" -e 1KB
expect_bad "$probe" "'1.5M' is not a size" -e 1.5M
expect_bad "$probe" "'-1' is not a size" -b -1
expect_bad "$probe" "' 4' is not a size" -b " 4"
expect_bad "$probe" "'0x10' is not a size" -b 0x10
expect_bad "$probe" "is not a size" -b 99999999999999999999
expect_bad "$probe" "is not a size" -b 17179869184G
expect_bad "$probe" "at least 4 bytes" -b 0
expect_bad "$probe" "is not a multiple of 4" -b 6
expect_bad "$probe" "more than the 1073741824 this program takes" -e 2G
expect_bad "$probe" "-b 1048576 is more than -e 1024" -b 1M -e 1K
expect_bad "$probe" "-f and -i exclude each other" -f 2 -i 4
expect_bad "$probe" "-f: '1' is not an integer from 2 to 1024" -f 1
expect_bad "$probe" "-n: '0' is not an integer from 1 to" -n 0
expect_bad "$probe" "-n: '10x' is not an integer" -n 10x
expect_bad "$probe" "-n: '' is not an integer" -n ""
expect_bad "$probe" "-w: '-1' is not an integer from 0" -w -1
expect_bad "$probe" "--iters: 'many' is not an integer" --iters=many
expect_bad "$probe" "'-n' needs a value" -n
expect_bad "$probe" "unknown option '--bogus'" --bogus 1
expect_bad "$probe" "unknown option '-x'" -x 1
expect_bad "$probe" "'--help=yes' takes no value" --help=yes
expect_bad "$probe" "unknown measurement 'nope' (choose from put, pingpong, barrier)" --op put,nope
expect_bad "$probe" "unknown measurement ''" --op put,
expect_bad "$probe" "unknown measurement 'fly'" fly
expect_bad "$probe" "--reps: '65' is not an integer from 1 to 64" --reps 65
expect_bad "$probe" "--block-bytes: '3' is not a size from 4" --block-bytes 3
expect_bad "$probe" "--ranks: '1' is not an integer from 2 to 64" --ranks 1
expect_bad "$probe" "--ranks: '2,,4' is not a list" --ranks 2,,4
expect_bad "$probe" "--ranks: 'x' is not an integer" --ranks 2,x

# Good input: defaults kept where nothing was said; K/M/G; both spellings.
expect_good "sizes=1024,4096,16384,65536,262144,1048576 iters=7 warmup=3 ops=put;pingpong;barrier; reps=15 block=2048 ranks="
expect_good "sizes=4096,8192,16384,32768,65536 iters=5 warmup=0 ops=barrier; reps=3 block=1048576 ranks=2;4;8;" \
  -b 4K -e 64K -f 2 -n 5 -w 0 --op barrier --reps 3 --block-bytes 1M --ranks 2,4,8
expect_good "sizes=1000,1004,1008,1012 iters=7 warmup=3 ops=put;pingpong; reps=15 block=2048 ranks=" \
  -b 1000 -e 1012 -i 4 pingpong put
expect_good "sizes=2097152 iters=7 warmup=3 ops=put;pingpong;barrier; reps=15 block=2048 ranks=" --minbytes=2M
expect_good "sizes=512 iters=7 warmup=3 ops=put;pingpong;barrier; reps=15 block=2048 ranks=" -e 512
expect_good "sizes=4096 iters=9 warmup=3 ops=put;pingpong;barrier; reps=15 block=2048 ranks=" -b4K -e4k -n9
expect_good "sizes=1073741824 iters=7 warmup=3 ops=barrier; reps=15 block=2048 ranks=" -b 1G -- barrier
if "$probe" --help | grep -q "^usage: args_probe"; then pass; else fail "args_probe --help: no usage on stdout"; fi

# The benchmark programs: positional numbers are gone, bad input is refused.
expect_bad "$bin/cco-bench-bootstrap" "unexpected argument '16'" 16
expect_bad "$bin/cco-bench-bootstrap" "--ranks: '65' is not an integer from 2 to 64" --ranks 65
expect_bad "$bin/cco-bench-bootstrap" "unknown option '-b'" -b 1M
if "$bin/cco-bench-bootstrap" --help | grep -q -- "--ranks LIST"; then pass; else fail "cco-bench-bootstrap --help"; fi
driver=no
python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null && driver=yes
gpu_programs=0
for name in windows lsa allreduce sdma gda; do
  program=$bin/cco-bench-$name
  [ -x "$program" ] || continue # built only where nvcc exists
  gpu_programs=$((gpu_programs + 1))
  expect_bad "$program" "-n: '0' is not an integer" -n 0
  expect_bad "$program" "is not a size" -e 12Q
  if "$program" --help >/dev/null; then pass; else fail "cco-bench-$name --help"; fi
  [ "$name" = gda ] && expect_bad "$program" "--depth: 100 is not a power of two" --depth 100
  if [ "$driver" = no ]; then
    err=$("$program" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" -eq 77 ] && [ "$err" = "cco-bench-$name: no GPU driver here" ]; then pass
    else fail "cco-bench-$name without a GPU driver: exit $rc, '$err'"; fi
  fi
done
echo "test_args: $passed passed, $failed failed ($gpu_programs GPU benchmark programs here, GPU driver: $driver)"
[ "$failed" -eq 0 ]
