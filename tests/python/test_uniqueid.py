"""The unique id: bytes-backed, picklable, hex round trip."""
import ctypes
import pickle

import pytest

import cco
from cco import CCOInvalidArgument, Communicator, UniqueId, _abi, _lib


def test_pickle_round_trip():
    uid = Communicator.get_unique_id()
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(uid, protocol=proto))
        assert isinstance(back, UniqueId) and back == uid and hash(back) == hash(uid)
        assert bytes(back) == bytes(uid) and len(bytes(back)) == 128


def test_hex_round_trip_matches_the_c_text_form():
    uid = Communicator.get_unique_id()
    text = uid.hex()
    assert len(text) == 256 and text == text.lower()
    buf = ctypes.create_string_buffer(_abi.UNIQUE_ID_STRING_BYTES)
    assert _lib.load().ccoUniqueIdToString(ctypes.byref(uid._struct()), buf, len(buf)) == 0
    assert buf.value.decode() == text
    assert UniqueId.from_hex(text) == uid
    assert UniqueId.from_hex(f"  {text}\n") == uid  # whitespace is accepted


def test_ids_differ_and_repr_hides_the_secret():
    a, b = Communicator.get_unique_id(), Communicator.get_unique_id()
    assert a != b
    assert a.hex() not in repr(a) and "secret" in repr(a)


def test_from_env(monkeypatch):
    uid = Communicator.get_unique_id()
    monkeypatch.setenv("CCO_UNIQUE_ID", uid.hex())
    assert UniqueId.from_env() == uid
    monkeypatch.delenv("CCO_UNIQUE_ID")
    with pytest.raises(CCOInvalidArgument, match="not set"):
        UniqueId.from_env()


@pytest.mark.parametrize("bad", ["", "zz" * 128, "00" * 128, "ab" * 127])
def test_bad_hex_is_refused_by_the_library(bad):
    with pytest.raises(CCOInvalidArgument) as info:
        UniqueId.from_hex(bad)
    assert info.value.detail  # the library says why


@pytest.mark.parametrize("raw", [b"", b"x" * 127, b"x" * 129])
def test_bad_length(raw):
    with pytest.raises(CCOInvalidArgument, match="128 bytes"):
        UniqueId(raw)


def test_init_accepts_hex_and_bytes():
    uid = Communicator.get_unique_id()
    with Communicator.init(1, 0, uid.hex()) as comm:
        assert comm.size == 1
    uid = Communicator.get_unique_id()
    with Communicator.init(1, 0, bytes(uid)) as comm:
        assert comm.rank == 0
    assert isinstance(cco.UniqueId, type)
