"""Finding the device bitcode, ``libcco_device_sm<arch>.bc``, for a GPU.

:func:`find_cco_bitcode` looks, in order:

1. ``CCO_DEVICE_BC`` (alias ``MORI_CCO_BC``): a path. A missing file is an
   error, not a reason to take another copy the user did not ask for.
2. Unless ``CCO_DISABLE_JIT`` (alias ``MORI_DISABLE_JIT``) is set: the
   wrappers generated from the table, compiled for ``sm_<arch>`` by a clang
   that targets NVPTX (clang-19 or newer, on ``PATH``) into a cache
   (``CCO_CACHE_DIR``, else ``$XDG_CACHE_HOME/cco``, else ``~/.cache/cco``),
   keyed by the source, the headers, the compiler and the flags. No clang
   (the usual GPU machine), no headers: this step is passed over; a failed
   compile warns and is passed over.
3. A prebuilt file: ``cco/lib/cco`` and ``cco/lib`` in the package (a
   wheel), ``<dir>/cco`` and ``<dir>`` for the directory of ``CCO_LIBRARY``
   or of the libcco already loaded (an install, a build tree), then
   ``build*/lib`` of the checkout the package sits in, if it sits in one. In each, the highest ``sm_<n>`` not
   above the GPU's (``libcco_device.bc``, without an arch, last).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import List, Optional, Tuple

from .._cache import user_cache_root
from . import wrappers

BITCODE_ENV = ("CCO_DEVICE_BC", "MORI_CCO_BC")
DISABLE_JIT_ENV = ("CCO_DISABLE_JIT", "MORI_DISABLE_JIT")
CACHE_ENV = "CCO_CACHE_DIR"
CLANGS = ("clang-19", "clang-20", "clang-21", "clang-22", "clang")
# Architectures tried for a GPU newer than the compiler (the wrappers' PTX is
# the same for all of them; Triton retargets the module it links them into).
FALLBACK_ARCHS = (120, 100, 90, 89, 87, 86, 80)

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # .../cco
_PREBUILT = re.compile(r"^libcco_device(?:_sm(\d+))?\.bc$")


class BitcodeNotFoundError(FileNotFoundError):
    """No device bitcode for the GPU; the message lists where we looked."""


def _env(names: Tuple[str, ...]) -> Optional[str]:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def jit_disabled() -> bool:
    value = _env(DISABLE_JIT_ENV)
    return value is not None and value.strip().lower() not in ("0", "false", "no", "off")


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return user_cache_root()


def prebuilt_dirs() -> List[Path]:
    # An install puts the bitcode in <libdir>/cco/ (the wheel: cco/lib/cco/), a build tree
    # next to libcco itself.
    dirs = [_PACKAGE_DIR / "lib" / "cco", _PACKAGE_DIR / "lib"]
    from .. import _checkout, _lib  # light: finds, never loads

    for lib in (os.environ.get("CCO_LIBRARY"), _lib._path):
        if lib:
            libdir = Path(lib).resolve().parent
            dirs += [libdir / "cco", libdir]
    repo = _checkout.checkout_root()  # only a checkout's own build trees, never a stranger's
    if repo is not None:
        dirs += sorted(p for p in repo.glob("build*/lib") if p.is_dir())
    unique: List[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def pick_prebuilt(directory: Path, arch: int) -> Optional[Path]:
    """The best file of a directory for sm_<arch>, or None."""
    best, best_arch = None, -1
    try:
        names = os.listdir(directory)
    except OSError:
        return None
    for name in names:
        m = _PREBUILT.match(name)
        if not m:
            continue
        sm = int(m.group(1)) if m.group(1) else 0  # arch-less: any GPU, last resort
        if sm <= arch and sm > best_arch:
            best, best_arch = directory / name, sm
    return best


def find_clang() -> Optional[str]:
    for name in CLANGS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _digest(clang: str, include_dir: str, source: str, arch: int) -> str:
    h = hashlib.sha256()
    version = subprocess.run([clang, "--version"], capture_output=True, text=True).stdout
    for part in (clang, version, " ".join(wrappers.CLANG_FLAGS), str(arch), source):
        h.update(part.encode())
    for header in sorted(Path(include_dir, "cco").rglob("*.h")):
        h.update(str(header.relative_to(include_dir)).encode())
        h.update(header.read_bytes())
    return h.hexdigest()[:16]


def compile_bitcode(arch: int, clang: Optional[str] = None, out_dir: Optional[Path] = None) -> Path:
    """Compiles the wrappers for sm_<arch> (or the newest arch below it that
    the compiler knows) into the cache; returns the cached file. Raises
    RuntimeError with the compiler's message when no arch compiles."""
    from ..cuda import include_dirs

    clang = clang or find_clang()
    if not clang:
        raise RuntimeError("no clang on PATH (" + ", ".join(CLANGS) + ")")
    include_dir = include_dirs()[0]
    source = wrappers.c_source()
    out_dir = out_dir or cache_dir()
    out_dir.mkdir(parents=True, exist_ok=True)
    errors = []
    for sm in [arch] + [a for a in FALLBACK_ARCHS if a < arch]:
        out = out_dir / f"libcco_device_sm{sm}-{_digest(clang, include_dir, source, sm)}.bc"
        if out.is_file():
            return out
        # Ranks of one host compile at once: each writes its own files and
        # renames the result into place.
        tmp = out.with_name(f"{out.name}.{os.getpid()}")
        src = tmp.with_suffix(".c")
        src.write_text(source)
        cmd = [clang, *wrappers.CLANG_FLAGS, f"-march=sm_{sm}", "-Wno-unknown-cuda-version",
               f"-I{include_dir}", "-c", str(src), "-o", str(tmp)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        src.unlink(missing_ok=True)
        if proc.returncode == 0:
            os.replace(tmp, out)
            return out
        tmp.unlink(missing_ok=True)
        errors.append(f"sm_{sm}: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}")
        if "unknown target CPU" not in proc.stderr:
            break  # a real error: an older arch would fail alike
    raise RuntimeError(f"{clang} could not compile the device bitcode: " + "; ".join(errors))


def find_cco_bitcode(arch: int) -> str:
    """Path of the device bitcode for a GPU of compute capability
    ``arch`` (90 for an H100/H200), found as the module doc says."""
    explicit = _env(BITCODE_ENV)
    if explicit:
        if not os.path.isfile(explicit):
            raise BitcodeNotFoundError(f"{'/'.join(BITCODE_ENV)}={explicit!r}: no such file")
        return os.path.abspath(explicit)
    tried: List[str] = []
    if jit_disabled():
        tried.append("compile: disabled by " + "/".join(DISABLE_JIT_ENV))
    else:
        clang = find_clang()
        if clang is None:
            tried.append("compile: no clang on PATH")
        else:
            try:
                return str(compile_bitcode(arch, clang))
            except Exception as exc:  # noqa: BLE001 - any failure falls back to a prebuilt file
                warnings.warn(f"cco: {exc}; looking for a prebuilt device bitcode", RuntimeWarning)
                tried.append(f"compile: {exc}")
    for directory in prebuilt_dirs():
        found = pick_prebuilt(directory, arch)
        if found:
            return str(found)
        tried.append(f"{directory} (no libcco_device_sm<N>.bc with N <= {arch})")
    raise BitcodeNotFoundError(
        f"no cco device bitcode for sm_{arch}: build one (cmake --build build --target cco_device_bc), "
        f"set {BITCODE_ENV[0]} to its path, or install clang-19. Tried: " + "; ".join(tried))
