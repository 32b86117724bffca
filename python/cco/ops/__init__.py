"""Operators built on the communicator: MoE dispatch and combine
(:class:`EpDispatchCombineOp`, docs/moe.md) and the fused GEMM +
communication ops (:mod:`cco.ops.fused`, docs/fused_ops.md)."""
from . import fused
from .fused import a2a_gemm, ag_gemm, choose_transport, gemm_a2a, gemm_ag, gemm_ar, gemm_rs
from .moe import EpDispatchCombineConfig, EpDispatchCombineOp, EpDispatchCombineRouting

__all__ = ["EpDispatchCombineConfig", "EpDispatchCombineOp", "EpDispatchCombineRouting", "fused", "gemm_rs",
           "gemm_ar", "gemm_ag", "gemm_a2a", "ag_gemm", "a2a_gemm", "choose_transport"]
