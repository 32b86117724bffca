"""cco.ops.fused without a GPU: the workspace layout, the transport rule,
the argument checks (against a stand-in for torch, which this suite does
not import) and the refusal on the host platform. The kernels themselves
compile in device.triton (tests/scripts/triton_compile_check.py) and run in
tests/gpu/test_fused_gpu.py."""
import types

import pytest

from cco import CCOInvalidArgument, CCOUnsupported
from cco.ops import fused


class FakeTensor:
    def __init__(self, shape, dtype="bf16", cuda=True, device="cuda:0"):
        self.shape, self.dtype, self.is_cuda, self.device = tuple(shape), dtype, cuda, device

    def dim(self):
        return len(self.shape)

    def element_size(self):
        return 2

    def stride(self):
        return (self.shape[1], 1)


FAKE_TORCH = types.SimpleNamespace(Tensor=FakeTensor, bfloat16="bf16", float16="fp16",
                                   cuda=types.SimpleNamespace(is_current_stream_capturing=lambda: False))


class FakeComm:
    def __init__(self, size=4, rank=0, platform="cuda", lsa_size=None):
        self.size, self.rank, self.platform = size, rank, platform
        self.lsa_size = size if lsa_size is None else lsa_size
        self.alive = True

    def _check_alive(self):
        pass


@pytest.fixture
def fake_torch(monkeypatch):
    monkeypatch.setattr(fused, "_torch", lambda: FAKE_TORCH)


@pytest.mark.parametrize("op", fused.OPS)
@pytest.mark.parametrize("transport", ["lsa", "sdma", "sequential"])
def test_plan_regions_are_disjoint_and_aligned(op, transport):
    world, rows, k, n = 4, 1000, 520, 392
    p = fused.plan(op, transport, rows, n, k, 2, world)
    spans = [(0, p.ctrl_bytes), (p.send_off, p.send_bytes), (p.recv_off, p.recv_bytes),
             (p.result_off, p.result_bytes)]
    for off, _ in spans:
        assert off % fused.ALIGN == 0
    for (a, na), (b, _) in zip(spans, spans[1:]):
        assert a + na <= b, f"{op} {transport}: regions overlap: {spans}"
    assert p.total >= p.result_off + p.result_bytes
    # ctrl holds the header (error word, SDMA bases) and every counter the kernels reset
    assert p.ctrl_bytes >= (fused.CTRL_HEADER_WORDS + p.n_reset) * 8


def test_plan_sizes():
    # gemm_rs: W slots of M/W rows x N arrive; the reduced block is the result
    p = fused.plan("gemm_rs", "lsa", 1024, 8192, 1024, 2, 8)
    assert p.rows_per_slot == 128 and p.recv_bytes == 8 * 128 * 8192 * 2 and p.send_bytes == 0
    assert p.result_bytes == 128 * 8192 * 2
    assert p.n_reset == 1 * 9  # one row tile: its ready counter and 8 panel counters
    # over SDMA the product is staged in send first
    assert fused.plan("gemm_rs", "sdma", 1024, 8192, 1024, 2, 8).send_bytes == 1024 * 8192 * 2
    # gemm_ar: every rank's whole product arrives
    assert fused.plan("gemm_ar", "lsa", 300, 64, 64, 2, 4).recv_bytes == 4 * 300 * 64 * 2
    # ag_gemm over LSA reads the peers' staged rows in place: no recv
    p = fused.plan("ag_gemm", "lsa", 128, 1280, 8192, 2, 8)
    assert p.send_bytes == 128 * 8192 * 2 and p.recv_bytes == 0 and p.result_bytes == 0
    assert fused.plan("ag_gemm", "sdma", 128, 1280, 8192, 2, 8).recv_bytes == 8 * 128 * 8192 * 2
    assert fused.plan("a2a_gemm", "sdma", 800, 64, 64, 2, 8).rows_per_slot == 100


def test_choose_transport(monkeypatch):
    assert fused.choose_transport("gemm_rs", 8192, 8192, 3584, 1) == "sequential"
    monkeypatch.setattr(fused, "BLOCK_N", 128)
    assert fused.choose_transport("ag_gemm", 8192, 1280, 8192, 8) == "sequential"  # lost with these tiles
    monkeypatch.setattr(fused, "BLOCK_N", 256)
    assert fused.choose_transport("ag_gemm", 8192, 1280, 8192, 8) == "lsa"
    assert fused.choose_transport("a2a_gemm", 8192, 1280, 8192, 8) == "lsa"
    assert fused.choose_transport("gemm_rs", 8192, 8192, 3584, 8) == "sequential"
    assert fused.choose_transport("ag_gemm", 8192, 1280, 8192, 2) == "sequential"
    assert fused.choose_transport("ag_gemm", 8192, 7168, 8192, 8) == "sequential"  # fc1: a wide B lost
    assert fused.choose_transport("ag_gemm", 8192, fused.LSA_MAX_N, 8192, 8) == "lsa"
    for op in fused.OPS:
        assert fused.choose_transport(op, 1024, 1024, 1024, 8) in ("lsa", "sdma", "sequential")
    with pytest.raises(CCOInvalidArgument, match="op must be one of"):
        fused.choose_transport("gemm_xx", 1, 1, 1, 2)


@pytest.mark.parametrize("call,a,b,words", [
    ("gemm_rs", FakeTensor((8, 4)), FakeTensor((5, 4)), "a's columns must be b's rows"),
    ("gemm_rs", FakeTensor((8, 4)), FakeTensor((4, 4), dtype="fp16"), "they must match"),
    ("gemm_rs", FakeTensor((8, 4), dtype="float32"), FakeTensor((4, 4)), "bfloat16 or float16"),
    ("gemm_rs", FakeTensor((8, 4, 2)), FakeTensor((4, 4)), "must be 2-D"),
    ("gemm_rs", FakeTensor((8, 4), cuda=False, device="cpu"), FakeTensor((4, 4)), "CUDA tensors"),
    ("gemm_rs", [[1.0]], FakeTensor((4, 4)), "must be a torch tensor"),
    ("gemm_rs", FakeTensor((0, 4)), FakeTensor((4, 4)), "empty"),
    ("gemm_rs", FakeTensor((6, 4)), FakeTensor((4, 4)), "not a multiple of the 4 ranks"),
    ("a2a_gemm", FakeTensor((6, 4)), FakeTensor((4, 4)), "not a multiple of the 4 ranks"),
    ("gemm_a2a", FakeTensor((6, 4)), FakeTensor((4, 4)), "not a multiple of the 4 ranks"),
])
def test_bad_arguments(fake_torch, monkeypatch, call, a, b, words):
    monkeypatch.setattr(fused, "_workspace", lambda comm: pytest.fail("reached the workspace"))
    with pytest.raises(CCOInvalidArgument, match=words):
        getattr(fused, call)(a, b, FakeComm())


def test_bad_transport(fake_torch):
    with pytest.raises(CCOInvalidArgument, match="transport must be one of"):
        fused.gemm_ar(FakeTensor((8, 4)), FakeTensor((4, 4)), FakeComm(), transport="nvlink")


def test_refused_off_one_host_and_on_the_host_platform(fake_torch):
    with pytest.raises(CCOUnsupported, match="every rank on one host"):
        fused._workspace(FakeComm(size=4, lsa_size=2))
    with pytest.raises(CCOUnsupported, match="CUDA platform"):
        fused._workspace(FakeComm(platform="host"))


def test_real_host_communicator_is_refused(comm):
    with pytest.raises(CCOUnsupported, match="CUDA platform"):
        fused._workspace(comm)
    assert fused.fused_status(comm) == 0  # no workspace: nothing failed
    fused.release_workspace(comm)  # none to release: a no-op


def test_tile_config_from_the_environment(monkeypatch):
    monkeypatch.setenv("CCO_FUSED_TILES", "256x3")
    assert fused._tiles_from_env() == (256, 3)
    monkeypatch.delenv("CCO_FUSED_TILES")
    assert fused._tiles_from_env() == (256, 3)
    monkeypatch.setenv("CCO_FUSED_TILES", "128x3")
    assert fused._tiles_from_env() == (128, 3)
    monkeypatch.setenv("CCO_FUSED_TILES", "512x9")
    with pytest.raises(CCOInvalidArgument, match="CCO_FUSED_TILES"):
        fused._tiles_from_env()
