"""cco.ir without a GPU or Triton: the table of the device bitcode, the C
source generated from it, and the bitcode lookup (explicit path, compile
into the cache, prebuilt files), with the original MORI_* aliases. The
bitcode itself is checked by tests/scripts/device_bitcode.sh, Triton's use of
it by tests/scripts/device_triton.sh."""
import os
import re
import warnings
from pathlib import Path

import pytest

from cco.ir import bitcode, wrappers
from cco.ir.device_functions import AXES, C_TYPES, CCO_DEVICE_FUNCTIONS, DOORBELLS, SCOPES, symbol_name

ENV = ("CCO_DEVICE_BC", "MORI_CCO_BC", "CCO_DISABLE_JIT", "MORI_DISABLE_JIT", "CCO_CACHE_DIR", "CCO_LIBRARY",
       "CCO_INCLUDE_DIR")


@pytest.fixture
def env(monkeypatch, tmp_path):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CCO_CACHE_DIR", str(tmp_path / "cache"))
    return monkeypatch


def prebuilt(tmp_path, *archs):
    """A directory like a build's lib/, found through CCO_LIBRARY."""
    lib = tmp_path / "lib"
    lib.mkdir(exist_ok=True)
    for sm in archs:
        (lib / f"libcco_device_sm{sm}.bc").write_bytes(b"BC")
    return lib


def test_table_entries_are_well_formed():
    for sym, fn in CCO_DEVICE_FUNCTIONS.items():
        assert sym == symbol_name(fn.family, **dict(fn.variant))
        assert re.fullmatch(r"cco_ir_[a-z0-9_]+", sym)
        assert fn.ret in C_TYPES and all(t in C_TYPES for t in fn.arg_types)
        assert len({n for n, _ in fn.params}) == len(fn.params), sym
        if not fn.pure and fn.family.startswith(("gda_put", "gda_get", "sdma_put", "lsa_barrier")):
            assert fn.ret == "int32", f"{sym}: a call with a side effect returns a status"


def test_every_variant_is_a_symbol_of_its_own():
    families = {}
    for fn in CCO_DEVICE_FUNCTIONS.values():
        families.setdefault(fn.family, set()).add(fn.variant)
    assert len(families["gda_put"]) == len(DOORBELLS) * len(SCOPES) * 2
    assert {dict(v)["doorbell"] for v in families["gda_signal"]} == {"immediate", "deferred"}  # no caller-ordered
    assert {dict(v)["scope"] for v in families["gda_barrier_sync"]} == {"warp", "block"}
    for family in ("lsa_barrier_sync", "sdma_put", "gda_flush", "gda_wait_signal", "coop_rank"):
        assert {dict(v)["scope"] for v in families[family]} == set(SCOPES)
    assert list(AXES) == ["doorbell", "scope", "thread_mode"]


def test_c_source_defines_every_entry_once():
    text = wrappers.c_source()
    for sym, fn in CCO_DEVICE_FUNCTIONS.items():
        assert len(re.findall(rf"\b{sym}\(", text)) == 1, sym
    assert "static" not in re.findall(r"^CCO_IR_API (\w+)", text, re.M)
    assert "-ffreestanding" not in wrappers.CLANG_FLAGS
    # C marks no asm convergent by itself: without the flag LLVM may copy a
    # barrier into a branch only some threads take.
    assert "-fconvergent-functions" in wrappers.CLANG_FLAGS


def test_the_header_declares_every_definition(tmp_path):
    c, h = tmp_path / "w.c", tmp_path / "w.h"
    assert wrappers.main(["--output", str(c), "--header", str(h)]) == 0
    definitions = re.findall(r"^CCO_IR_API (.*?) \{$", c.read_text(), re.M)
    declarations = re.findall(r"^(\w.*\));$", h.read_text(), re.M)
    assert len(definitions) == len(CCO_DEVICE_FUNCTIONS) and declarations == definitions


def test_generator_writes_the_file_once(tmp_path):
    out = tmp_path / "w.c"
    assert wrappers.main(["--output", str(out)]) == 0
    first = out.stat().st_mtime_ns
    os.utime(out, ns=(first - 10**9, first - 10**9))
    assert wrappers.main(["--output", str(out)]) == 0
    assert out.stat().st_mtime_ns == first - 10**9  # unchanged text: not rewritten, nothing rebuilds
    assert out.read_text() == wrappers.c_source()


@pytest.mark.parametrize("name", ["CCO_DEVICE_BC", "MORI_CCO_BC"])
def test_an_explicit_path_wins_and_must_exist(env, tmp_path, name):
    file = tmp_path / "mine.bc"
    file.write_bytes(b"BC")
    env.setenv(name, str(file))
    assert bitcode.find_cco_bitcode(90) == str(file)
    env.setenv(name, str(tmp_path / "missing.bc"))
    with pytest.raises(bitcode.BitcodeNotFoundError, match="no such file"):
        bitcode.find_cco_bitcode(90)


@pytest.mark.parametrize("name", ["CCO_DISABLE_JIT", "MORI_DISABLE_JIT"])
def test_prebuilt_files_the_highest_arch_not_above_the_gpu(env, tmp_path, name):
    lib = prebuilt(tmp_path, 80, 90)
    env.setenv(name, "1")
    env.setenv("CCO_LIBRARY", str(lib / "libcco.so"))
    assert bitcode.find_cco_bitcode(90) == str(lib / "libcco_device_sm90.bc")
    assert bitcode.find_cco_bitcode(100) == str(lib / "libcco_device_sm90.bc")
    assert bitcode.find_cco_bitcode(86) == str(lib / "libcco_device_sm80.bc")
    assert not any((tmp_path / "cache").glob("*.bc"))  # nothing compiled


def test_no_bitcode_for_an_old_gpu_lists_where_it_looked(env, tmp_path):
    lib = prebuilt(tmp_path, 80)
    env.setenv("CCO_DISABLE_JIT", "1")
    env.setenv("CCO_LIBRARY", str(lib / "libcco.so"))
    with pytest.raises(bitcode.BitcodeNotFoundError) as err:
        bitcode.find_cco_bitcode(75)
    assert str(lib) in str(err.value) and "disabled by CCO_DISABLE_JIT" in str(err.value)


def test_disable_jit_zero_means_enabled(env):
    env.setenv("CCO_DISABLE_JIT", "0")
    assert not bitcode.jit_disabled()


needs_clang = pytest.mark.skipif(bitcode.find_clang() is None,
                                 reason="no clang on PATH (scripts/install-deps.sh installs clang-19)")


@needs_clang
def test_compiled_into_the_cache_once(env, tmp_path):
    prebuilt_lib = prebuilt(tmp_path, 90)
    env.setenv("CCO_LIBRARY", str(prebuilt_lib / "libcco.so"))
    path = Path(bitcode.find_cco_bitcode(90))
    assert path.parent == tmp_path / "cache" and path.name.startswith("libcco_device_sm90-")
    assert path.read_bytes()[:4] == b"BC\xc0\xde"  # LLVM bitcode
    stamp = path.stat().st_mtime_ns
    assert bitcode.find_cco_bitcode(90) == str(path) and path.stat().st_mtime_ns == stamp
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


@needs_clang
def test_a_gpu_newer_than_the_compiler_gets_its_newest_arch(env, tmp_path):
    path = Path(bitcode.compile_bitcode(1000, out_dir=tmp_path / "cache"))
    sm = int(re.match(r"libcco_device_sm(\d+)-", path.name).group(1))
    assert 80 <= sm < 1000


@needs_clang
def test_a_failed_compile_warns_and_takes_a_prebuilt_file(env, tmp_path):
    include = tmp_path / "include" / "cco"
    include.mkdir(parents=True)
    (include / "cco_device.h").write_text("#error broken\n")
    (include / "cco_device_all.h").write_text("#error broken\n")
    env.setenv("CCO_INCLUDE_DIR", str(tmp_path / "include"))
    lib = prebuilt(tmp_path, 90)
    env.setenv("CCO_LIBRARY", str(lib / "libcco.so"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert bitcode.find_cco_bitcode(90) == str(lib / "libcco_device_sm90.bc")
    assert any("could not compile" in str(w.message) for w in caught)
