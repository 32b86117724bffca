"""Triton bindings of the cco device API: ``from cco.ir.triton import cco``.

``cco`` is a module, so Triton kernels may name it as a global; see
:mod:`cco.ir.triton.cco`.
"""
from . import cco  # noqa: F401

__all__ = ["cco"]
