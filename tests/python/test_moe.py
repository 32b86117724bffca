"""cco.ops (the MoE op) on the host platform: the config's checks, the
struct against the header, one rank's pipeline and its refusals, and the
job of moe_body.py at 1, 2 and 4 ranks against numpy."""
import re

import numpy as np
import pytest

from conftest import REPO, TESTS_DIR, describe, run_ranks

from cco import CCOInvalidArgument
from cco.ops import EpDispatchCombineConfig, EpDispatchCombineOp
from cco.ops.moe import MoeConfigStruct, MoeStatsStruct

HEADER = REPO / "include" / "cco" / "cco_moe.h"


def _fields(struct):
    body = re.search(r"typedef struct \{([^}]*)\} " + struct + ";", HEADER.read_text()).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [m.group(1) for m in re.finditer(r"(\w+);", body)]


def test_structs_match_the_header():
    assert [f[0] for f in MoeConfigStruct._fields_] == _fields("ccoMoeConfig")
    assert [f[0] for f in MoeStatsStruct._fields_] == _fields("ccoMoeStats")


def test_region_and_type_numbers_match_the_header():
    from cco.ops import moe

    text = HEADER.read_text()
    for name, value in (("ccoMoeRecvTokens", moe.RECV_TOKENS), ("ccoMoeCombineInput", moe.COMBINE_INPUT),
                        ("ccoMoeRouting", moe.ROUTING), ("ccoMoeRoutingWeights", moe.ROUTING_WEIGHTS),
                        ("ccoMoeFp8E4M3", moe.DATA_TYPES["fp8"]), ("ccoMoeLowLatency", moe.MODES["low_latency"])):
        assert re.search(rf"\b{name} = {value},", text), name


def _cfg(**kw):
    args = dict(hidden_dim=32, max_num_inp_token_per_rank=4, num_experts_per_rank=2, num_experts_per_token=2)
    args.update(kw)
    return EpDispatchCombineConfig(**args)


@pytest.mark.parametrize("bad", [dict(hidden_dim=1.5), dict(data_type="int8"), dict(mode="fast"),
                                 dict(parts=True), dict(max_recv_tokens=1 << 40)])
def test_config_refused_in_python(bad):
    with pytest.raises(CCOInvalidArgument):
        _cfg(**bad).to_c()


def test_config_refused_by_the_library(comm):
    with pytest.raises(CCOInvalidArgument, match="hidden"):
        EpDispatchCombineOp(_cfg(hidden_dim=30), comm)
    with pytest.raises(CCOInvalidArgument, match="low latency|128"):
        EpDispatchCombineOp(_cfg(mode="low_latency", max_num_inp_token_per_rank=129), comm)


def test_one_rank_pipeline_and_release_with_the_communicator(comm):
    op = EpDispatchCombineOp(_cfg(), comm)
    x = (np.arange(4 * 32, dtype=np.float32).reshape(4, 32).view(np.uint32) >> 16).astype(np.uint16)
    w = np.full((4, 2), 0.5, dtype=np.float32)
    idx = np.array([[0, 1], [1, -1], [-1, -1], [0, 0]], dtype=np.int32)
    recv_x, recv_w, recv_s, recv_i, total = op.dispatch(x, w, None, idx)
    assert int(total[0]) == 3 and recv_s is None
    y = op.combine_in_view()
    y[:3] = recv_x[:3]
    with pytest.raises(CCOInvalidArgument, match="rows"):  # copied in: it must hold every filled slot
        op.combine(np.zeros((2, 32), dtype=np.uint16))
    with pytest.raises(CCOInvalidArgument, match="rows"):
        op.combine(y, np.zeros((2, 2), dtype=np.float32))
    out, out_w = op.combine(y[:3])
    assert np.array_equal(out[[0, 1, 3]], x[[0, 1, 3]]) and not out[2].any()
    assert np.array_equal(out_w, np.where(idx >= 0, w, 0))
    assert op.combine_copies == 0 and op.stats()["dispatches"] == 1
    with pytest.raises(CCOInvalidArgument, match="shape"):
        op.dispatch(x, w[:3], None, idx)
    with pytest.raises(CCOInvalidArgument, match="int32"):
        op.dispatch(x, w, None, idx.astype(np.int64))
    # Left alive: the communicator's destroy (the fixture) releases it.


@pytest.mark.parametrize("n,hosts", [(1, 1), (2, 1), (4, 1), (4, 2)])
def test_pipeline_against_numpy(n, hosts):
    """hosts 2: two virtual hosts of two ranks (GDA between them, LSA inside)."""
    proc = run_ranks(n, [str(TESTS_DIR / "moe_body.py")], timeout=300, prefix=False, hosts=hosts)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and not re.search(r"^FAIL ", text, flags=re.M), describe(proc)
    assert re.search(rf"^moe_body: [1-9][0-9]* ok, 0 failed, {n} ranks$", text, flags=re.M), describe(proc)
