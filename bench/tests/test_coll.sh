#!/usr/bin/env bash
# The collectives' benchmark (bench/bench_coll.py, bench/coll_jobs.py) and the torch backend's
# (bench/bench_torch.py) without a GPU: their arguments (bad ones end with exit status 2), the jobs
# they plan (--dry-run), the ratio lines they compute from synthetic results with the goals, the
# sizes each collective is timed at, how bench/cco_perf.py starts them (alone and in the gpu set),
# and exit status 77 with "no GPU driver here" where the driver is missing. Run by ctest with
# CCO_BIN=<build>/bin and CCO_SRC=<repo root>; needs only python3.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
src=${CCO_SRC:?set CCO_SRC to the repository root}
command -v python3 >/dev/null || { echo "FAIL: no python3"; exit 1; }
coll=$src/bench/bench_coll.py
torchb=$src/bench/bench_torch.py
perf=$src/bench/cco_perf.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
pass() { passed=$((passed + 1)); }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }

# expect_status STATUS FRAGMENT PROGRAM ARGS...: the exit status and a line of stderr.
expect_status() {
  local want=$1 fragment=$2 rc
  shift 2
  python3 "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qF -- "$fragment" "$tmp/err"; then pass
  else fail "$*: exit $rc (wanted $want and '$fragment'), stderr: $(tail -3 "$tmp/err")"; fi
}
# plan_has FRAGMENT ARGS...: a line of bench_coll.py --dry-run ARGS contains FRAGMENT.
plan_has() {
  local fragment=$1
  shift
  if python3 "$coll" --bin "$bin" --dry-run "$@" >"$tmp/plan" 2>"$tmp/err" && grep -qF -- "$fragment" "$tmp/plan"
  then pass; else fail "bench_coll.py --dry-run $*: no '$fragment' in: $(cat "$tmp/plan" "$tmp/err")"; fi
}
plan_lacks() {
  local fragment=$1
  shift
  if python3 "$coll" --bin "$bin" --dry-run "$@" >"$tmp/plan" 2>&1 && ! grep -qF -- "$fragment" "$tmp/plan"
  then pass; else fail "bench_coll.py --dry-run $*: '$fragment' should not be there: $(cat "$tmp/plan")"; fi
}

# Arguments.
expect_status 2 "sizes must be multiples of 4 bytes, not 6" "$coll" -b 6
expect_status 2 "'foo' is not one of allreduce, allgather, reducescatter, alltoall" "$coll" --op allreduce,foo
expect_status 2 "'fast' is not one of auto, oneshot, ll, twoshot" "$coll" --algos fast
expect_status 2 "'1' is not an integer from 2 to 1024" "$coll" --ranks 2,1
expect_status 2 "-b 4194304 is more than -e 1048576" "$coll" -b 4M -e 1M
expect_status 2 "'0' is not an integer from 1 to" "$coll" -n 0
expect_status 2 "unknown measurement 'foo'" "$torchb" --op foo
expect_status 2 "unknown backend 'XYZ'" "$torchb" --backends CCO,XYZ
expect_status 2 "-w: the warm-up is fixed" "$torchb" -w 2

# The plan: per rank count, cco auto (everything, bf16 at 4K 256K 16M), each forced all-reduce
# algorithm (ll up to the 64 KiB it takes), then torch's NVSHMEM reference (all-reduce, reduce-scatter).
n_jobs=$(python3 "$coll" --bin "$bin" --dry-run | wc -l)
[ "$n_jobs" -eq 15 ] && pass || fail "default plan: $n_jobs jobs, wanted 5 per rank count x 3"
plan_has "[2 ranks, cco auto] -u CCO_ALGO $bin/ccorun -t 600 -n 2 " --ranks 2
plan_has "--op allreduce,allgather,reducescatter,alltoall --sizes 1024,4096,16384,65536,262144,1048576,4194304,16777216,67108864,268435456 --bf16-sizes 4096,262144,16777216 --algo auto" --ranks 2
plan_has "[8 ranks, cco ll] CCO_ALGO=ll $bin/ccorun -t 600 -n 8" --ranks 8
plan_has "--impl cco --op allreduce --sizes 1024,4096,16384,65536 --bf16-sizes 4096 --algo ll" --ranks 8
plan_has "CCO_ALGO=twoshot" --ranks 4
plan_has "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=lo NVSHMEM_DISABLE_NCCL=1 NVSHMEM_DISABLE_NVLS=1 NVSHMEM_IGNORE_CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1" --ranks 2
plan_has "--impl torch --op allreduce,reducescatter --sizes" --ranks 2
plan_has "--sizes 65536,262144,1048576 --bf16-sizes 262144 --algo auto -n 3 -w 1 --reps 10" \
  --ranks 2 -b 64K -e 1M -n 3 -w 1 --reps 10
plan_has "--sizes 8192,16384,24576" --ranks 2 -b 8K -e 24K -i 8K
plan_lacks "torch NVSHMEM" --no-ref
plan_lacks "CCO_ALGO=" --op allgather,alltoall
plan_lacks "--impl torch" --op allgather
plan_lacks "cco ll" --algos auto,oneshot
plan_lacks "cco ll" -b 128K  # ll is not timed past the 64 KiB it takes: no job left
# The references of a GPU per rank: torch's CUDA backend (no NVSHMEM settings) and NCCL (every collective).
plan_has "[2 ranks, torch CUDA]  $bin/ccorun -t 600 -n 2 " --ranks 2 --refs torch_cuda,nccl
plan_has "--impl torch --op allreduce,reducescatter --sizes" --ranks 2 --refs torch_cuda
plan_has "--torch-backend CUDA" --ranks 2 --refs torch_cuda
plan_has "[2 ranks, NCCL]" --ranks 2 --refs torch_cuda,nccl
plan_has "--impl nccl --op allreduce,allgather,reducescatter,alltoall --sizes" --ranks 2 --refs nccl
plan_lacks "torch NVSHMEM" --ranks 2 --refs torch_cuda,nccl
plan_lacks "NCCL" --ranks 2 --refs nccl --no-ref
expect_status 2 "'mpi' is not one of torch_nvshmem, torch_cuda, nccl" "$coll" --refs nccl,mpi
plan_lacks "--bf16-sizes" --op reducescatter
if ! python3 -c 'import ctypes; ctypes.CDLL("libcuda.so.1")' 2>/dev/null; then
  expect_status 77 "bench_coll.py: no GPU driver here" "$coll" --bin "$bin" --ranks 2
  expect_status 77 "bench_torch.py: no GPU driver here" "$torchb" --bin "$bin"
  expect_status 77 "coll: skipped: no GPU driver here" "$perf" coll --bin "$bin" --ranks 2
fi

# The ratio lines from synthetic results, and what each collective is timed at.
if python3 - "$src/bench" <<'EOF' >"$tmp/unit" 2>&1; then pass; else fail "ratios and sizes: $(cat "$tmp/unit")"; fi
import json, sys
sys.path.insert(0, sys.argv[1])
import bench_coll, bench_torch, cco_perf, coll_jobs
from perf_common import json_line


def line(op, nbytes, ranks, metric, value, ref=None, **extra):
    return json.loads(json_line("coll", op, nbytes, ranks, 100, metric, value, ref, dtype="fp32", **extra))


def results(ranks, cco_us, one_us, two_us, nbytes, forced_us=None):
    bw = lambda us: nbytes / us / 1e3  # noqa: E731 (any monotone figure will do)
    out = [line("allreduce", nbytes, ranks, "us", cco_us, algo="auto", variant="auto", algo_used="ll"),
           line("allreduce", nbytes, ranks, "GBps", bw(cco_us), algo="auto", variant="auto"),
           line("allreduce", nbytes, ranks, "us", one_us, "torch_nvshmem", variant="one_shot"),
           line("allreduce", nbytes, ranks, "GBps", bw(one_us), "torch_nvshmem", variant="one_shot"),
           line("allreduce", nbytes, ranks, "us", two_us, "torch_nvshmem", variant="two_shot"),
           line("allreduce", nbytes, ranks, "GBps", bw(two_us), "torch_nvshmem", variant="two_shot")]
    if forced_us:
        out.append(line("allreduce", nbytes, ranks, "us", forced_us, algo="oneshot", variant="oneshot"))
    return out


def ratios(lines, ranks):
    got = [json.loads(t) for t in bench_coll.ratios(lines, ranks)]
    for obj in got:
        assert cco_perf.check_line(obj, "coll") is None, obj
    return {(o["op"], o["bytes"], o["metric"]): o for o in got}


# 8 ranks, 4 KiB: 0.65 x the better reference (two-shot) meets <= 0.7; the best forced algorithm is named.
r = ratios(results(8, 3.25, 6.0, 5.0, 4096, forced_us=3.0), 8)
o = r[("allreduce", 4096, "ratio_us")]
assert abs(o["value"] - 0.65) < 1e-9 and o["goal_ratio_max"] == 0.7 and o["met"] is True, o
assert o["vs"] == "torch_nvshmem two_shot" and o["best_algo"] == "oneshot" and o["best_algo_us"] == 3.0, o
assert o["algo_used"] == "ll" and o["ref"] is None and o["ranks"] == 8, o
assert r[("allreduce", 4096, "ratio_GBps")]["goal_ratio_min"] is None  # no bandwidth goal below 16 MiB
# 2 ranks: the goal is 0.9; 0.95 misses it.
o = ratios(results(2, 4.75, 5.0, 6.0, 1 << 20), 2)[("allreduce", 1 << 20, "ratio_us")]
assert o["goal_ratio_max"] == 0.9 and o["met"] is False and o["vs"] == "torch_nvshmem one_shot", o
# 4 ranks: no goal; 2 MiB (past 1 MiB): no goal either.
assert ratios(results(4, 4.0, 5.0, 6.0, 4096), 4)[("allreduce", 4096, "ratio_us")]["goal_ratio_max"] is None
assert ratios(results(8, 4.0, 5.0, 6.0, 2 << 20), 8)[("allreduce", 2 << 20, "ratio_us")]["goal_ratio_max"] is None
# From 16 MiB: bus bandwidth >= 1.0 x two-shot's.
o = ratios(results(8, 90.0, 200.0, 100.0, 16 << 20), 8)[("allreduce", 16 << 20, "ratio_GBps")]
assert o["goal_ratio_min"] == 1.0 and o["met"] is True and abs(o["value"] - 100 / 90) < 1e-5, o
# Without a reference, or for a forced algorithm alone, no ratio.
assert bench_coll.ratios([l for l in results(8, 4.0, 5.0, 6.0, 4096) if l["ref"] is None], 8) == []
# The reduce-scatter beside reduce_scatter_out, no goal.
rs = [line("reducescatter", 1 << 20, 4, "us", 8.0, algo="auto", variant="auto"),
      line("reducescatter", 1 << 20, 4, "us", 10.0, "torch_nvshmem", variant="reduce_scatter_out")]
o = ratios(rs, 4)[("reducescatter", 1 << 20, "ratio_us")]
assert abs(o["value"] - 0.8) < 1e-9 and o["goal_ratio_max"] is None and o["met"] is None, o

# NCCL: every collective has a ratio; the all-reduce's goals are <= 0.6 x its time from 1 KiB to 1 MiB
# and >= 1.0 x its bus bandwidth from 16 MiB; the other collectives have none.
nc = [line("allreduce", 4096, 8, "us", 5.0, algo="auto", variant="auto"),
      line("allreduce", 4096, 8, "us", 10.0, "nccl", variant="nccl"),
      line("allgather", 4096, 8, "us", 6.0, algo="auto", variant="auto"),
      line("allgather", 4096, 8, "us", 5.0, "nccl", variant="nccl"),
      line("allreduce", 16 << 20, 8, "us", 90.0, algo="auto", variant="auto"),
      line("allreduce", 16 << 20, 8, "GBps", 20.0, algo="auto", variant="auto"),
      line("allreduce", 16 << 20, 8, "us", 100.0, "nccl", variant="nccl"),
      line("allreduce", 16 << 20, 8, "GBps", 19.0, "nccl", variant="nccl")]
r = ratios(nc, 8)
o = r[("allreduce", 4096, "ratio_us")]
assert o["value"] == 0.5 and o["goal_ratio_max"] == 0.6 and o["met"] is True and o["vs"] == "nccl nccl", o
o = r[("allgather", 4096, "ratio_us")]
assert o["value"] == 1.2 and o["goal_ratio_max"] is None and o["met"] is None, o
o = r[("allreduce", 16 << 20, "ratio_GBps")]
assert o["goal_ratio_min"] == 1.0 and o["met"] is True and abs(o["value"] - 20 / 19) < 1e-5, o
# torch's CUDA backend: <= 0.8 at any rank count; beside NCCL in the same run, a ratio line each.
tc = results(4, 4.2, 5.0, 6.0, 4096)
tc = [dict(l, ref="torch_cuda") if l["ref"] else l for l in tc]
tc.append(line("allreduce", 4096, 4, "us", 8.4, "nccl", variant="nccl"))
got = [json.loads(t) for t in bench_coll.ratios(tc, 4) if json.loads(t)["metric"] == "ratio_us"]
assert sorted(o["vs"] for o in got) == ["nccl nccl", "torch_cuda one_shot"], got
o = [o for o in got if o["vs"].startswith("torch_cuda")][0]
assert abs(o["value"] - 0.84) < 1e-9 and o["goal_ratio_max"] == 0.8 and o["met"] is False, o

# nccl-tests' sizes: the all-gather's output, the reduce-scatter's input, the all-to-all's buffer.
assert coll_jobs.counts("allreduce", 4096, 8, 4) == (1024, 1024, 4096)
assert coll_jobs.counts("allgather", 4096, 8, 4) == (128, 1024, 4096)
assert coll_jobs.counts("reducescatter", 4096, 8, 2) == (2048, 256, 4096)
assert coll_jobs.counts("alltoall", 4096, 3, 4) == (1023, 1023, 4092)  # whole blocks per rank
assert coll_jobs.counts("allgather", 16, 8, 4)[0] == 0  # under one element per rank: left out
assert coll_jobs.reps_for(1 << 20, None) == 100 and coll_jobs.reps_for(4 << 20, None) == 20
assert coll_jobs.reps_for(1 << 30, 7) == 7

# bench_torch: the all-reduce's ratio is the graph figure's, not the eager one's.
def tline(op, value, ref, **extra):
    return json.loads(json_line("torch", op, 4096, 2, 10, "us", value, ref, dtype="fp32", **extra))


res = {"CCO": [tline("one_shot_all_reduce", 4.0, None), tline("one_shot_all_reduce_eager", 20.0, None),
               tline("rendezvous", 300.0, None)],
       "NVSHMEM": [tline("one_shot_all_reduce", 5.0, "torch_nvshmem"),
                   tline("one_shot_all_reduce_eager", 10.0, "torch_nvshmem"), tline("rendezvous", 600.0, "torch_nvshmem")]}
got = {o["op"]: o for o in map(json.loads, bench_torch.ratios(res, 2))}
assert set(got) == {"one_shot_all_reduce", "rendezvous"}, got
assert got["one_shot_all_reduce"]["value"] == 0.8 and got["one_shot_all_reduce"]["met"] is True, got
assert got["rendezvous"]["value"] == 0.5 and got["rendezvous"]["vs"] == "torch_nvshmem", got
for o in got.values():
    assert cco_perf.check_line(o, "torch") is None, o
print("ok")
EOF

# The driver: each benchmark alone, and in the gpu set at its rank counts.
if python3 "$perf" coll --bin "$bin" --dry-run --ranks 2,8 -b 4K -e 1M -n 3 -- --no-ref >"$tmp/drv" &&
  grep -qF -- "bench/bench_coll.py -b 4096 -e 1048576 -n 3 --ranks 2,8 --bin $bin --python" "$tmp/drv" &&
  grep -qF -- "--no-ref" "$tmp/drv"; then pass; else fail "cco_perf coll --dry-run: $(cat "$tmp/drv")"; fi
if python3 "$perf" gpu --bin "$bin" --dry-run >"$tmp/drv" && [ "$(grep -c 'bench/bench_coll.py --ranks [248] ' "$tmp/drv")" -eq 3 ] &&
  grep -qF -- "bench/bench_torch.py --ranks 2 --bin $bin" "$tmp/drv"; then pass
else fail "cco_perf gpu --dry-run: coll at 2, 4, 8 ranks and torch: $(cat "$tmp/drv")"; fi
if python3 "$perf" torch --bin "$bin" --dry-run --timeout 900 -n 50 >"$tmp/drv" &&
  grep -qF -- "bench/bench_torch.py -n 50 --bin $bin --python" "$tmp/drv" && grep -qF -- "--timeout 900" "$tmp/drv"
then pass; else fail "cco_perf torch --dry-run: $(cat "$tmp/drv")"; fi
expect_status 2 "torch takes no sizes" "$perf" torch -b 1M
expect_status 2 "coll has no measurement 'bcast'" "$perf" coll --op bcast
expect_status 2 "coll runs with 2 to 1024 ranks, not 1" "$perf" coll --ranks 1
expect_status 2 "coll takes multiples of 4 bytes" "$perf" coll -b 6
echo "test_coll: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
