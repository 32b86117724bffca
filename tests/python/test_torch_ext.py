"""The builder of torch backend "CCO" (cco._torch_ext), without torch:
its commands, build keys, cache lookup and size parsing. Compiling the
sources is tests/scripts/test_torch_ext.sh."""
from dataclasses import replace
from pathlib import Path

import pytest

from cco import CCOInvalidArgument, _torch_ext


def _source(cmd):
    return next(Path(a).name for a in cmd if a.endswith((".cpp", ".cu")))


def test_parse_size():
    assert _torch_ext.parse_size("4096", "X") == 4096
    assert _torch_ext.parse_size("32G", "X") == 32 << 30
    assert _torch_ext.parse_size(" 512 MiB ", "X") == 512 << 20
    assert _torch_ext.parse_size("1t", "X") == 1 << 40
    for bad in ("", "0", "-1", "1.5G", "12Q", "G"):
        with pytest.raises(CCOInvalidArgument, match="X="):
            _torch_ext.parse_size(bad, "X")


def test_commands_cover_every_source_and_link_libcco(tmp_path):
    tc = _torch_ext.toolchain(need_torch=False)
    tc = _torch_ext.Toolchain(Path("/opt/torch"), "2.11.0", Path("/opt/cuda"), "c++", tc.cco_include,
                              tc.libcco, ["90", "100"])
    cmds = _torch_ext.compile_commands(tc, "cco_symm_mem_x", tmp_path)
    compiled = [_source(c) for c in cmds]
    want = _torch_ext.TORCH_SOURCES + _torch_ext.PLAIN_SOURCES + _torch_ext.CUDA_SOURCES
    assert sorted(compiled) == sorted(want)
    cu = next(c for c in cmds if c[0] == "/opt/cuda/bin/nvcc")
    assert "arch=compute_90,code=sm_90" in cu and "arch=compute_100,code=compute_100" in cu
    cpp = next(c for c in cmds if _source(c) == "module.cpp")
    assert "-DTORCH_EXTENSION_NAME=cco_symm_mem_x" in cpp and "/opt/torch/include" in cpp
    link = _torch_ext.link_command(tc, tmp_path, tmp_path / "x.so")
    assert str(tc.libcco) in link and f"-Wl,-rpath,{tc.libcco.resolve().parent}" in link
    assert "-ltorch_cuda" in link and "-lcudart" in link


def test_without_torch_only_the_torch_free_sources_are_checked(tmp_path):
    tc = _torch_ext.toolchain(need_torch=False)
    tc = _torch_ext.Toolchain(None, "none", tc.cuda_home, "c++", tc.cco_include, tc.libcco, ["90"])
    sources = [_source(c) for c in _torch_ext.compile_commands(tc, "n", tmp_path) if c[0] == "c++"]
    assert sorted(sources) == sorted(_torch_ext.PLAIN_SOURCES)


def test_key_changes_with_torch_and_architectures():
    tc = _torch_ext.toolchain(need_torch=False)
    a = _torch_ext.Toolchain(None, "2.11.0", tc.cuda_home, "c++", tc.cco_include, tc.libcco, ["90"])
    assert _torch_ext.build_key(a) == _torch_ext.build_key(a)
    assert _torch_ext.build_key(a) != _torch_ext.build_key(replace(a, torch_version="2.12.0"))
    assert _torch_ext.build_key(a) != _torch_ext.build_key(replace(a, archs=["100"]))


def test_the_override_directory_comes_first(tmp_path, monkeypatch):
    key = "0123456789abcdef"
    name = _torch_ext.module_name(key) + _torch_ext._ext_suffix()
    monkeypatch.setenv(_torch_ext.EXT_DIR_ENV, str(tmp_path))
    assert _torch_ext.cache_dir() == tmp_path
    assert _torch_ext.find_built(key) is None
    (tmp_path / name).write_bytes(b"")
    assert _torch_ext.find_built(key) == tmp_path / name
