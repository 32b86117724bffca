"""The hand-written ctypes layer against the header text: result codes,
prototypes, and how the library is found."""
import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR, REPO

import cco
from cco import _lib, errors

HEADERS = REPO / "include" / "cco"


def header_result_list():
    text = (HEADERS / "cco.h").read_text()
    block = text[text.index("#define CCO_RESULT_LIST(X)"):text.index("typedef enum", text.index("#define CCO_RESULT_LIST(X)"))]
    return tuple((n, int(v), d) for n, v, d in re.findall(r'X\((\w+),\s*(\d+),\s*"([^"]*)"\)', block))


def test_result_table_matches_header():
    assert header_result_list() == errors.RESULT_CODES
    assert len(errors.RESULT_CODES) >= 11


def test_one_exception_class_per_result_code():
    for name, value, desc in errors.RESULT_CODES:
        if value == 0:
            continue
        cls = errors.ERRORS_BY_CODE[value]
        assert cls.c_name == name and cls.code == value and cls.description == desc
        assert cls.__name__ == "CCO" + name[len("cco"):], cls.__name__
        assert issubclass(cls, cco.CCOError) and getattr(cco, cls.__name__) is cls
        err = errors.error_for(value, "why")
        assert type(err) is cls and err.code == value and err.detail == "why" and "why" in str(err)


def test_library_strings_match_table():
    lib = _lib.load()
    for _, value, desc in errors.RESULT_CODES:
        assert lib.ccoGetErrorString(value).decode() == desc
    assert lib.ccoGetErrorString(999).decode() == "unknown result"
    unknown = errors.error_for(999, "x")
    assert type(unknown) is cco.CCOError and unknown.code == 999


def _declarations():
    """{name: parameter count} of every function the public headers declare."""
    found = {}
    for header in ("cco.h", "cco_torch.h", "cco_moe.h"):
        text = (HEADERS / header).read_text()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        text = text.split("#ifdef __cplusplus\n} /* extern")[0]  # not the C++ overloads
        text = re.split(r"\n}\s*/\*\s*extern", text)[0]
        for m in re.finditer(r"^(?:const char\*|ccoResult_t|void\*|void)\s+(\w+)\(([^)]*)\);",
                             text, flags=re.M):
            params = [p for p in m.group(2).split(",") if p.strip() and p.strip() != "void"]
            found[m.group(1)] = len(params)
    return found


def test_every_public_function_has_a_prototype():
    """Bound at load (PROTOTYPES) or on first use (LATE_PROTOTYPES: functions a
    libcco built before them lacks), every declaration exactly once."""
    declared = _declarations()
    assert len(declared) >= 38, declared
    assert not set(_lib.PROTOTYPES) & set(_lib.LATE_PROTOTYPES)
    prototypes = {**_lib.PROTOTYPES, **_lib.LATE_PROTOTYPES}
    assert set(declared) == set(prototypes), set(declared) ^ set(prototypes)
    for name, count in declared.items():
        restype, argtypes = prototypes[name]
        assert len(argtypes) == count, name


def test_late_prototypes_are_applied_where_the_library_has_them():
    for name, (restype, argtypes) in _lib.LATE_PROTOTYPES.items():
        if _lib.has_function(name):
            fn = _lib.function(name)
            assert fn.restype is restype and fn.argtypes == argtypes, name
            assert _lib.function(name) is fn  # bound once


def test_prototypes_are_applied():
    lib = _lib.load()
    assert lib.ccoBarrierAll.restype is ctypes.c_int
    assert lib.cco_torch_malloc.restype is ctypes.c_void_p
    assert lib.cco_torch_free.restype is None


def header_version() -> str:
    text = (HEADERS / "cco.h").read_text()
    return ".".join(re.search(rf"^#define CCO_VERSION_{p} (\d+)$", text, flags=re.M).group(1)
                    for p in ("MAJOR", "MINOR", "PATCH"))


def test_one_version_number():
    """cco.h is the one source: the package's __version__ (read from the
    checkout's header here, written into the wheel there) is ccoGetVersion's."""
    assert cco.__version__ == header_version()
    assert cco.__version__ == "%d.%d.%d" % cco.version()


def _python(code: str, env: dict, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("CCO_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    env.update(extra)
    return env


def test_bad_cco_library_is_a_clear_error_and_import_still_works():
    env = _clean_env(PYTHONPATH=str(PYTHON_DIR), CCO_LIBRARY="/nonexistent/libcco.so")
    proc = _python("import cco\ntry:\n    cco.Communicator.get_unique_id()\n"
                   "except cco.LibraryNotFoundError as e:\n    print('ERR', e)\n", env)
    assert proc.returncode == 0, proc.stderr
    assert "ERR CCO_LIBRARY='/nonexistent/libcco.so' could not be loaded" in proc.stdout


def _package_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "site"
    shutil.copytree(PYTHON_DIR / "cco", dest / "cco", ignore=shutil.ignore_patterns("__pycache__", "lib"))
    return dest


def test_missing_library_lists_where_it_looked(tmp_path):
    """An installed package (not <repo>/python/cco) looks next to itself and on
    the loader path only: its parent directories are not a checkout."""
    site = _package_copy(tmp_path)
    (tmp_path / "build" / "lib").mkdir(parents=True)
    (tmp_path / "build" / "lib" / "libcco.so").write_bytes(b"")  # would be a guess: never tried
    env = _clean_env(PYTHONPATH=str(site))
    proc = _python("import cco\ntry:\n    cco.library_path()\n"
                   "except ImportError as e:\n    print('ERR', e)\n", env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ERR libcco not found" in proc.stdout and "set CCO_LIBRARY" in proc.stdout
    assert "pip install ." in proc.stdout
    assert f"{site / 'cco' / 'lib' / 'libcco.so*'} (missing)" in proc.stdout
    assert "libcco.so.0 (" in proc.stdout
    assert str(tmp_path / "build") not in proc.stdout


def test_checkout_is_recognised():
    from cco import _checkout
    assert _checkout.checkout_root() == REPO
    assert _checkout.header_version(REPO) == header_version()


def test_package_copy_is_no_checkout(tmp_path):
    """<dir>/python/cco under a CMake project that is not cco's is no checkout."""
    site = tmp_path / "python"
    shutil.copytree(PYTHON_DIR / "cco", site / "cco", ignore=shutil.ignore_patterns("__pycache__", "lib"))
    (tmp_path / "CMakeLists.txt").write_text("")
    env = _clean_env(PYTHONPATH=str(site))
    proc = _python("import cco\nfrom cco import _checkout\nprint(_checkout.checkout_root(), cco.__version__)",
                   env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "0+unknown"]


def test_console_scripts_without_the_wheels_programs():
    """ccorun/cco-info entry points name what is missing instead of failing obscurely."""
    env = _clean_env(PYTHONPATH=str(PYTHON_DIR))
    proc = _python("from cco import _programs; _programs.ccorun()", env)
    assert proc.returncode == 1
    assert "ccorun:" in proc.stderr and "bin/ccorun is missing" in proc.stderr and "pip install ." in proc.stderr


def test_library_next_to_the_package(tmp_path):
    site = _package_copy(tmp_path)
    (site / "cco" / "lib").mkdir()
    shutil.copy(_lib.library_path(), site / "cco" / "lib" / "libcco.so.0")
    env = _clean_env(PYTHONPATH=str(site))
    proc = _python("import cco; print(cco.library_path()); print(cco.version())", env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == str(site / "cco" / "lib" / "libcco.so.0")


def test_library_from_the_build_tree():
    build_lib = REPO / "build" / "lib" / "libcco.so"
    if not build_lib.exists():
        pytest.skip("no build/ tree in this checkout")
    env = _clean_env(PYTHONPATH=str(PYTHON_DIR))
    proc = _python("import cco; print(cco.library_path())", env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(build_lib)
