"""Triton kernels on the cco device bitcode against CUDA C kernels doing the
same thing, in the same run (the CUDA C side compiled by NVRTC through
cco.cuda, from the same headers the CUDA examples use):

1. triton_lsa_put_bw: rank 0 copies 256 MiB from its window into LSA peer 1's
   window: a Triton copy (peer address from cco.Window.lsa_ptr) against the
   CUDA C copy of bench_lsa.cu (eight 16-byte loads in flight per thread,
   one 1024-thread block per SM). Goal: ratio >= 0.95.
2. triton_allreduce: the one-shot LSA all-reduce of examples/03 (LSA barrier,
   sum of every peer's input, barrier) on 256 KiB of fp32 (and 1 KiB..1 MiB),
   each side REPS kernels in a CUDA graph replayed ITERS times: a Triton
   kernel (cco.LsaBarrier.sync, cco.Window.lsa_ptr) against
   ccoExampleAllReduceBlock. Goal: Triton time <= C time / 0.95.
3. triton_gda_put0_flush: a zero-byte GDA put + flush, ITERS times in one
   kernel timed by %globaltimer, rank 0 to rank 1 (FULL connection): Triton
   (warp scope, one warp) against the CUDA C loop of bench_gda.cu (one
   thread, ref cuda_c) and the same C loop run by one warp at warp scope
   (ref cuda_c_warp), which is what a Triton program has to do. Goal:
   ratio <= 1.05.

    source tests/gpu/mps.sh; mps_start
    build/bin/ccorun -n 2 python3 bench/bench_triton.py          (also -n 4, -n 8)
    build/bin/ccorun -n 2 --virtual-hosts 2 python3 bench/bench_triton.py gda

`--op lsa,allreduce,gda` (or the same words alone) picks the parts (default
all); -b/-e/-f bound the all-reduce's sweep (1 KiB to 1 MiB, x4), -n its
graph replays. Prints one JSON line per measurement in the shared format
(docs/perf.md, rank 0): bench "triton", cco's figure is the Triton kernel's,
ref "cuda_c" the CUDA C kernel's. Needs torch, Triton and cupy.
"""
import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("CUDA_MODULE_LOADING", "EAGER")  # loads never wait for running kernels
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))
sys.path.insert(0, str(REPO / "bench"))
from perf_common import add_sweep_args, check_sweep_args, json_line, sweep  # noqa: E402

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from cco.ir.triton import cco  # noqa: E402

PUT_BYTES = 256 << 20
AR_MAX_BYTES = 1 << 20
REPS, ITERS = 20, 50
GDA_ITERS = 2000


@triton.jit
def lsa_put_bw(win, peer, src_off, dst_off, n_words, BLOCK: tl.constexpr):
    """A persistent copy: program i takes tiles i, i + programs, ..."""
    src = tl.multiple_of(cco.Window.local_ptr(win, src_off).to(tl.pointer_type(tl.int32), bitcast=True), 16)
    dst = tl.multiple_of(cco.Window.lsa_ptr(win, peer, dst_off).to(tl.pointer_type(tl.int32), bitcast=True), 16)
    for start in range(tl.program_id(0) * BLOCK, n_words, tl.num_programs(0) * BLOCK):
        offs = tl.multiple_of(start, BLOCK) + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.load(src + offs))


@triton.jit
def allreduce(dev_comm, win, out_off, status, count, PART: tl.constexpr):
    """Program p sums elements [p*PART, (p+1)*PART) of every LSA peer's input
    (window offset 0) into this rank's output, between two syncs of LSA
    barrier p, as ccoExampleAllReduceBlock does."""
    pid = tl.program_id(0)
    st = cco.LsaBarrier.sync(dev_comm, pid, coop=cco.CoopScope.BLOCK)
    offs = pid * PART + tl.arange(0, PART)
    mask = offs < count
    acc = tl.zeros([PART], dtype=tl.float32)
    for p in range(0, cco.DevComm.lsa_size(dev_comm)):
        src = tl.multiple_of(cco.Window.lsa_ptr(win, p, 0).to(tl.pointer_type(tl.float32), bitcast=True), 16)
        acc += tl.load(src + offs, mask=mask)
    out = tl.multiple_of(cco.Window.local_ptr(win, out_off).to(tl.pointer_type(tl.float32), bitcast=True), 16)
    tl.store(out + offs, acc, mask=mask)
    st = tl.maximum(st, cco.LsaBarrier.sync(dev_comm, pid, coop=cco.CoopScope.BLOCK))
    if st != 0:
        tl.atomic_add(status, 1)


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.uint64, is_pure=False, pack=1)


@triton.jit
def gda_put0_flush(dev_comm, win, peer, ns, WARM: tl.constexpr, ITERS: tl.constexpr):
    bad = tl.cast(0, tl.int32)
    for _ in range(WARM):
        cco.Gda.put(dev_comm, peer, win, 0, win, 0, 0, coop=cco.CoopScope.WARP)
        bad = tl.maximum(bad, cco.Gda.flush(dev_comm, coop=cco.CoopScope.WARP))
    t0 = _now()
    for _ in range(ITERS):
        cco.Gda.put(dev_comm, peer, win, 0, win, 0, 0, coop=cco.CoopScope.WARP)
        bad = tl.maximum(bad, cco.Gda.flush(dev_comm, coop=cco.CoopScope.WARP))
    t1 = _now()
    tl.store(ns, tl.where(bad == 0, (t1 - t0).to(tl.int64), -1))


CUDA_C = r"""
#include "cco/cco_device_all.h"
#include "lsa_examples.h"

// bench_lsa.cu's put kernel: eight 16-byte loads in flight per thread.
extern "C" __global__ void put_kernel(ccoWindow_t win, int peer, unsigned long long srcOff,
                                      unsigned long long dstOff, unsigned long long n) {
  ccoWindowDevice w = *win;
  uint4* __restrict__ dst = (uint4*)ccoGetLsaPeerPtr(&w, peer, dstOff);
  const uint4* __restrict__ src = (const uint4*)ccoGetLocalPtr(&w, srcOff);
  enum { U = 8 };
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  for (; i + (U - 1) * stride < n; i += U * stride) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; u++) v[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < U; u++) dst[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// bench_allreduce.cu's kernel.
extern "C" __global__ void allreduce_kernel(const ccoDevComm* dcp, ccoWindow_t win, unsigned long long outOff,
                                            unsigned long long count, int* bad) {
  ccoDevStatus_t st = ccoExampleAllReduceBlock(dcp, win, 0, outOff, count, ccoExampleF32, blockIdx.x, gridDim.x);
  if (st != ccoDevSuccess && threadIdx.x == 0) atomicAdd(bad, 1);
}

// bench_gda.cu's put_flush_loop (one thread).
extern "C" __global__ void put_flush_loop(const ccoDevComm* dcp, ccoWindow_t win, int peer, int warm, int iters,
                                          long long* ns) {
  ccoGda g = ccoGdaHandle(dcp, 0, ccoGdaDoorbellImmediate);
  unsigned long long t0 = 0;
  for (int i = -warm; i < iters; i++) {
    if (i == 0) t0 = cco_impl_clock_ns();
    ccoGdaPut(&g, peer, win, 0, win, 0, 0, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopThread, ccoGdaThreadAggregate);
    if (ccoGdaFlush(&g, ccoCoopThread) != ccoDevSuccess) { *ns = -1; return; }
  }
  *ns = (long long)(cco_impl_clock_ns() - t0);
}

// The same loop by one warp at warp scope: what a Triton program of one warp does (every thread enters
// each call; one posts, the warp syncs and shares the status).
extern "C" __global__ void put_flush_loop_warp(const ccoDevComm* dcp, ccoWindow_t win, int peer, int warm, int iters,
                                               long long* ns) {
  ccoGda g = ccoGdaHandle(dcp, 0, ccoGdaDoorbellImmediate);
  unsigned long long t0 = 0;
  int bad = 0;
  for (int i = -warm; i < iters; i++) {
    if (i == 0) t0 = cco_impl_clock_ns();
    ccoGdaPut(&g, peer, win, 0, win, 0, 0, ccoGdaSigNone(), CCO_GDA_NO_COUNTER, ccoCoopWarp, ccoGdaThreadAggregate);
    if (ccoGdaFlush(&g, ccoCoopWarp) != ccoDevSuccess) bad = 1;
  }
  if (threadIdx.x == 0) *ns = bad ? -1 : (long long)(cco_impl_clock_ns() - t0);
}
"""

# name -> (kernel, signature, constexprs, num_warps): what CI compiles.
COMPILE_SPECS = {
    "lsa_put_bw": (lsa_put_bw, {"win": "i64", "peer": "i32", "src_off": "i64", "dst_off": "i64", "n_words": "i64",
                                "BLOCK": "constexpr"}, {"BLOCK": 8192}, 8),
    "allreduce": (allreduce, {"dev_comm": "i64", "win": "i64", "out_off": "i64", "status": "*i32", "count": "i32",
                              "PART": "constexpr"}, {"PART": 512}, 16),
    "gda_put0_flush": (gda_put0_flush, {"dev_comm": "i64", "win": "i64", "peer": "i32", "ns": "*i64",
                                        "WARM": "constexpr", "ITERS": "constexpr"}, {"WARM": 100, "ITERS": 2000}, 1),
}


class Bench:
    def __init__(self, comm, torch, cp):
        self.comm, self.torch, self.cp = comm, torch, cp
        from cco import cuda as cco_cuda  # not "import cco.cuda": that would rebind cco, the Triton namespace

        self.module = cco_cuda.raw_module(CUDA_C, options=(f"-I{REPO / 'examples'}", "-std=c++17"))
        self.libs = cco.get_extern_libs()
        self.sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def emit(self, op, nbytes, iters, metric, triton_value, c_value, **extra):
        """The Triton kernel's figure, then the CUDA C kernel's beside it (same keys, ref cuda_c)."""
        if self.comm.rank == 0:
            ranks = self.comm.size
            print(json_line("triton", op, nbytes, ranks, iters, metric, triton_value, **extra), flush=True)
            print(json_line("triton", op, nbytes, ranks, iters, metric, c_value, ref="cuda_c", **extra), flush=True)

    def c_launch(self, name, grid, block, args):
        # cupy kernels take cupy arrays for pointer arguments: torch tensors pass through their
        # __cuda_array_interface__ (no copy).
        args = tuple(self.cp.asarray(a) if isinstance(a, self.torch.Tensor) else a for a in args)
        stream = self.cp.cuda.ExternalStream(self.torch.cuda.current_stream().cuda_stream)
        self.module.get_function(name)((grid,), (block,), args, stream=stream)

    def event_ms(self, fn, iters):
        torch = self.torch
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(iters):
            fn()
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1) / iters

    def lsa_put(self):
        torch, cp, comm = self.torch, self.cp, self.comm
        win = comm.register_window_alloc(2 * PUT_BYTES)
        src = win.torch(torch.int32, (PUT_BYTES // 4,))
        src.copy_(torch.arange(PUT_BYTES // 4, dtype=torch.int32, device="cuda"))
        torch.cuda.synchronize()
        peer = (comm.lsa_rank + 1) % comm.lsa_size
        block = int(os.environ.get("CCO_BENCH_TRITON_BLOCK", 8192))
        warps = int(os.environ.get("CCO_BENCH_TRITON_WARPS", 8))
        programs = self.sms * int(os.environ.get("CCO_BENCH_TRITON_PER_SM", 2))
        n_words = PUT_BYTES // 4

        def tri():
            lsa_put_bw[(programs,)](win.handle, peer, 0, PUT_BYTES, n_words, BLOCK=block, num_warps=warps,
                                    extern_libs=self.libs)

        def c():
            self.c_launch("put_kernel", self.sms, 1024,
                          (cp.uint64(win.handle), cp.int32(peer), cp.uint64(0), cp.uint64(PUT_BYTES),
                           cp.uint64(PUT_BYTES // 16)))

        comm.barrier()
        times = {"triton": [], "c": []}
        if comm.rank == 0:
            tri(), c()
            torch.cuda.synchronize()
            for _ in range(7):
                times["triton"].append(self.event_ms(tri, 10))
                times["c"].append(self.event_ms(c, 10))
            dst = win.peer(comm.team_rank_to_world(1, peer)).torch(torch.int32, (n_words,), offset=PUT_BYTES)
            wrong = int((dst != src).sum())
            t, ref = statistics.median(times["triton"]), statistics.median(times["c"])
            gb = lambda ms: PUT_BYTES / (ms * 1e-3) / 1e9  # noqa: E731
            self.emit("lsa_put", PUT_BYTES, 10, "GBps", gb(t), gb(ref), programs=programs, block=block,
                      num_warps=warps, goal_ratio_min=0.95, wrong=wrong)
        comm.barrier()
        win.deregister()

    def allreduce(self, sizes, iters):
        torch, cp, comm = self.torch, self.cp, self.comm
        from cco import CCODevCommRequirements, GDA_CONNECTION_NONE

        win = comm.register_window_alloc(2 * AR_MAX_BYTES)
        dc = comm.create_dev_comm(CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_NONE,
                                                         lsa_barrier_count=128))
        status = torch.zeros(1, dtype=torch.int32, device="cuda")
        # Every program waits in a barrier for its twin on every peer: the grids
        # of the ranks sharing this GPU must all be resident (docs/device_api.md).
        sharing = max(1, comm.lsa_size // max(1, torch.cuda.device_count()))
        fit = self.sms * 4 // sharing  # 512-thread blocks: 4 per SM at most
        for bytes_ in sizes:
            count = bytes_ // 4
            parts = 1
            while parts * 2 <= min(128, fit, bytes_ // 2048) and count % (parts * 2) == 0:
                parts *= 2
            part = count // parts
            inp = win.torch(torch.float32, (count,))
            inp.copy_(torch.arange(count, device="cuda", dtype=torch.float32) % 7 + comm.rank + 1)
            torch.cuda.synchronize()

            def tri():
                allreduce[(parts,)](dc.ptr, win.handle, AR_MAX_BYTES, status, count, PART=part, num_warps=16,
                                    extern_libs=self.libs)

            def c():
                self.c_launch("allreduce_kernel", parts, 512, (cp.uint64(dc.ptr), cp.uint64(win.handle),
                                                               cp.uint64(AR_MAX_BYTES), cp.uint64(count), status))

            cco.preload(allreduce, dc.ptr, win.handle, AR_MAX_BYTES, status, count, grid=(parts,), PART=part,
                        num_warps=16, extern_libs=self.libs)
            self.module.get_function("allreduce_kernel")  # loaded now, before any kernel waits
            comm.barrier()
            us = {}
            for name, fn in (("triton", tri), ("c", c)):
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(REPS):
                        fn()
                comm.barrier()
                graph.replay()  # warm-up
                torch.cuda.synchronize()
                comm.barrier()
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(iters):
                    graph.replay()
                e1.record()
                e1.synchronize()
                us[name] = e0.elapsed_time(e1) * 1e3 / (iters * REPS)
                out = win.torch(torch.float32, (count,), offset=AR_MAX_BYTES)
                want = (torch.arange(count, device="cuda", dtype=torch.float32) % 7) * comm.lsa_size + \
                    comm.lsa_size * (comm.lsa_size + 1) / 2
                us[name + "_wrong"] = int((out != want).sum())
                out.zero_()
                torch.cuda.synchronize()
                comm.barrier()
                del graph
            self.emit("allreduce", bytes_, iters * REPS, "us", us["triton"], us["c"], blocks=parts, dtype="fp32",
                      bad_status=int(status.item()), wrong=us["triton_wrong"] + us["c_wrong"])
        dc.destroy()
        win.deregister()

    def gda(self):
        torch, cp, comm = self.torch, self.cp, self.comm
        from cco import CCODevCommRequirements, GDA_CONNECTION_FULL

        win = comm.register_window_alloc(1 << 20)
        dc = comm.create_dev_comm(CCODevCommRequirements(gda_connection_type=GDA_CONNECTION_FULL))
        ns = torch.zeros(1, dtype=torch.int64, device="cuda")
        comm.barrier()
        if comm.rank == 0:
            res = {"triton": [], "c": [], "c_warp": []}
            for _ in range(5):
                gda_put0_flush[(1,)](dc.ptr, win.handle, 1, ns, WARM=100, ITERS=GDA_ITERS, num_warps=1,
                                     extern_libs=self.libs)
                torch.cuda.synchronize()
                res["triton"].append(int(ns.item()) / 1e3 / GDA_ITERS)
                self.c_launch("put_flush_loop", 1, 1, (cp.uint64(dc.ptr), cp.uint64(win.handle), cp.int32(1),
                                                       cp.int32(100), cp.int32(GDA_ITERS), ns))
                torch.cuda.synchronize()
                res["c"].append(int(ns.item()) / 1e3 / GDA_ITERS)
                self.c_launch("put_flush_loop_warp", 1, 32, (cp.uint64(dc.ptr), cp.uint64(win.handle), cp.int32(1),
                                                             cp.int32(100), cp.int32(GDA_ITERS), ns))
                torch.cuda.synchronize()
                res["c_warp"].append(int(ns.item()) / 1e3 / GDA_ITERS)
            t, ref = statistics.median(res["triton"]), statistics.median(res["c"])
            failed = min(res["triton"] + res["c"] + res["c_warp"]) < 0
            self.emit("gda_put0_flush", 0, GDA_ITERS, "us", t, ref, goal_ratio_max=1.05, failed=failed)
            # A second reference: the C loop at the scope a Triton program must use.
            print(json_line("triton", "gda_put0_flush", 0, comm.size, GDA_ITERS, "us",
                            statistics.median(res["c_warp"]), ref="cuda_c_warp", goal_ratio_max=1.05,
                            failed=failed), flush=True)
        comm.barrier()
        dc.destroy()
        win.deregister()


PARTS = ("lsa", "allreduce", "gda")


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Triton kernels on the cco device bitcode against CUDA C kernels")
    add_sweep_args(ap)
    ap.add_argument("--op", default=",".join(PARTS), help="comma-separated parts: " + ", ".join(PARTS))
    ap.add_argument("parts", nargs="*", help="the same as --op")
    args = ap.parse_args(argv)
    check_sweep_args(ap, args)
    args.parts = args.parts or args.op.split(",")
    for part in args.parts:
        if part not in PARTS:
            ap.error(f"unknown part '{part}' (choose from {', '.join(PARTS)})")
    args.sizes = list(sweep(args, 1024, AR_MAX_BYTES, 4))
    if args.sizes and (max(args.sizes) > AR_MAX_BYTES or min(args.sizes) < 1024 or any(b % 4 for b in args.sizes)):
        ap.error(f"all-reduce sizes must be multiples of 4 between 1K and {AR_MAX_BYTES >> 20}M")
    return args


def main():
    args = parse_args(sys.argv[1:])
    import cupy as cp
    import torch

    from cco.launch import finalize, init_communicator

    parts = args.parts
    with init_communicator(per_rank_vmm=1 << 30) as comm:
        torch.cuda.set_device(comm.cuda_device)
        bench = Bench(comm, torch, cp)
        if "lsa" in parts and comm.lsa_size > 1:
            bench.lsa_put()
        if "allreduce" in parts:
            bench.allreduce(args.sizes, args.iters or ITERS)
        if "gda" in parts and comm.size > 1:
            bench.gda()
    finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
