"""The scalar ABI of the device bitcode: one table, the single source of the
C wrappers in ``libcco_device*.bc`` (``cco.ir.wrappers`` generates them) and
of the Triton bindings (``cco.ir.triton``).

Each entry is an extern C function of scalars over the device API of
``cco/cco_device_all.h``, so any compiler that links LLVM bitcode can call it:

- handles and offsets (``const ccoDevComm*``, ``ccoWindow_t``, addresses,
  byte counts, signal values, timeouts): ``uint64``;
- ranks, indexes, enums and statuses: ``int32`` (a counter of -1 is none);
- calls with a side effect return an ``int32`` ``ccoDevStatus_t``.

Template axes of the original C++ API (cooperation scope, GDA doorbell mode,
GDA thread mode) are separate symbols, named
``cco_ir_<family>[_<doorbell>][_<scope>][_<thread mode>]``: a binding picks
the symbol at trace time, so a kernel makes one direct call, which LLVM
inlines. Nothing here is module state: the GDA handle is rebuilt inside each
wrapper from (device communicator, context, doorbell mode), and folds into a
few loads.

Purity is what the binding tells the kernel compiler: a pure entry may be
merged with an identical call or dropped when unused, so only queries of
state that cannot change during a kernel are pure.
"""
from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Dict, Iterator, List, Mapping, Sequence, Tuple

U64 = "uint64"
I64 = "int64"
I32 = "int32"
C_TYPES = {U64: "uint64_t", I64: "int64_t", I32: "int32_t"}

# Axis values: the name in the symbol -> the C enum value.
SCOPES = {"thread": "ccoCoopThread", "warp": "ccoCoopWarp", "block": "ccoCoopBlock"}
DOORBELLS = {
    "immediate": "ccoGdaDoorbellImmediate",
    "deferred": "ccoGdaDoorbellDeferred",
    "caller_ordered": "ccoGdaDoorbellCallerOrdered",
}
THREAD_MODES = {"aggregate": "ccoGdaThreadAggregate", "independent": "ccoGdaThreadIndependent"}
AXES = {"doorbell": DOORBELLS, "scope": SCOPES, "thread_mode": THREAD_MODES}  # symbol order

# A pseudo team kind for the team queries: the team whose members have GDA
# endpoints under the device communicator's connection type.
TEAM_GDA = 4


@dataclass(frozen=True)
class DeviceFunction:
    symbol: str
    family: str
    variant: Tuple[Tuple[str, str], ...]  # ((axis, value), ...)
    params: Tuple[Tuple[str, str], ...]  # ((name, type), ...)
    ret: str
    pure: bool
    body: str  # C statements; the parameters are in scope by name

    @property
    def arg_types(self) -> Tuple[str, ...]:
        return tuple(t for _, t in self.params)


def symbol_name(family: str, **variant: str) -> str:
    parts = [family] + [variant[axis] for axis in AXES if axis in variant]
    return "cco_ir_" + "_".join(parts)


def _expand(family: str, params: Sequence[Tuple[str, str]], ret: str, pure: bool, body: str,
            axes: Mapping[str, Sequence[str]]) -> Iterator[DeviceFunction]:
    """One entry per combination of the axes' values ($scope, $doorbell and
    $thread_mode in the body become the C enum values)."""
    combos: List[Tuple[Tuple[str, str], ...]] = [()]
    for axis in AXES:
        if axis in axes:
            combos = [c + ((axis, v),) for c in combos for v in axes[axis]]
    for combo in combos:
        values = {axis: AXES[axis][v] for axis, v in combo}
        yield DeviceFunction(symbol_name(family, **dict(combo)), family, combo, tuple(params), ret, pure,
                             Template(body).substitute(values))


_TABLE: Dict[str, DeviceFunction] = {}


def _add(family: str, params: Sequence[Tuple[str, str]], ret: str, body: str, *, pure: bool = False,
         **axes: Sequence[str]) -> None:
    for fn in _expand(family, params, ret, pure, body, axes):
        assert fn.symbol not in _TABLE, fn.symbol
        _TABLE[fn.symbol] = fn


ALL_SCOPES = tuple(SCOPES)
ALL_DOORBELLS = tuple(DOORBELLS)
ALL_THREAD_MODES = tuple(THREAD_MODES)

DC = ("dev_comm", U64)
WIN = ("win", U64)
CTX = ("context", I32)
PEER = ("peer", I32)
TIMEOUT = ("timeout_ns", U64)

# ------------------------------------------------ device communicator queries

for _name, _field in (("rank", "rank"), ("world_size", "worldSize"), ("lsa_rank", "lsaRank"),
                      ("lsa_size", "lsaSize"), ("node", "node"), ("node_count", "nNodes")):
    _add(f"devcomm_{_name}", [DC], I32, f"return CCO_IR_DC(dev_comm)->{_field};", pure=True)
for _name, _field in (("lsa_barrier_count", "lsaBarrierCount"), ("barrier_count", "barrierCount"),
                      ("sdma_queue_count", "sdmaQueueCount"), ("gda_context_count", "gdaContextCount"),
                      ("gda_signal_count", "gdaSignalCount"), ("gda_counter_count", "gdaCounterCount"),
                      ("gda_connection_type", "gdaConnectionType")):
    _add(f"devcomm_{_name}", [DC], I32, f"return (int32_t)CCO_IR_DC(dev_comm)->{_field};", pure=True)
# The abort word changes while a kernel runs.
_add("devcomm_aborted", [DC], I32, "return ccoDevCommAborted(CCO_IR_DC(dev_comm));")

# Teams; a kind out of range (or a rank) gives -1.
_TEAM = "const ccoDevComm* dc = CCO_IR_DC(dev_comm);\n  int32_t k = cco_ir_team_kind(dc, team);\n  "
_add("devcomm_team_size", [DC, ("team", I32)], I32, _TEAM + "return k < 0 ? -1 : dc->teams[k].nRanks;",
     pure=True)
_add("devcomm_team_rank", [DC, ("team", I32)], I32, _TEAM + "return k < 0 ? -1 : dc->teams[k].rank;",
     pure=True)
_add("devcomm_team_rank_to_world", [DC, ("team", I32), ("team_rank", I32)], I32,
     _TEAM + "return k < 0 ? -1 : ccoDevTeamRankToWorld(dc, (ccoTeamKind_t)k, team_rank);", pure=True)
_add("devcomm_team_rank_from_world", [DC, ("team", I32), ("world_rank", I32)], I32,
     _TEAM + "return k < 0 ? -1 : ccoDevTeamRankFromWorld(dc, (ccoTeamKind_t)k, world_rank);", pure=True)
_add("devcomm_team_is_member", [DC, ("team", I32), ("world_rank", I32)], I32,
     _TEAM + "return k < 0 ? 0 : ccoDevTeamIsMember(dc, (ccoTeamKind_t)k, world_rank);", pure=True)
_add("devcomm_lsa_ptr_flat", [DC, ("ptr", U64), PEER], U64,
     "return CCO_IR_ADDR(ccoGetLsaPeerPtrFlat(CCO_IR_DC(dev_comm), (const void*)(uintptr_t)ptr, peer));",
     pure=True)

# ------------------------------------------------------------ scopes

_add("coop_rank", [], I32, "return (int32_t)ccoCoopRank($scope);", pure=True, scope=ALL_SCOPES)
_add("coop_size", [], I32, "return (int32_t)ccoCoopSize($scope);", pure=True, scope=ALL_SCOPES)
_add("coop_sync", [], I32, "ccoCoopSync($scope);\n  return ccoDevSuccess;", scope=ALL_SCOPES)

# ------------------------------------------------------------ windows

_add("window_lsa_ptr", [WIN, PEER, ("offset", U64)], U64,
     "return CCO_IR_ADDR(ccoGetLsaPeerPtr(CCO_IR_WIN(win), peer, offset));", pure=True)
_add("window_local_ptr", [WIN, ("offset", U64)], U64,
     "return CCO_IR_ADDR(ccoGetLocalPtr(CCO_IR_WIN(win), offset));", pure=True)
_add("window_size", [WIN], U64, "return CCO_IR_WIN(win)->size;", pure=True)

# ------------------------------------------------------------ signals

SIG = ("signal", U64)
VALUE = ("value", U64)
_add("signal_store", [SIG, VALUE], I32, "ccoSignalStore(CCO_IR_U64P(signal), value);\n  return ccoDevSuccess;")
_add("signal_load", [SIG], U64, "return ccoSignalLoad(CCO_IR_U64P(signal));")
_add("signal_add", [SIG, VALUE], U64, "return ccoSignalAdd(CCO_IR_U64P(signal), value);")
_add("signal_wait_until", [DC, SIG, VALUE, TIMEOUT], I32,
     "return ccoSignalWaitUntil(CCO_IR_DC(dev_comm), CCO_IR_U64P(signal), value, timeout_ns);")
_add("lsa_signal_store", [DC, SIG, VALUE], I32,
     "ccoLsaSignalStore(CCO_IR_DC(dev_comm), CCO_IR_U64P(signal), value);\n  return ccoDevSuccess;")
_add("lsa_signal_load", [DC, SIG], U64, "return ccoLsaSignalLoad(CCO_IR_DC(dev_comm), CCO_IR_U64P(signal));")
_add("lsa_signal_add", [DC, SIG, VALUE], U64,
     "return ccoLsaSignalAdd(CCO_IR_DC(dev_comm), CCO_IR_U64P(signal), value);")
_add("lsa_signal_store_relaxed", [DC, SIG, VALUE], I32,
     "ccoLsaSignalStoreRelaxed(CCO_IR_DC(dev_comm), CCO_IR_U64P(signal), value);\n  return ccoDevSuccess;")
_add("lsa_signal_add_relaxed", [DC, SIG, VALUE], U64,
     "return ccoLsaSignalAddRelaxed(CCO_IR_DC(dev_comm), CCO_IR_U64P(signal), value);")

# ------------------------------------------------------------ LSA barriers
# A session lives in one call: it opens, acts and stores its epoch back, so
# the epoch never has to cross from one extern call to the next.

INDEX = ("index", I32)
_LSA_OPEN = "ccoLsaBarrierSession s = ccoLsaBarrierSessionInit(CCO_IR_DC(dev_comm), (uint32_t)index, $scope);\n  "
_add("lsa_barrier_sync", [DC, INDEX, TIMEOUT], I32,
     _LSA_OPEN + "ccoDevStatus_t st = ccoLsaBarrierSyncTimeout(&s, timeout_ns);\n"
     "  ccoLsaBarrierSessionEnd(&s);\n  return st;", scope=ALL_SCOPES)
_add("lsa_barrier_arrive", [DC, INDEX], I32,
     _LSA_OPEN + "if (!s.inbox) return ccoDevInvalid;\n  ccoLsaBarrierArrive(&s);\n"
     "  ccoLsaBarrierSessionEnd(&s);\n  return ccoDevSuccess;", scope=ALL_SCOPES)
# After an arrive, the stored epoch is the one to wait for.
_add("lsa_barrier_wait", [DC, INDEX, TIMEOUT], I32,
     _LSA_OPEN + "return ccoLsaBarrierWaitTimeout(&s, timeout_ns);", scope=ALL_SCOPES)

# ------------------------------------------------------------ world barrier

_add("barrier_sync", [DC, CTX, INDEX, TIMEOUT], I32,
     "const ccoDevComm* dc = CCO_IR_DC(dev_comm);\n"
     "  ccoGda g = ccoGdaHandle(dc, (uint32_t)context, ccoGdaDoorbellImmediate);\n"
     "  ccoBarrierSession s = ccoBarrierSessionInit(dc, &g, (uint32_t)index, $scope);\n"
     "  ccoDevStatus_t st = ccoBarrierSyncTimeout(&s, timeout_ns);\n"
     "  ccoBarrierSessionEnd(&s);\n  return st;", scope=ALL_SCOPES)

# ------------------------------------------------------------ SDMA

QUEUE = ("queue", I32)
DST = [("dst_win", U64), ("dst_off", U64)]
SRC = [("src_win", U64), ("src_off", U64)]
NBYTES = ("nbytes", U64)
_add("sdma_put", [DC, PEER, *DST, *SRC, NBYTES, QUEUE, ("signal", I32)], I32,
     "return ccoSdmaPut(CCO_IR_DC(dev_comm), peer, CCO_IR_WIN(dst_win), dst_off, CCO_IR_WIN(src_win), src_off,\n"
     "                    nbytes, (uint32_t)queue, signal ? ccoSdmaSignalRemote : ccoSdmaSignalNone, $scope);",
     scope=ALL_SCOPES)
_add("sdma_get", [DC, PEER, *DST, *SRC, NBYTES, QUEUE], I32,
     "return ccoSdmaGet(CCO_IR_DC(dev_comm), peer, CCO_IR_WIN(dst_win), dst_off, CCO_IR_WIN(src_win), src_off,\n"
     "                    nbytes, (uint32_t)queue, $scope);", scope=ALL_SCOPES)
_add("sdma_commit", [DC, PEER, QUEUE], I32,
     "return ccoSdmaCommit(CCO_IR_DC(dev_comm), peer, (uint32_t)queue, $scope);", scope=ALL_SCOPES)
SRC_RANK = ("src", I32)
_add("sdma_wait_signal", [DC, SRC_RANK, QUEUE, ("expected", U64), TIMEOUT], I32,
     "return ccoSdmaWaitSignal(CCO_IR_DC(dev_comm), src, (uint32_t)queue, expected, timeout_ns, $scope);",
     scope=ALL_SCOPES)
_add("sdma_read_signal", [DC, SRC_RANK, QUEUE], U64,
     "return ccoSdmaReadSignal(CCO_IR_DC(dev_comm), src, (uint32_t)queue);")
_add("sdma_signal_ptr", [DC, SRC_RANK, QUEUE], U64,
     "return CCO_IR_ADDR(ccoSdmaSignalPtr(CCO_IR_DC(dev_comm), src, (uint32_t)queue));", pure=True)
_add("sdma_quiet", [DC, PEER], I32, "return ccoSdmaQuiet(CCO_IR_DC(dev_comm), peer, $scope);", scope=ALL_SCOPES)
_add("sdma_quiet_queue", [DC, PEER, QUEUE], I32,
     "return ccoSdmaQuietQueue(CCO_IR_DC(dev_comm), peer, (uint32_t)queue, $scope);", scope=ALL_SCOPES)
_add("sdma_quiet_timeout", [DC, PEER, TIMEOUT], I32,
     "return ccoSdmaQuietTimeout(CCO_IR_DC(dev_comm), peer, timeout_ns, $scope);", scope=ALL_SCOPES)
_add("sdma_quiet_queue_timeout", [DC, PEER, QUEUE, TIMEOUT], I32,
     "return ccoSdmaQuietQueueTimeout(CCO_IR_DC(dev_comm), peer, (uint32_t)queue, timeout_ns, $scope);",
     scope=ALL_SCOPES)

# ------------------------------------------------------------ GDA

_GDA = "ccoGda g = ccoGdaHandle(CCO_IR_DC(dev_comm), (uint32_t)context, $doorbell);\n  "
_GDA0 = "ccoGda g = ccoGdaHandle(CCO_IR_DC(dev_comm), 0, ccoGdaDoorbellImmediate);\n  "
SIGNAL_SPEC = [("signal_op", I32), ("signal_id", I32), ("signal_val", U64)]
COUNTER = ("counter", I32)
_SIG = "cco_ir_signal(signal_op, signal_id, signal_val)"

_add("gda_put", [DC, CTX, PEER, *DST, *SRC, NBYTES, *SIGNAL_SPEC, COUNTER], I32,
     _GDA + "return ccoGdaPut(&g, peer, CCO_IR_WIN(dst_win), dst_off, CCO_IR_WIN(src_win), src_off, nbytes,\n"
     f"                   {_SIG}, (uint32_t)counter, $scope, $thread_mode);",
     thread_mode=ALL_THREAD_MODES, doorbell=ALL_DOORBELLS, scope=ALL_SCOPES)
_add("gda_put_value", [DC, CTX, PEER, *DST, ("value", U64), ("size", I32), *SIGNAL_SPEC, COUNTER], I32,
     _GDA + "return ccoGdaPutValue(&g, peer, CCO_IR_WIN(dst_win), dst_off, value, (uint32_t)size,\n"
     f"                        {_SIG}, (uint32_t)counter, $scope, $thread_mode);",
     thread_mode=ALL_THREAD_MODES, doorbell=ALL_DOORBELLS, scope=ALL_SCOPES)
_add("gda_get", [DC, CTX, PEER, *DST, *SRC, NBYTES, COUNTER], I32,
     _GDA + "return ccoGdaGet(&g, peer, CCO_IR_WIN(dst_win), dst_off, CCO_IR_WIN(src_win), src_off, nbytes,\n"
     "                   (uint32_t)counter, $scope, $thread_mode);", thread_mode=ALL_THREAD_MODES, doorbell=ALL_DOORBELLS, scope=ALL_SCOPES)
# A caller-ordered handle has no standalone signal: its puts carry theirs.
_add("gda_signal", [DC, CTX, PEER, *SIGNAL_SPEC], I32,
     _GDA + f"return ccoGdaSignal(&g, peer, {_SIG}, $scope);",
     doorbell=("immediate", "deferred"), scope=ALL_SCOPES)
_add("gda_counter", [DC, CTX, PEER, COUNTER], I32,
     _GDA + "return ccoGdaCounter(&g, peer, (uint32_t)counter, $scope);", doorbell=ALL_DOORBELLS, scope=ALL_SCOPES)
# A flush always rings (it posts a fence), so it is the same in every
# doorbell mode: one symbol per scope serves the three handles.
_FLUSH = "ccoGda g = ccoGdaHandle(CCO_IR_DC(dev_comm), (uint32_t)context, ccoGdaDoorbellImmediate);\n  "
_add("gda_flush", [DC, CTX], I32, _FLUSH + "return ccoGdaFlush(&g, $scope);", scope=ALL_SCOPES)
_add("gda_flush_peer", [DC, CTX, PEER], I32, _FLUSH + "return ccoGdaFlushPeer(&g, peer, $scope);",
     scope=ALL_SCOPES)
# The request crosses to ccoGdaWait as one int64: the ticket (>= 0, held by
# the scope's rank 0; 0 in its other threads), or -status on failure.
_add("gda_flush_async", [DC, CTX, PEER], I64,
     _FLUSH + "ccoGdaRequest req;\n  req.ticket = 0, req.context = 0, req.valid = 0;\n"
     "  ccoDevStatus_t st = ccoGdaFlushAsync(&g, peer, &req, $scope);\n"
     "  return st == ccoDevSuccess ? (int64_t)req.ticket : -(int64_t)st;", scope=ALL_SCOPES)
_add("gda_wait", [DC, CTX, ("request", I64)], I32,
     _FLUSH + "ccoGdaRequest req;\n  req.ticket = (uint64_t)request, req.context = (uint32_t)context;\n"
     "  req.valid = request >= 0;\n  return ccoGdaWait(&g, &req, $scope);", scope=ALL_SCOPES)
# Signals and counters belong to the device communicator, not a context.
SIGNAL_ID = ("signal_id", I32)
COUNTER_ID = ("counter_id", I32)
EXPECTED = ("expected", U64)
_add("gda_wait_signal", [DC, SIGNAL_ID, EXPECTED, TIMEOUT], I32,
     _GDA0 + "return ccoGdaWaitSignal(&g, (uint32_t)signal_id, expected, timeout_ns, $scope);", scope=ALL_SCOPES)
_add("gda_read_signal", [DC, SIGNAL_ID], U64, _GDA0 + "return ccoGdaReadSignal(&g, (uint32_t)signal_id);")
_add("gda_reset_signal", [DC, SIGNAL_ID], I32,
     _GDA0 + "ccoGdaResetSignal(&g, (uint32_t)signal_id);\n  return ccoDevSuccess;")
_add("gda_signal_ptr", [DC, SIGNAL_ID], U64,
     _GDA0 + "return CCO_IR_ADDR(ccoGdaSignalPtr(&g, (uint32_t)signal_id));", pure=True)
_add("gda_wait_counter", [DC, COUNTER_ID, EXPECTED, TIMEOUT], I32,
     _GDA0 + "return ccoGdaWaitCounter(&g, (uint32_t)counter_id, expected, timeout_ns, $scope);",
     scope=ALL_SCOPES)
_add("gda_read_counter", [DC, COUNTER_ID], U64, _GDA0 + "return ccoGdaReadCounter(&g, (uint32_t)counter_id);")
_add("gda_reset_counter", [DC, COUNTER_ID], I32,
     _GDA0 + "ccoGdaResetCounter(&g, (uint32_t)counter_id);\n  return ccoDevSuccess;")
_add("gda_counter_ptr", [DC, COUNTER_ID], U64,
     _GDA0 + "return CCO_IR_ADDR(ccoGdaCounterPtr(&g, (uint32_t)counter_id));", pure=True)
_add("gda_has_peer", [DC, PEER], I32, _GDA0 + "return ccoGdaHasPeer(&g, peer);", pure=True)
_add("gda_team_peer", [DC, ("team_index", I32)], I32,
     "return ccoGdaTeamPeer(CCO_IR_DC(dev_comm), team_index);", pure=True)
# The GDA barrier: warp or block scope, on an Immediate handle.
_add("gda_barrier_sync", [DC, CTX, INDEX, TIMEOUT], I32,
     "const ccoDevComm* dc = CCO_IR_DC(dev_comm);\n"
     "  ccoGda g = ccoGdaHandle(dc, (uint32_t)context, ccoGdaDoorbellImmediate);\n"
     "  ccoGdaBarrierSession s = ccoGdaBarrierSessionInit(dc, &g, (uint32_t)index, $scope);\n"
     "  return ccoGdaBarrierSyncTimeout(&s, timeout_ns);", scope=("warp", "block"))

# ------------------------------------------------------------ collectives
# The building blocks of cco/cco_coll.h, block scope: every thread of a
# program calls with the same arguments, and the program passes its part
# (tl.program_id) of n_parts (the grid); all parts of every rank must be
# resident at once. The ccoCollArgs is built here from scalars; a constant
# dtype and op fold the block's switch on them once the wrapper is inlined.
_COLL = [DC, ("send_win", U64), ("send_off", U64), ("recv_win", U64), ("recv_off", U64), ("count", U64),
         ("dtype", I32), ("op", I32), ("root", I32), ("scratch_win", U64), ("scratch_off", U64),
         ("scratch_bytes", U64), ("barrier_base", I32), ("signature", U64)]
_PART = [("part", I32), ("n_parts", I32)]
_COLL_ARGS = ("ccoCollArgs a = cco_ir_coll_args(send_win, send_off, recv_win, recv_off, count, dtype, op, root,\n"
              "                                  scratch_win, scratch_off, scratch_bytes, barrier_base, signature, 0);\n  ")
for _name, _block in (("all_reduce_one_shot", "ccoDevAllReduceOneShot"), ("all_reduce_ll", "ccoDevAllReduceLL"),
                      ("all_reduce_two_shot", "ccoDevAllReduceTwoShot"), ("all_gather", "ccoDevAllGather"),
                      ("reduce_scatter", "ccoDevReduceScatter"), ("all_to_all", "ccoDevAlltoAll"),
                      ("broadcast", "ccoDevBroadcast")):
    _add(f"coll_{_name}", _COLL + _PART, I32,
         _COLL_ARGS + f"return {_block}(CCO_IR_DC(dev_comm), &a, (uint32_t)part, (uint32_t)n_parts);")
_add("coll_all_to_allv", _COLL + [("v_table_off", U64)] + _PART, I32,
     _COLL_ARGS + "a.vTableOff = v_table_off;\n"
     "  return ccoDevAlltoAllv(CCO_IR_DC(dev_comm), &a, (uint32_t)part, (uint32_t)n_parts);")
_add("coll_scratch_bytes", [("lsa_size", I32), ("n_parts", I32)], U64,
     "return ccoDevCollScratchBytes(lsa_size, (uint32_t)n_parts);", pure=True)

CCO_DEVICE_FUNCTIONS: Mapping[str, DeviceFunction] = _TABLE
