"""Building and loading the C++ extension behind torch backend "CCO".

The sources are ``cco/csrc/`` (shipped in the package). The extension links
the torch that is installed (its ``SymmetricMemory`` interface changes
between versions) and the libcco this package loaded, so it is built on the
machine, once, and cached:

1. ``CCO_TORCH_EXT_DIR`` when set (the cache, or a prebuilt copy), else
2. ``cco/torch_ext/`` inside the package, when someone built it there
   (``python -m cco._torch_ext build <package>/cco/torch_ext``), else
3. ``$XDG_CACHE_HOME/cco/torch_ext`` (``~/.cache/cco/torch_ext``).

Each build is named by a key: a hash of the sources, the torch version, the
Python ABI, the cco version and the GPU architectures, so a change of any
of them builds anew. Building needs a C++ compiler and nvcc (``CUDA_HOME``,
``nvcc`` on ``PATH`` or ``/usr/local/cuda``), not ninja: the commands are
run here, in parallel, and a file lock keeps concurrent ranks from
building the same key twice.

    python -m cco._torch_ext build [DIR]   # build (into DIR) and print the path
    python -m cco._torch_ext check         # compile-check the sources only (CI);
                                           # exit 77 when torch or nvcc is missing
"""
from __future__ import annotations

import concurrent.futures
import fcntl
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import List, Optional, Sequence

from . import _lib
from ._cache import user_cache_root
from ._version import __version__
from .errors import CCOInvalidArgument, CCOUnsupported

SOURCES_DIR = Path(__file__).resolve().parent / "csrc"
# Built with the C++ compiler against torch's headers, or (no torch) alone.
TORCH_SOURCES = ("group_comm.cpp", "symm_mem.cpp", "module.cpp")
PLAIN_SOURCES = ("common.cpp", "heap.cpp", "peer_arrays.cpp", "rendezvous.cpp")
CUDA_SOURCES = ("signal_kernels.cu",)
HEADERS = ("cco_symm_mem.h", "symm_mem.h")

EXT_DIR_ENV = "CCO_TORCH_EXT_DIR"
PREBUILT_DIR = Path(__file__).resolve().parent / "torch_ext"
NAME_PREFIX = "cco_symm_mem_"


class ExtensionBuildError(CCOUnsupported):
    """The extension could not be compiled; the message holds the command
    and the compiler's output."""


@dataclass(frozen=True)
class Toolchain:
    """Where everything the build needs is, found without importing torch."""

    torch_dir: Optional[Path]  # None: torch is not installed (check() of the rest only)
    torch_version: str
    cuda_home: Path
    cxx: str
    cco_include: Path
    libcco: Path
    archs: Sequence[str]  # "90", "100a", ...; the last also as PTX

    @property
    def nvcc(self) -> Path:
        return self.cuda_home / "bin" / "nvcc"


def _torch_dir() -> Optional[Path]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _cuda_home() -> Path:
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return Path(os.environ[var])
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(nvcc).resolve().parent.parent
    return Path("/usr/local/cuda")


def _cco_include() -> Path:
    from .cuda import include_dirs  # the same search NVRTC kernels use

    return Path(include_dirs()[0])


def _archs() -> List[str]:
    """TORCH_CUDA_ARCH_LIST ("9.0;10.0+PTX") when set, else the GPUs of this
    machine (when torch is already imported), else Hopper."""
    listed = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(",", ";").replace(" ", ";")
    archs = [a.replace("+PTX", "").replace(".", "") for a in listed.split(";") if a.strip()]
    if archs:
        return sorted(set(archs))
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        caps = {torch.cuda.get_device_capability(d) for d in range(torch.cuda.device_count())}
        return sorted(f"{major}{minor}" for major, minor in caps)
    return ["90"]


def toolchain(need_torch: bool = True) -> Toolchain:
    """What a build needs; `need_torch` False (a compile check) also does
    without libcco loaded, which a sanitizer build's library refuses."""
    torch_dir = _torch_dir()
    if torch_dir is None and need_torch:
        raise CCOUnsupported("torch is not installed: the CCO backend is a torch extension")
    libcco = Path(_lib.library_path()) if need_torch else Path("libcco.so")
    return Toolchain(
        torch_dir=torch_dir,
        torch_version=importlib.metadata.version("torch") if torch_dir else "none",
        cuda_home=_cuda_home(),
        cxx=os.environ.get("CXX", "c++"),
        cco_include=_cco_include(),
        libcco=libcco,
        archs=_archs(),
    )


def build_key(tc: Toolchain) -> str:
    digest = hashlib.sha256()
    for name in TORCH_SOURCES + PLAIN_SOURCES + CUDA_SOURCES + HEADERS:
        digest.update(name.encode() + b"\0" + (SOURCES_DIR / name).read_bytes())
    digest.update(Path(__file__).read_bytes())  # the compile and link flags
    for part in (tc.torch_version, sys.implementation.cache_tag, str(sysconfig.get_config_var("EXT_SUFFIX")),
                 __version__, ",".join(tc.archs)):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:16]


def module_name(key: str) -> str:
    return NAME_PREFIX + key


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str, what: str) -> int:
    """A positive size: bytes, or a number with K, M, G or T (binary units,
    optionally followed by B or iB): "34359738368", "32G", "32GiB"."""
    match = re.fullmatch(r"(\d+)\s*([KMGT]?)(?:i?B)?", text.strip(), re.IGNORECASE)
    if not match or int(match.group(1)) == 0:
        raise CCOInvalidArgument(f"{what}={text!r}: expected a positive size, e.g. 34359738368 or 32G")
    return int(match.group(1)) * _UNITS[match.group(2).upper()]


def _ext_suffix() -> str:
    return str(sysconfig.get_config_var("EXT_SUFFIX") or ".so")


def cache_dir() -> Path:
    if os.environ.get(EXT_DIR_ENV):
        return Path(os.environ[EXT_DIR_ENV])
    return user_cache_root() / "torch_ext"


# ------------------------------------------------------------------ commands


def cxx_standard(torch_dir: Optional[Path]) -> str:
    """The C++ standard torch's headers need: newer torch releases refuse
    anything before C++20 (ATen/ATen.h says so with an #error), older ones
    are built and tested with C++17. Read from the installed headers, so
    any torch version gets what it asks for."""
    if torch_dir is not None:
        try:
            aten = (torch_dir / "include" / "ATen" / "ATen.h").read_text(errors="replace")
        except OSError:
            aten = ""
        if "C++20" in aten:
            return "c++20"
    return "c++17"


def _cxx_flags(tc: Toolchain, name: str) -> List[str]:
    python_include = sysconfig.get_path("include", scheme="posix_prefix")
    flags = [
        f"-std={cxx_standard(tc.torch_dir)}", "-O2", "-fPIC", "-Wall", "-Wextra", "-Wno-unused-parameter",
        f"-DTORCH_EXTENSION_NAME={name}", "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-I{SOURCES_DIR}", f"-I{tc.cco_include}",
    ]
    if tc.torch_dir is not None:
        include = tc.torch_dir / "include"
        flags += ["-isystem", str(include), "-isystem", str(include / "torch" / "csrc" / "api" / "include")]
    return flags + ["-isystem", str(tc.cuda_home / "include"), "-isystem", str(python_include)]


def _nvcc_flags(tc: Toolchain) -> List[str]:
    flags = ["-std=c++17", "-O2", "-Xcompiler", "-fPIC", f"-I{SOURCES_DIR}", f"-I{tc.cco_include}"]
    for arch in tc.archs:
        flags += ["-gencode", f"arch=compute_{arch},code=sm_{arch}"]
    last = tc.archs[-1]
    flags += ["-gencode", f"arch=compute_{last},code=compute_{last}"]  # PTX for newer GPUs
    return flags


def compile_commands(tc: Toolchain, name: str, out: Path, syntax_only: bool = False) -> List[List[str]]:
    """One command per source; objects go to `out` (nothing with syntax_only)."""
    cmds = []
    sources = (TORCH_SOURCES if tc.torch_dir is not None else ()) + PLAIN_SOURCES
    for src in sources:
        tail = ["-fsyntax-only"] if syntax_only else ["-c", "-o", str(out / (src + ".o"))]
        cmds.append([tc.cxx] + _cxx_flags(tc, name) + [str(SOURCES_DIR / src)] + tail)
    for src in CUDA_SOURCES:
        obj = os.devnull if syntax_only else str(out / (src + ".o"))
        cmds.append([str(tc.nvcc)] + _nvcc_flags(tc) + ["-c", str(SOURCES_DIR / src), "-o", obj])
    return cmds


def link_command(tc: Toolchain, out: Path, target: Path) -> List[str]:
    assert tc.torch_dir is not None, "toolchain() refuses a build without torch"
    lib = tc.torch_dir / "lib"
    cuda_lib = tc.cuda_home / ("lib64" if (tc.cuda_home / "lib64").is_dir() else "lib")
    objs = [str(out / (s + ".o")) for s in TORCH_SOURCES + PLAIN_SOURCES + CUDA_SOURCES]
    return [tc.cxx, "-shared", "-o", str(target)] + objs + [
        f"-L{lib}", "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch_cuda", "-ltorch", "-ltorch_python",
        f"-L{cuda_lib}", "-lcudart",
        # By path: the extension needs libcco's soname, which the process
        # has already loaded through ctypes by the time it imports this.
        str(tc.libcco), f"-Wl,-rpath,{tc.libcco.resolve().parent}",
    ]


def _run_all(cmds: Sequence[Sequence[str]], verbose: bool) -> None:
    def run(cmd: Sequence[str]) -> None:
        if verbose:
            print(" ".join(cmd), file=sys.stderr)
        proc = subprocess.run(list(cmd), capture_output=True, text=True)
        if proc.returncode != 0:
            raise ExtensionBuildError(
                f"building the CCO torch backend failed (exit {proc.returncode}):\n"
                f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")

    workers = max(1, min(len(cmds), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for future in [pool.submit(run, c) for c in cmds]:
            future.result()


# ------------------------------------------------------------ build and load


def _check_tools(tc: Toolchain) -> None:
    if not tc.nvcc.exists():
        raise ExtensionBuildError(
            f"nvcc not found at {tc.nvcc} (set CUDA_HOME, or build the extension elsewhere and "
            f"point {EXT_DIR_ENV} at it)")
    if shutil.which(tc.cxx) is None:
        raise ExtensionBuildError(f"no C++ compiler '{tc.cxx}' (set CXX)")


def build(directory: Optional[Path] = None, verbose: bool = False) -> Path:
    """Builds the extension into `directory` (the cache by default) unless a
    build of the same key is there; returns the library's path."""
    tc = toolchain()
    name = module_name(build_key(tc))
    directory = Path(directory) if directory is not None else cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / (name + _ext_suffix())
    with open(directory / (name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another rank may be building it
        if target.exists():
            return target
        _check_tools(tc)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            out = Path(tmp)
            _run_all(compile_commands(tc, name, out), verbose)
            _run_all([link_command(tc, out, out / target.name)], verbose)
            os.replace(out / target.name, target)  # whole or not at all
    return target


def find_built(key: str) -> Optional[Path]:
    """The library of build `key` in the override, the package or the cache."""
    filename = module_name(key) + _ext_suffix()
    dirs = [Path(os.environ[EXT_DIR_ENV])] if os.environ.get(EXT_DIR_ENV) else []
    dirs += [PREBUILT_DIR, cache_dir()]
    for d in dirs:
        if (d / filename).is_file():
            return d / filename
    return None


def load(verbose: bool = False) -> ModuleType:
    """The extension module (torch is imported first), built if needed."""
    import torch  # noqa: F401  (the extension's torch symbols come from it)

    _lib.load()  # libcco before the extension, which links its soname
    tc = toolchain()
    key = build_key(tc)
    name = module_name(key)
    if name in sys.modules:
        return sys.modules[name]
    path = find_built(key) or build(verbose=verbose)
    spec = importlib.util.spec_from_file_location(
        name, path, loader=importlib.machinery.ExtensionFileLoader(name, str(path)))
    if spec is None or spec.loader is None:
        raise CCOUnsupported(f"cannot load the CCO torch backend from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def check(verbose: bool = False) -> bool:
    """Compiles every source without linking: against the installed torch's
    headers (torch is not imported, so its CUDA libraries need not be
    there), nvcc for the kernels. What CI can do without a GPU. Returns
    False when torch or nvcc is missing, so some sources were not checked."""
    tc = toolchain(need_torch=False)
    if shutil.which(tc.cxx) is None:
        raise ExtensionBuildError(f"no C++ compiler '{tc.cxx}' (set CXX)")
    cmds = compile_commands(tc, module_name(build_key(tc)), Path(os.devnull), syntax_only=True)
    complete = True
    cuda_headers = [tc.cuda_home / "include", Path("/usr/include")]
    if not any((d / "cuda_runtime_api.h").exists() for d in cuda_headers):
        print(f"check: no CUDA headers under {tc.cuda_home}: nothing compiled", file=sys.stderr)
        return False
    if not tc.nvcc.exists():
        cmds = [c for c in cmds if c[0] != str(tc.nvcc)]
        print(f"check: no nvcc at {tc.nvcc}: {', '.join(CUDA_SOURCES)} not compiled", file=sys.stderr)
        complete = False
    if tc.torch_dir is None:
        print(f"check: torch is not installed: {', '.join(TORCH_SOURCES)} not compiled", file=sys.stderr)
        complete = False
    _run_all(cmds, verbose)
    print(f"check: {len(cmds)} sources compile"
          + (f" against torch {tc.torch_version}" if tc.torch_dir else ""))
    return complete


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["check"]:
        # 77: compiled what could be, but not everything (the test's "skipped").
        return 0 if check(verbose="-v" in args) else 77
    if args[:1] == ["build"]:
        directory = Path(args[1]) if len(args) > 1 and args[1] != "-v" else None
        import torch  # noqa: F401  (the GPU architectures come from it)

        print(build(directory, verbose="-v" in args))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
