"""Compiling CUDA kernels that use the cco device API at run time.

The device headers (``cco/cco_device.h``, ``cco/cco_sdma.h``,
``cco/cco_gda.h``, or all of them through ``cco/cco_device_all.h``) are
plain C11 + inline PTX, so NVRTC (what ``cupy.RawKernel`` uses) compiles
them, given two things NVRTC lacks: the C standard headers
``<stddef.h>``/``<stdint.h>`` (this package ships minimal ones in
``cco/nvrtc/``) and the cco headers themselves (``cco/device/impl/``
included), found as described in :func:`include_dirs`.

    kernel = cco.cuda.raw_kernel(SOURCE, "my_kernel")   # SOURCE includes cco/cco_device.h
    kernel((blocks,), (threads,), (dc.ptr, win.handle, ...))

Kernels take the device communicator as ``const ccoDevComm*`` (``dc.ptr``)
and windows as ``ccoWindow_t`` (``win.handle``); pass pointers as
``numpy.uint64`` so cupy sends 8 bytes.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, List, Sequence, Tuple

from . import _checkout, _lib
from .errors import CCOUnsupported

INCLUDE_ENV = "CCO_INCLUDE_DIR"
_PACKAGE_DIR = _checkout.PACKAGE_DIR


def _has_headers(path: Path) -> bool:
    return (path / "cco" / "cco_device.h").is_file()


def include_dirs() -> List[str]:
    """Directories to put on the include path for ``#include "cco/cco_device.h"``.

    Looked for in order: ``CCO_INCLUDE_DIR``; ``cco/include`` inside the
    package (the wheel puts them there); ``<repo>/include`` when the package
    is ``<repo>/python/cco`` of a checkout; ``include`` next to the loaded
    library's prefix (``<prefix>/lib/libcco.so`` -> ``<prefix>/include``, and
    ``<repo>/build/lib`` -> ``<repo>/include``).
    """
    candidates = []
    if os.environ.get(INCLUDE_ENV):
        candidates.append(Path(os.environ[INCLUDE_ENV]))
    candidates.append(_PACKAGE_DIR / "include")
    repo = _checkout.checkout_root()
    if repo is not None:
        candidates.append(repo / "include")
    for path in candidates:
        if _has_headers(path):
            return [str(path)]
    # Last, beside the library, which this loads: only when nothing above has the headers (a compile
    # check must not load libcco, which a sanitizer build's library refuses without its runtime).
    try:
        libdir = Path(_lib.library_path()).resolve().parent
        for path in (libdir.parent / "include", libdir.parent.parent / "include"):
            candidates.append(path)
            if _has_headers(path):
                return [str(path)]
    except ImportError:
        pass
    raise CCOUnsupported(
        "cco headers not found; set CCO_INCLUDE_DIR to the directory holding cco/cco_device.h. "
        "Tried: " + ", ".join(str(p) for p in candidates)
    )


def nvrtc_options(extra: Sequence[str] = ()) -> Tuple[str, ...]:
    """NVRTC options for a kernel that includes the cco device headers."""
    # No -std: NVRTC defaults to C++17, and cupy may add its own.
    opts = [f"-I{_PACKAGE_DIR / 'nvrtc'}"] + [f"-I{d}" for d in include_dirs()]
    return tuple(opts) + tuple(extra)


def raw_kernel(source: str, name: str, options: Sequence[str] = ()) -> Any:
    """A ``cupy.RawKernel`` compiled with :func:`nvrtc_options`."""
    import cupy

    return cupy.RawKernel(source, name, options=nvrtc_options(options))


def raw_module(source: str, options: Sequence[str] = ()) -> Any:
    """A ``cupy.RawModule`` compiled with :func:`nvrtc_options`."""
    import cupy

    return cupy.RawModule(code=source, options=nvrtc_options(options))
