"""Fused GEMM + communication on torch tensors (docs/fused_ops.md).

    from cco.ops import gemm_rs, ag_gemm

    h = ag_gemm(x_shard, w1, comm)     # all_gather(x_shard) @ w1
    y = gemm_rs(act, w2, comm)         # reduce_scatter(act @ w2)

| op | inputs on each rank | result on each rank |
|---|---|---|
| ``gemm_rs``  | a [M, K], b [K, N] | reduce-scatter of a @ b: rows [r*M/W, (r+1)*M/W) summed over ranks |
| ``gemm_ar``  | a [M, K], b [K, N] | all-reduce of a @ b, [M, N] |
| ``gemm_ag``  | a [m, K], b [K, N] | all-gather of a @ b along rows, [W*m, N] |
| ``gemm_a2a`` | a [M, K], b [K, N] | all-to-all of a @ b: block s (M/W rows) from rank s, [M, N] |
| ``ag_gemm``  | a [m, K], b [K, N] | all_gather(a) @ b, [W*m, N] |
| ``a2a_gemm`` | a [M, K], b [K, N] | all_to_all(a) @ b, [M, N] |

``transport`` is ``"lsa"`` (the SMs store to / load from the peers'
memory), ``"sdma"`` (the copy engines move whole row panels, the SMs only
compute), ``"sequential"`` (torch.matmul and a cco collective, one after
the other) or ``"auto"`` (:func:`choose_transport`, the measured rule).

Calls are collective and stream ordered (torch's current stream): every
rank of the communicator makes the same calls with the same shapes. They
share one workspace per communicator (symmetric memory); the results of
``gemm_rs``, ``gemm_ar``, ``gemm_ag`` and ``gemm_a2a`` are views of it,
valid until the next fused call on the communicator, unless ``out`` is
given. The first call of a shape checks that every rank agrees on it and
loads the kernels on every rank (a host barrier); make it before a CUDA
graph capture, as torch's own warm-up does.
"""
from __future__ import annotations

import dataclasses
import os
import weakref
from typing import Any, Dict, List, Optional, Set, Tuple

from ..errors import CCOInvalidArgument, CCOInvalidUsage, CCOUnsupported, CCOError

OPS = ("gemm_rs", "gemm_ar", "gemm_ag", "gemm_a2a", "ag_gemm", "a2a_gemm")
TRANSPORTS = ("auto", "lsa", "sdma", "sequential")
PRODUCERS = {"gemm_rs": ("scatter", True), "gemm_ar": ("broadcast", True),
             "gemm_ag": ("broadcast", False), "gemm_a2a": ("scatter", False)}  # mode, reduce
CONSUMERS = {"ag_gemm": False, "a2a_gemm": True}  # per destination (all-to-all)

# GEMM tiles. BLOCK_M is fixed: the workspace's counters are per BLOCK_M rows. BLOCK_N and the
# pipeline's stages come from CCO_FUSED_TILES ("<BLOCK_N>x<stages>", default 256x3, the fastest
# of three at every benchmark shape, docs/fused_ops.md).
BLOCK_M, BLOCK_K, GROUP_M, NUM_WARPS = 128, 64, 8, 8
TILE_CHOICES = {"128x3": (128, 3), "128x4": (128, 4), "256x3": (256, 3), "64x4": (64, 4)}


def _tiles_from_env() -> Tuple[int, int]:
    text = os.environ.get("CCO_FUSED_TILES", "256x3").strip()
    if text not in TILE_CHOICES:
        raise CCOInvalidArgument(f"CCO_FUSED_TILES={text!r}: one of {', '.join(TILE_CHOICES)}")
    return TILE_CHOICES[text]


BLOCK_N, NUM_STAGES = _tiles_from_env()
REDUCE_BLOCK_M, REDUCE_BLOCK_N = 32, 256
LSA_MAX_N = 4096  # auto's widest B for the LSA consumer ops: between qkv's 1,280 (won) and fc1's 7,168 (lost)
CTRL_HEADER_WORDS = 264  # fused_kernels.COUNTER_WORD: error word, SDMA bases [256]
MAX_RANKS = 256
ALIGN = 1 << 16


def _torch() -> Any:
    import torch
    return torch


def _kernels() -> Any:
    from . import fused_kernels
    return fused_kernels


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _align(n: int) -> int:
    return _cdiv(n, ALIGN) * ALIGN


def choose_transport(op: str, m_rows: int, n: int, k: int, world: int) -> str:
    """The measured rule (docs/fused_ops.md, bench/RESULTS.md "Fused GEMM"):
    which transport ``transport="auto"`` takes for op on a GEMM of m_rows x
    k times k x n (the rows this rank's GEMM computes) over `world` ranks."""
    if op not in OPS:
        raise CCOInvalidArgument(f"choose_transport: op must be one of {', '.join(OPS)}, not {op!r}")
    if world == 1:
        return "sequential"  # nothing crosses ranks
    # Measured with 8 ranks under MPS on one H200 and one H100 (bench/RESULTS.md): only the GEMMs
    # that read the peers' rows in place (all-gather -> GEMM, all-to-all -> GEMM), with 128 x 256
    # tiles and a narrow B, beat the sequential path: qkv (n 1,280) 0.73-0.92 of its time. With a
    # wide B the GEMM is most of the time, Triton's loses to cuBLAS, and fc1 (n 7,168) took
    # 1.01-1.03. Every producer op lost (1.06-1.22), and so did every case with 128 x 128 tiles.
    if op in CONSUMERS and world >= 8 and BLOCK_N == 256 and n <= LSA_MAX_N:
        return "lsa"
    return "sequential"


@dataclasses.dataclass(frozen=True)
class Plan:
    """Where one call's data sits in the workspace (byte offsets in the
    window, the same on every rank) and how its kernels are sized."""

    op: str
    transport: str
    rows: int          # rows of the GEMM's A on this rank
    n: int
    k: int
    esize: int
    rows_per_slot: int  # rows of one rank's slot in recv (producers), of one block (consumers)
    ctrl_bytes: int
    send_off: int
    send_bytes: int
    recv_off: int
    recv_bytes: int
    result_off: int
    result_bytes: int
    n_reset: int

    @property
    def total(self) -> int:
        return self.result_off + self.result_bytes


def plan(op: str, transport: str, rows: int, n: int, k: int, esize: int, world: int) -> Plan:
    """The workspace layout of a call (pure: every rank computes the same)."""
    if op in PRODUCERS:
        mode, reduce = PRODUCERS[op]
        per_slot = rows // world if mode == "scatter" else rows
        tiles_m = _cdiv(per_slot, BLOCK_M)
        n_reset = tiles_m * (1 + world)  # ready counters, then panel counters
        send = rows * n * esize if transport in ("sdma", "sequential") else 0
        recv = world * per_slot * n * esize
        result = per_slot * n * esize if reduce else 0
    else:
        per_slot = rows // world if CONSUMERS[op] else rows
        n_reset = 0
        send = rows * k * esize
        recv = world * per_slot * k * esize if transport in ("sdma", "sequential") else 0
        result = 0
    ctrl = _align((CTRL_HEADER_WORDS + n_reset) * 8)
    send_off = ctrl
    recv_off = send_off + _align(send)
    result_off = recv_off + _align(recv)
    return Plan(op, transport, rows, n, k, esize, per_slot, ctrl, send_off, send, recv_off, recv, result_off,
                _align(result) if result else 0, n_reset)


class _Workspace:
    """One communicator's window and device communicator for fused calls,
    grown (collectively) to the largest call made so far."""

    def __init__(self, comm: Any) -> None:
        from ..devcomm import CCODevCommRequirements, GDA_CONNECTION_NONE
        self.comm = comm
        self.dc = comm.create_dev_comm(CCODevCommRequirements(
            gda_connection_type=GDA_CONNECTION_NONE, lsa_barrier_count=1, sdma_queue_count=1))
        # The communicator's first collective sets the collectives' state up, a step over the
        # bootstrap that loads their module and synchronizes: done here, with no fused kernel in
        # flight, rather than inside the sequential path's first call, between its kernels.
        torch = _torch()
        comm.barrier_on_stream(torch.cuda.current_stream())
        torch.cuda.synchronize()
        self.win: Any = None
        self.size = 0
        self.agreed: Set[Tuple[Any, ...]] = set()  # call keys every rank has checked
        self.loaded: Set[Tuple[Any, ...]] = set()  # (call key, workspace size) whose kernels every rank loaded
        self.libs: Optional[Dict[str, str]] = None  # extern_libs, found at the first launch
        self.views: Dict[Tuple[Any, ...], Any] = {}  # views of the current window (ensure clears them)

    @property
    def alive(self) -> bool:
        return self.comm.alive and self.dc.alive and (self.win is None or self.win.alive)

    def ensure(self, nbytes: int) -> None:
        torch = _torch()
        if self.win is not None and self.size >= nbytes:
            return
        if torch.cuda.is_current_stream_capturing():
            raise CCOInvalidUsage(
                f"fused op: the workspace must grow to {nbytes} bytes, which cannot happen in a CUDA graph "
                "capture; make the same call once before capturing")
        torch.cuda.synchronize()  # the old window may still be in use by queued kernels
        if self.win is not None:
            self.comm.deregister_window(self.win)
            self.win = None
        size = max(nbytes, 2 * self.size)
        self.win = self.comm.register_window_alloc(size)
        self.size = size
        self.ctrl = self.win.torch(torch.int64, (self.size // 8,))  # the kernels' ctrl words
        self.ctrl.zero_()  # the error word and the counters start at 0
        # views made once per window: making one from the window costs tens of us of host time
        self.views = {}
        torch.cuda.synchronize()

    def view(self, off: int, dtype: Any, shape: Tuple[int, ...]) -> Any:
        key = (off, dtype, tuple(shape))
        if key not in self.views:
            if len(self.views) >= 256:  # many shapes: start over rather than hold views of all of them
                self.views.clear()
            self.views[key] = self.win.torch(dtype, shape, offset=off)
        return self.views[key].view(tuple(shape))  # a fresh view object: callers may restride theirs

    def window_as(self, dtype: Any) -> Any:
        """The whole window as elements of dtype (the kernels' win_ptr)."""
        return self.view(0, dtype, (self.size // (_torch().finfo(dtype).bits // 8),))


_WORKSPACES: "weakref.WeakKeyDictionary[Any, _Workspace]" = weakref.WeakKeyDictionary()


def _workspace(comm: Any) -> _Workspace:
    ws = _WORKSPACES.get(comm)
    if ws is None or not ws.alive:
        comm._check_alive()
        if comm.platform != "cuda":
            raise CCOUnsupported("fused GEMM ops run on the CUDA platform (torch CUDA tensors)")
        if comm.lsa_size != comm.size:
            raise CCOUnsupported(
                f"fused GEMM ops need every rank on one host (LSA team {comm.lsa_size} of {comm.size} ranks); "
                "across hosts use the sequential path: torch.matmul and the cco collective")
        ws = _Workspace(comm)
        _WORKSPACES[comm] = ws
    return ws


def release_workspace(comm: Any) -> None:
    """Collective: frees the communicator's fused workspace (its window and
    device communicator) now; the next fused call makes a new one. The
    communicator's destroy frees it too. Views it returned die with it."""
    ws = _WORKSPACES.pop(comm, None)
    if ws is None or not ws.alive:
        return
    _torch().cuda.synchronize()  # no queued kernel may still use it
    if ws.win is not None:
        comm.deregister_window(ws.win)
    comm.destroy_dev_comm(ws.dc)


def fused_status(comm: Any) -> int:
    """Synchronizes and returns the workspace's error word: 0, or the
    largest ccoDevStatus_t (cco.Status) a wait of any fused call returned
    (2: a peer did not deliver within the timeout, 1: aborted)."""
    ws = _WORKSPACES.get(comm)
    if ws is None or ws.win is None or not ws.alive:
        return 0
    _torch().cuda.synchronize()
    return int(ws.ctrl[0].item())


def check(comm: Any) -> None:
    """Raises :class:`CCOError` if a fused call's wait failed, and clears the word."""
    st = fused_status(comm)
    if st:
        _WORKSPACES[comm].ctrl[0].zero_()
        raise CCOError(f"a fused GEMM call failed on the device with status {st} (1 aborted, 2 timeout)")


# ------------------------------------------------------------------ checks


def _matrix(t: Any, what: str, call: str) -> Any:
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise CCOInvalidArgument(f"{call}: {what} must be a torch tensor, not {type(t).__name__}")
    if t.dim() != 2:
        raise CCOInvalidArgument(f"{call}: {what} must be 2-D, it has shape {list(t.shape)}")
    if not t.is_cuda:
        raise CCOInvalidArgument(f"{call}: {what} is on {t.device}; fused ops take CUDA tensors")
    if t.dtype not in (torch.bfloat16, torch.float16):
        raise CCOInvalidArgument(f"{call}: {what} is {t.dtype}; fused ops take bfloat16 or float16")
    return t


def _check_args(call: str, comm: Any, a: Any, b: Any, transport: str) -> None:
    if transport not in TRANSPORTS:
        raise CCOInvalidArgument(f"{call}: transport must be one of {', '.join(TRANSPORTS)}, not {transport!r}")
    _matrix(a, "a", call)
    _matrix(b, "b", call)
    if a.dtype != b.dtype:
        raise CCOInvalidArgument(f"{call}: a is {a.dtype} and b {b.dtype}; they must match")
    if a.shape[1] != b.shape[0]:
        raise CCOInvalidArgument(f"{call}: a is {list(a.shape)} and b {list(b.shape)}; a's columns must be b's rows")
    if a.device != b.device:
        raise CCOInvalidArgument(f"{call}: a is on {a.device} and b on {b.device}")
    if min(a.shape[0], a.shape[1], b.shape[1]) == 0:
        raise CCOInvalidArgument(f"{call}: empty matrices ({list(a.shape)} @ {list(b.shape)})")
    if comm.size > MAX_RANKS:
        raise CCOUnsupported(f"{call}: at most {MAX_RANKS} ranks")


def _check_out(call: str, out: Any, shape: Tuple[int, int], like: Any) -> Any:
    if out is None:
        return None
    _matrix(out, "out", call)
    if tuple(out.shape) != shape or out.dtype != like.dtype or out.device != like.device:
        raise CCOInvalidArgument(f"{call}: out is {list(out.shape)} {out.dtype} on {out.device}; it must be "
                                 f"{list(shape)} {like.dtype} on {like.device}")
    return out


# ------------------------------------------------------------------ launches


class _Call:
    """One call: its plan, workspace and kernels; launches them in order."""

    def __init__(self, call: str, comm: Any, a: Any, b: Any, transport: str) -> None:
        self.call, self.comm, self.a, self.b = call, comm, a, b
        self.world, self.me = comm.size, comm.rank
        rows, k, n = a.shape[0], a.shape[1], b.shape[1]
        if transport == "auto":
            transport = choose_transport(call, rows, n, k, self.world)
        self.transport = transport
        self.ws = _workspace(comm)
        self.key = (call, transport, tuple(a.shape), tuple(a.stride()), tuple(b.shape), tuple(b.stride()),
                    str(a.dtype))
        if self.key not in self.ws.agreed:
            self._agree()  # before anything collective: ranks that disagree raise, none waits
            self.ws.agreed.add(self.key)
        self.plan = plan(call, transport, rows, n, k, a.element_size(), self.world)
        self.ws.ensure(self.plan.total)
        self.win = self.ws.win
        self.sdma = transport == "sdma"
        # the window as elements of the call's type: the kernels address every region from it
        self.elems = self.ws.window_as(a.dtype)
        # rows of K and N elements keep every region offset a multiple of 16 bytes
        self.aligned = k % 8 == 0 and n % 8 == 0
        self.launches: List[Tuple[Any, Tuple[int, ...], Tuple[Any, ...], Dict[str, Any]]] = []

    def add(self, kernel: Any, grid: Tuple[int, ...], args: Tuple[Any, ...], **consts: Any) -> None:
        self.launches.append((kernel, grid, args, consts))

    def copy(self, dst: Any, src: Any) -> None:
        """A tensor copy between two of the call's kernels (staging)."""
        self.launches.append((None, (), (dst, src), {}))

    def run(self) -> None:
        from ..ir.triton import cco as cco_tl
        ws = self.ws
        if ws.libs is None:
            ws.libs = cco_tl.get_extern_libs()
        loaded = (self.key, ws.size, BLOCK_M, BLOCK_N, BLOCK_K, NUM_STAGES, NUM_WARPS)  # a new tile config loads anew
        if loaded not in ws.loaded:
            for kernel, grid, args, consts in self.launches:
                if kernel is not None:
                    cco_tl.preload(kernel, *args, grid=grid, extern_libs=ws.libs, **consts)
            self.comm.barrier()  # every rank's kernels are loaded before any of them can wait for a peer
            ws.loaded.add(loaded)
        for kernel, grid, args, consts in self.launches:
            if kernel is None:
                args[0].copy_(args[1])
            else:
                kernel[grid](*args, extern_libs=ws.libs, **consts)

    def _agree(self) -> None:
        mine = repr(self.key).encode()
        text = mine.ljust(512, b" ")[:512]
        seen = self.comm.allgather(text)
        others = [r for r, got in enumerate(seen) if got != text]
        if others:
            raise CCOInvalidUsage(
                f"{self.call}: the ranks disagree on the call (op, transport, shapes, strides, dtype): rank "
                f"{self.me} has {mine.decode()}, rank {others[0]} has {seen[others[0]].decode().rstrip()}")

    # ---------------------------------------------------------- pieces

    def entry(self) -> None:
        K = _kernels()
        self.add(K.entry, (1,), (self.ws.dc.ptr, self.ws.ctrl, self.plan.n_reset, self.world),
                 SDMA=self.sdma, BLOCK=1024, num_warps=4)

    def barrier(self) -> None:
        K = _kernels()
        self.add(K.entry, (1,), (self.ws.dc.ptr, self.ws.ctrl, 0, self.world), SDMA=False, BLOCK=1024, num_warps=4)


def _sequential_entry(c: _Call) -> None:
    """The sequential path overwrites the workspace too: a peer may still be
    reading this rank's send (a fused consumer call) or an SDMA copy may
    still leave it, so it starts with the same barrier as every fused call."""
    c.barrier()
    c.run()


def _producer(call: str, comm: Any, a: Any, b: Any, out: Any, transport: str) -> Any:
    torch = _torch()
    _check_args(call, comm, a, b, transport)
    mode, reduce = PRODUCERS[call]
    world = comm.size
    rows, n = a.shape[0], b.shape[1]
    if mode == "scatter" and rows % world:
        raise CCOInvalidArgument(f"{call}: a has {rows} rows, not a multiple of the {world} ranks")
    c = _Call(call, comm, a, b, transport)
    p = c.plan
    per_slot = p.rows_per_slot
    result_shape = (per_slot, n) if reduce else (world * per_slot, n)
    out = _check_out(call, out, result_shape, a)
    ws = c.ws
    if c.transport == "sequential":
        _sequential_entry(c)
        full = ws.view(p.send_off, a.dtype, (rows, n))
        torch.matmul(a, b, out=full)
        if reduce:
            res = ws.view(p.result_off, a.dtype, result_shape)
            if mode == "scatter":
                comm.reduce_scatter(full, out=res)
            else:
                comm.all_reduce(full, out=res)
        else:
            res = ws.view(p.recv_off, a.dtype, result_shape)
            if mode == "scatter":
                comm.all_to_all(full, out=res)
            else:
                comm.all_gather(full, out=res)
        if out is not None:
            out.copy_(res)
            return out
        return res
    K = _kernels()
    tiles_m, tiles_n = _cdiv(per_slot, BLOCK_M), _cdiv(n, BLOCK_N)
    blocks = world if mode == "scatter" else 1
    c.entry()
    c.add(K.gemm_push, (blocks * tiles_m * tiles_n,),
          (ws.dc.ptr, c.win.handle, ws.ctrl, c.elems, a, b, rows, n, a.shape[1], a.stride(0), a.stride(1),
           b.stride(0), b.stride(1), per_slot, p.send_off, p.recv_off),
          MODE=0 if mode == "scatter" else 1, SDMA=c.sdma, ALIGNED=c.aligned, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
          GROUP_M=GROUP_M, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    recv = ws.view(p.recv_off, a.dtype, (world * per_slot, n))
    c.add(K.finish_wait, (1,), (ws.dc.ptr, c.win.handle, ws.ctrl, per_slot, tiles_n, tiles_m), SDMA=c.sdma,
          PUSH_BLOCK_M=BLOCK_M, num_warps=1)
    if reduce:
        res = out if out is not None else ws.view(p.result_off, a.dtype, result_shape)
        grid = _cdiv(per_slot, REDUCE_BLOCK_M) * _cdiv(n, REDUCE_BLOCK_N)
        c.add(K.reduce_slots, (grid,), (recv, res, per_slot, n, world, res.stride(0), res.stride(1)),
              BLOCK_M=REDUCE_BLOCK_M, BLOCK_N=REDUCE_BLOCK_N, num_warps=4)
        c.run()
        return res
    c.run()
    if out is not None:
        out.copy_(recv)
        return out
    return recv


def _consumer(call: str, comm: Any, a: Any, b: Any, out: Any, transport: str) -> Any:
    torch = _torch()
    _check_args(call, comm, a, b, transport)
    per_dest = CONSUMERS[call]
    world = comm.size
    rows, k, n = a.shape[0], a.shape[1], b.shape[1]
    if per_dest and rows % world:
        raise CCOInvalidArgument(f"{call}: a has {rows} rows, not a multiple of the {world} ranks")
    c = _Call(call, comm, a, b, transport)
    p = c.plan
    per_block = p.rows_per_slot
    out_rows = world * per_block
    out = _check_out(call, out, (out_rows, n), a)
    if out is None:
        out = torch.empty((out_rows, n), dtype=a.dtype, device=a.device)
    ws = c.ws
    send = ws.view(p.send_off, a.dtype, (rows, k))
    if c.transport == "sequential":
        _sequential_entry(c)
        send.copy_(a)
        gathered = ws.view(p.recv_off, a.dtype, (out_rows, k))
        if per_dest:
            comm.all_to_all(send, out=gathered)
        else:
            comm.all_gather(send, out=gathered)
        torch.matmul(gathered, b, out=out)
        return out
    K = _kernels()
    esize = a.element_size()
    tiles_m, tiles_n = _cdiv(per_block, BLOCK_M), _cdiv(n, BLOCK_N)
    chunk_rows = max(BLOCK_M, _cdiv(_cdiv(per_block, 4), BLOCK_M) * BLOCK_M)  # 4 chunks of whole row tiles
    c.entry()  # every rank is done with the previous call's buffers
    c.copy(send, a)  # stage this rank's rows in the window
    if c.sdma:
        c.add(K.sdma_post_rows, (1,), (ws.dc.ptr, c.win.handle, ws.ctrl, per_block, k * esize, p.send_off,
                                       p.recv_off, chunk_rows), PER_DEST=per_dest, num_warps=1)
    else:
        c.barrier()  # every rank has staged its rows
    pull = dict(PER_DEST=per_dest, SDMA=c.sdma, ALIGNED=c.aligned, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, num_warps=NUM_WARPS, num_stages=NUM_STAGES)

    def gemm(first_block: int, blocks: int) -> None:
        c.add(K.gemm_pull, (blocks * tiles_m * tiles_n,),
              (ws.dc.ptr, c.win.handle, ws.ctrl, c.elems, b, out, per_block, n, k, b.stride(0), b.stride(1),
               out.stride(0), out.stride(1), p.send_off, p.recv_off, first_block), **pull)

    if c.sdma:  # the own rows while the copy engines bring the peers'
        gemm(0, 1)
        if world > 1:
            c.add(K.wait_rows, (1,), (ws.dc.ptr, ws.ctrl, _cdiv(per_block, chunk_rows)), num_warps=1)
            gemm(1, world - 1)
    else:
        gemm(0, world)
    c.run()
    return out


def gemm_rs(a: Any, b: Any, comm: Any, out: Any = None, transport: str = "auto") -> Any:
    """reduce_scatter(a @ b) over rows (sum): [M/W, N] on each rank."""
    return _producer("gemm_rs", comm, a, b, out, transport)


def gemm_ar(a: Any, b: Any, comm: Any, out: Any = None, transport: str = "auto") -> Any:
    """all_reduce(a @ b) (sum): [M, N] on each rank."""
    return _producer("gemm_ar", comm, a, b, out, transport)


def gemm_ag(a: Any, b: Any, comm: Any, out: Any = None, transport: str = "auto") -> Any:
    """all_gather(a @ b) along rows: [W*m, N]."""
    return _producer("gemm_ag", comm, a, b, out, transport)


def gemm_a2a(a: Any, b: Any, comm: Any, out: Any = None, transport: str = "auto") -> Any:
    """all_to_all(a @ b): block s of the result (M/W rows) is block `rank`
    of rank s's product."""
    return _producer("gemm_a2a", comm, a, b, out, transport)


def ag_gemm(a: Any, b: Any, comm: Any, out: Any = None, transport: str = "auto") -> Any:
    """all_gather(a) @ b: [W*m, N]; a is this rank's m rows."""
    return _consumer("ag_gemm", comm, a, b, out, transport)


def a2a_gemm(a: Any, b: Any, comm: Any, out: Any = None, transport: str = "auto") -> Any:
    """all_to_all(a) @ b: [M, N]; row block s of the GEMM's input is block
    `rank` of rank s's a."""
    return _consumer("a2a_gemm", comm, a, b, out, transport)
