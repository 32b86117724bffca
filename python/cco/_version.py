"""``cco.__version__``: the version of the C library this package belongs to.

The one source is ``include/cco/cco.h`` (``CCO_VERSION_*``, what
``ccoGetVersion`` reports). A wheel's build writes it into
``cco/_build_version.py`` (see pyproject.toml); a checkout reads its header.
"""
from __future__ import annotations

from . import _checkout

__all__ = ["__version__"]

try:
    from ._build_version import version as __version__  # type: ignore[import-not-found]
except ImportError:
    _repo = _checkout.checkout_root()
    # A copy of the package that is neither a wheel's nor a checkout's.
    __version__ = _checkout.header_version(_repo) if _repo is not None else "0+unknown"
