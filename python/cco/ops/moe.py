"""MoE dispatch and combine (expert parallelism), zero copy: the blog's
``EpDispatchCombineOp`` over the C op of ``cco/cco_moe.h`` (docs/moe.md).

    from cco.ops import EpDispatchCombineConfig, EpDispatchCombineOp

    op = EpDispatchCombineOp(config, comm)
    recv_x, recv_w, recv_s, recv_i, total_recv, routing = op.dispatch(
        tokens, weights, scales, indices, return_routing=True)
    expert_output = op.combine_in_view()[:total]      # the expert writes here
    out, out_weights = op.combine(expert_output, weights, routing=routing)

Every tensor the op returns is a view of its arena (symmetric memory), in
the framework of the tokens passed to dispatch: torch tensors (CPU on the
host platform, CUDA on a GPU), cupy arrays, or numpy arrays on the host
platform (bf16 rows as uint16, fp8 rows as uint8: numpy has neither type).
Nothing is copied but what the C op copies; a combine input that is not
:meth:`EpDispatchCombineOp.combine_in_view` is copied into it first, which
``op.combine_copies`` counts and the library logs (``CCO_DEBUG=INFO``).
"""
from __future__ import annotations

import ctypes
import dataclasses
import sys
from typing import Any, Dict, Optional, Tuple

from .. import _lib
from ..collectives import Buffer, describe, stream_handle
from ..errors import CCOInvalidArgument, CCOInvalidUsage, error_for
from ..resources import Resource
from ..views import PLATFORM_CUDA, PLATFORM_HOST, MemoryRegion


class MoeConfigStruct(ctypes.Structure):
    """``ccoMoeConfig`` (cco/cco_moe.h), field for field."""

    _fields_ = [("hidden", ctypes.c_int), ("maxTokensPerRank", ctypes.c_int), ("expertsPerRank", ctypes.c_int),
                ("topk", ctypes.c_int), ("dispatchType", ctypes.c_int), ("mode", ctypes.c_int),
                ("maxRecvTokens", ctypes.c_int), ("parts", ctypes.c_int)]


class MoeStatsStruct(ctypes.Structure):
    """``ccoMoeStats``."""

    _fields_ = [("dispatches", ctypes.c_uint64), ("combines", ctypes.c_uint64), ("combineCopies", ctypes.c_uint64),
                ("parts", ctypes.c_uint32), ("maxRecvTokens", ctypes.c_uint32), ("arenaBytes", ctypes.c_size_t)]


# ccoMoeRegion_t
RECV_TOKENS, RECV_SCALES, RECV_WEIGHTS, RECV_INDICES, RECV_SOURCES, RECV_COUNT = range(6)
COMBINE_INPUT, COMBINE_WEIGHTS, ROUTING, ROUTING_INDICES, ROUTING_WEIGHTS = range(6, 11)

DATA_TYPES = {"bf16": 0, "bfloat16": 0, "fp8": 1, "fp8_e4m3": 1, "float8_e4m3fn": 1}
MODES = {"throughput": 0, "low_latency": 1}
SCALE_BLOCK = 128  # CCO_MOE_SCALE_BLOCK

def _fn(name: str) -> Any:
    return _lib.function(name)


@dataclasses.dataclass
class EpDispatchCombineConfig:
    """What every rank passes alike (the names are mori's; ``ccoMoeConfig``).

    data_type: ``"bf16"`` or ``"fp8"`` (e4m3 with one fp32 scale per 128
    elements), or the torch dtype; mode: ``"throughput"`` or
    ``"low_latency"`` (at most 128 tokens per rank); max_recv_tokens: slots
    per rank, 0 for ranks x tokens per rank (never overflows); parts: blocks
    (CPU threads) per call, 0 for the mode's default."""

    hidden_dim: int
    max_num_inp_token_per_rank: int
    num_experts_per_rank: int
    num_experts_per_token: int
    data_type: Any = "bf16"
    mode: str = "throughput"
    max_recv_tokens: int = 0
    parts: int = 0

    def to_c(self) -> MoeConfigStruct:
        for name in ("hidden_dim", "max_num_inp_token_per_rank", "num_experts_per_rank", "num_experts_per_token",
                     "max_recv_tokens", "parts"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise CCOInvalidArgument(f"EpDispatchCombineConfig.{name} must be an int, not {value!r}")
            if not -(1 << 31) <= value < (1 << 31):
                raise CCOInvalidArgument(f"EpDispatchCombineConfig.{name} = {value} does not fit an int")
        dtype = str(self.data_type).rpartition(".")[2]
        if dtype not in DATA_TYPES:
            raise CCOInvalidArgument(f"EpDispatchCombineConfig.data_type {self.data_type!r}: 'bf16' or 'fp8'")
        if self.mode not in MODES:
            raise CCOInvalidArgument(f"EpDispatchCombineConfig.mode {self.mode!r}: 'throughput' or 'low_latency'")
        return MoeConfigStruct(self.hidden_dim, self.max_num_inp_token_per_rank, self.num_experts_per_rank,
                               self.num_experts_per_token, DATA_TYPES[dtype], MODES[self.mode],
                               self.max_recv_tokens, self.parts)

    @property
    def fp8(self) -> bool:
        return DATA_TYPES.get(str(self.data_type).rpartition(".")[2]) == 1


class EpDispatchCombineRouting:
    """What combine needs of its dispatch: which one it was (combine refuses
    another's), the tokens sent, and views of the routing (slot of token t at
    rank d, -1 none; the expert ids) for inspection."""

    def __init__(self, op: "EpDispatchCombineOp", serial: int, num_tokens: int, slots: Any, indices: Any) -> None:
        self.op, self.serial, self.num_tokens = op, serial, num_tokens
        self.slots, self.indices = slots, indices

    def __repr__(self) -> str:
        return f"EpDispatchCombineRouting(dispatch {self.serial}, {self.num_tokens} tokens)"


class EpDispatchCombineOp(Resource):
    """The op: an arena of symmetric memory on every rank and the two calls.
    Making it is collective (every rank, the same config); so is
    :meth:`release` (also ``with``, or the communicator's destroy). Calls
    alternate: dispatch, combine, dispatch, ... on every rank."""

    kind = "MoE op"

    def __init__(self, config: EpDispatchCombineConfig, comm: Any) -> None:
        if not isinstance(config, EpDispatchCombineConfig):
            raise CCOInvalidArgument(f"config must be an EpDispatchCombineConfig, not {type(config).__name__}")
        comm._check_alive()
        super().__init__(comm)
        self.config = config
        c = config.to_c()
        h = ctypes.c_void_p()
        comm._check(_fn("ccoMoeCreate")(comm._h, ctypes.addressof(c), ctypes.byref(h)))
        self._h = h.value
        self._serial = 0  # dispatches made
        self._combined = 0  # combines made
        self._dispatch_weights: Optional[int] = None  # address of the last dispatch's weights
        self._num_tokens = 0
        self._like = "numpy" if comm.platform == PLATFORM_HOST else "torch"
        # The arena never moves, so its regions and the views of them are made once: a torch view
        # costs tens of us of host time, and an eager dispatch returns five of them.
        self._regions: Dict[int, MemoryRegion] = {}
        self._views: Dict[Tuple[int, str, str, Tuple[int, ...]], Any] = {}
        self._max_recv: Optional[int] = None
        comm._track(self)

    # ------------------------------------------------------------ life

    def _release_c(self) -> int:
        self._views.clear()
        self._regions.clear()
        destroy = _fn("ccoMoeDestroy")
        return destroy(self._h)

    def release(self) -> None:
        """Releases the arena and the op (collective)."""
        self._check_alive()
        self._comm._release(self)

    # ------------------------------------------------------------ views

    def region(self, which: int) -> MemoryRegion:
        """Region `which` (``RECV_TOKENS`` ...) of this rank's arena, to take views of."""
        self._check_alive()
        region = self._regions.get(which)
        if region is None:
            ptr, size = ctypes.c_void_p(), ctypes.c_size_t()
            self._check(_fn("ccoMoeRegion")(self._h, which, ctypes.byref(ptr), ctypes.byref(size)))
            region = MemoryRegion(ptr.value or 0, size.value, self._comm.platform, owner=self,
                                  device=self._comm.cuda_device if self._comm.platform == PLATFORM_CUDA else None)
            self._regions[which] = region
        return region

    def _view(self, which: int, dtype: str, shape: Tuple[int, ...]) -> Any:
        key = (which, self._like, dtype, shape)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = self._make_view(which, dtype, shape)
        return view

    def _make_view(self, which: int, dtype: str, shape: Tuple[int, ...]) -> Any:
        region = self.region(which)
        like = self._like
        if like == "numpy":
            raw = {"bfloat16": "uint16", "float8_e4m3fn": "uint8"}.get(dtype, dtype)
            return region.numpy(raw, shape)
        if like == "cupy":
            raw = {"bfloat16": "uint16", "float8_e4m3fn": "uint8"}.get(dtype, dtype)
            return region.cupy(raw, shape)
        torch = sys.modules["torch"]
        return region.torch(getattr(torch, dtype), shape)

    @property
    def max_recv_tokens(self) -> int:
        if self._max_recv is None:  # fixed when the op is made
            self._max_recv = self.stats()["max_recv_tokens"]
        return self._max_recv

    def combine_in_view(self) -> Any:
        """[max recv tokens, hidden] bf16: where the expert writes its rows so
        that combine copies nothing."""
        return self._view(COMBINE_INPUT, "bfloat16", (self.max_recv_tokens, self.config.hidden_dim))

    # ------------------------------------------------------------ calls

    def _check(self, res: int) -> None:
        if res != _lib.SUCCESS:
            raise error_for(res, _lib.last_error(self._comm._h))

    def _input(self, obj: Any, what: str, dtypes: Tuple[str, ...], rows: Optional[int], cols: int) -> Buffer:
        buf = describe(obj, what)
        if buf.dtype not in dtypes:
            raise CCOInvalidArgument(f"dispatch: {what} is {buf.dtype}; it takes {' or '.join(dtypes)}")
        if len(buf.shape) != 2 or buf.shape[1] != cols or (rows is not None and buf.shape[0] != rows):
            want = f"[{rows if rows is not None else 'n'}, {cols}]"
            raise CCOInvalidArgument(f"dispatch: {what} has shape {list(buf.shape)}, it needs {want}")
        if not buf.contiguous:
            raise CCOInvalidArgument(f"dispatch: {what} is not contiguous")
        where = "cpu" if self._comm.platform == PLATFORM_HOST else "cuda"
        if buf.location != where:
            raise CCOInvalidArgument(f"dispatch: {what} is {buf.location} memory; this op's platform needs {where}")
        return buf

    def _stream(self, stream: Any, buf: Buffer) -> Optional[int]:
        if stream is not None:
            return stream_handle(stream)
        torch = sys.modules.get("torch")
        if buf.kind == "torch tensor" and buf.location == "cuda" and torch is not None:
            return stream_handle(torch.cuda.current_stream())
        return None

    def dispatch(self, tokens: Any, weights: Any, scales: Any, indices: Any, return_routing: bool = False,
                 stream: Any = None) -> Tuple[Any, ...]:
        """Sends every token once to each rank that owns one of its experts
        (expert e lives on rank e // experts per rank; -1 drops a choice):
        tokens [n, hidden] bf16 or fp8, weights [n, k] float32, scales
        [n, hidden / 128] float32 (fp8; None for bf16), indices [n, k] int32.
        Returns views of this rank's arena: (recv_x [slots, hidden], recv_w
        [slots, k], recv_s [slots, hidden / 128] or None, recv_i [slots, k]
        int32, total_recv [1] int32 (the slots filled, valid once the stream
        ran the dispatch)), plus the routing with return_routing."""
        self._check_alive()
        cfg = self.config
        h, k = cfg.hidden_dim, cfg.num_experts_per_token
        tok = self._input(tokens, "tokens", ("float8_e4m3fn", "uint8") if cfg.fp8 else ("bfloat16", "uint16"), None, h)
        n = tok.shape[0]
        w = self._input(weights, "weights", ("float32",), n, k)
        idx = self._input(indices, "indices", ("int32",), n, k)
        s_ptr = None
        if cfg.fp8:
            if scales is None:
                raise CCOInvalidArgument("dispatch: fp8 tokens need their scales ([n, hidden / 128] float32)")
            s_ptr = self._input(scales, "scales", ("float32",), n, h // SCALE_BLOCK).ptr
        elif scales is not None:
            raise CCOInvalidArgument("dispatch: bf16 tokens have no scales: pass None")
        self._like = {"torch tensor": "torch", "cupy array": "cupy"}.get(tok.kind, "numpy")
        fn = _fn("ccoMoeDispatch")
        self._check(fn(self._h, tok.ptr, w.ptr, s_ptr, idx.ptr, n, self._stream(stream, tok)))
        self._serial += 1
        self._num_tokens = n
        self._dispatch_weights = w.ptr
        slots = self.max_recv_tokens
        views = (self._view(RECV_TOKENS, "float8_e4m3fn" if cfg.fp8 else "bfloat16", (slots, h)),
                 self._view(RECV_WEIGHTS, "float32", (slots, k)),
                 self._view(RECV_SCALES, "float32", (slots, h // SCALE_BLOCK)) if cfg.fp8 else None,
                 self._view(RECV_INDICES, "int32", (slots, k)),
                 self._view(RECV_COUNT, "int32", (1,)))
        if not return_routing:
            return views
        nranks = self._comm.size
        routing = EpDispatchCombineRouting(self, self._serial, n,
                                           self._view(ROUTING, "int32", (cfg.max_num_inp_token_per_rank, nranks))[:n],
                                           self._view(ROUTING_INDICES, "int32", (cfg.max_num_inp_token_per_rank, k))[:n])
        return views + (routing,)

    def combine(self, expert_output: Any, weights: Any = None, routing: Optional[EpDispatchCombineRouting] = None,
                out: Any = None, out_weights: Any = None, stream: Any = None) -> Tuple[Any, Any]:
        """Gathers each of this rank's tokens back: the sum (fp32, in rank
        order, rounded once to bf16) of the rows the ranks it went to hold for
        it, and for each choice the weight of its owner. expert_output
        [rows, hidden] bf16 (rows: the slots filled), best the view of
        :meth:`combine_in_view` (else copied in, and counted); weights: None
        or the dispatch's own weights (the dispatched ones), or [rows, k]
        float32 per received slot. Returns (out [n, hidden] bf16, out_weights
        [n, k] float32), new unless passed in."""
        self._check_alive()
        if routing is not None and (routing.op is not self or routing.serial != self._serial):
            raise CCOInvalidUsage(f"combine: the routing is of {routing!r}, not of this op's last dispatch "
                                  f"({self._serial})")
        if self._combined == self._serial:
            raise CCOInvalidUsage("combine: no dispatch to combine (calls alternate: dispatch, combine, ...)")
        cfg = self.config
        h, k, n = cfg.hidden_dim, cfg.num_experts_per_token, self._num_tokens
        eo = describe(expert_output, "expert_output")
        if eo.dtype not in ("bfloat16", "uint16") or len(eo.shape) != 2 or eo.shape[1] != h or not eo.contiguous:
            raise CCOInvalidArgument(f"combine: expert_output is {eo.text()}; it takes contiguous [rows, {h}] bf16")
        if eo.ptr != self.region(COMBINE_INPUT).ptr:
            self._need_rows(eo, "expert_output")  # the op copies it in: every received row must be there
        w_ptr = None
        if weights is not None:
            wb = describe(weights, "weights")
            if wb.ptr != self._dispatch_weights:
                if wb.dtype != "float32" or len(wb.shape) != 2 or wb.shape[1] != k or not wb.contiguous:
                    raise CCOInvalidArgument(f"combine: weights is {wb.text()}; it takes contiguous [rows, {k}] "
                                             "float32 (or the dispatch's own weights)")
                if wb.ptr != self.region(COMBINE_WEIGHTS).ptr:
                    self._need_rows(wb, "weights")
                w_ptr = wb.ptr
        out = self._output(out, eo, (n, h), "bfloat16", "out")
        out_weights = self._output(out_weights, eo, (n, k), "float32", "out_weights")
        ob, owb = describe(out, "out"), describe(out_weights, "out_weights")
        fn = _fn("ccoMoeCombine")
        self._check(fn(self._h, eo.ptr, w_ptr, ob.ptr if n else None, owb.ptr if n else None,
                       self._stream(stream, eo)))
        self._combined = self._serial
        return out, out_weights

    def _need_rows(self, buf: Buffer, what: str) -> None:
        """A buffer combine copies from holds a row per received slot. The host platform knows the
        count once dispatch returned; on a GPU only the device does, so every slot must be there."""
        if self._comm.platform == PLATFORM_HOST:
            need, why = int(self.region(RECV_COUNT).numpy("int32", (1,))[0]), "the slots the dispatch filled"
        else:
            need, why = self.max_recv_tokens, ("every slot (on a GPU the count is known on the device only; "
                                               "combine_in_view() needs no copy at all)")
        if buf.shape[0] < need:
            raise CCOInvalidArgument(f"combine: {what} has {buf.shape[0]} rows; combine copies it in and needs "
                                     f"{need}: {why}")

    def _output(self, given: Any, like: Buffer, shape: Tuple[int, int], dtype: str, what: str) -> Any:
        if given is not None:
            b = describe(given, what)
            raw = {"bfloat16": ("bfloat16", "uint16")}.get(dtype, (dtype,))
            if b.dtype not in raw or tuple(b.shape) != shape or not b.contiguous:
                raise CCOInvalidArgument(f"combine: {what} is {b.text()}; it takes contiguous {list(shape)} {dtype}")
            return given
        if like.kind == "torch tensor":
            torch = sys.modules["torch"]
            t = like.obj
            return torch.empty(shape, dtype=getattr(torch, dtype), device=t.device)
        if like.kind == "cupy array":
            cupy = sys.modules["cupy"]
            return cupy.empty(shape, dtype={"bfloat16": "uint16"}.get(dtype, dtype))
        import numpy

        return numpy.empty(shape, dtype={"bfloat16": "uint16"}.get(dtype, dtype))

    # ------------------------------------------------------------ state

    def check(self) -> None:
        """Raises what the last calls found on the GPU (bad expert ids, an
        overflow, a wait that gave up); the host platform raises them from
        the calls themselves."""
        self._check_alive()
        self._check(_fn("ccoMoeCheck")(self._h))

    def stats(self) -> Dict[str, int]:
        self._check_alive()
        st = MoeStatsStruct()
        self._check(_fn("ccoMoeGetStats")(self._h, ctypes.addressof(st)))
        return {"dispatches": st.dispatches, "combines": st.combines, "combine_copies": st.combineCopies,
                "parts": st.parts, "max_recv_tokens": st.maxRecvTokens, "arena_bytes": st.arenaBytes}

    @property
    def combine_copies(self) -> int:
        """Combines whose input was not :meth:`combine_in_view` (each copied it in)."""
        return self.stats()["combine_copies"]
