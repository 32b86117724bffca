"""Operators built on the communicator: MoE dispatch and combine
(:class:`EpDispatchCombineOp`, docs/moe.md)."""
from .moe import EpDispatchCombineConfig, EpDispatchCombineOp, EpDispatchCombineRouting

__all__ = ["EpDispatchCombineConfig", "EpDispatchCombineOp", "EpDispatchCombineRouting"]
