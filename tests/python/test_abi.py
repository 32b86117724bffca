"""ctypes mirrors against the layouts the C headers declare and assert."""
import ctypes
import re

import pytest

from conftest import REPO

from cco import _abi
from cco.devcomm import REQUIREMENT_DEFAULTS, REQUIREMENT_FIELDS, CCODevCommRequirements

HEADERS = REPO / "include" / "cco"
MIRRORS = {
    "ccoDevCommRequirements": _abi.DevCommRequirementsStruct,
    "ccoDevComm": _abi.DevCommStruct,
    "ccoTeam": _abi.TeamStruct,
    "ccoWindowDevice": _abi.WindowDeviceStruct,
}


def _text(*names):
    return "\n".join((HEADERS / n).read_text() for n in names)


def _strip_comments(text):
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


def _c_fields(name):
    """Field names, in order, of `typedef struct [tag] { ... } name;`."""
    text = _strip_comments(_text("cco_devcomm.h", "cco_window.h"))
    m = re.search(r"typedef struct\s*\w*\s*\{([^{}]*)\}\s*" + re.escape(name) + r";", text)
    assert m, name
    fields = []
    for decl in m.group(1).split(";"):
        decl = decl.strip()
        if decl:
            fields.append(re.match(r".*?(\w+)\s*(\[[^\]]*\])?$", decl, re.S).group(1))
    return fields


def _c_enum(name):
    """Enumerators and their values of `typedef enum { ... } name;` in cco_devcomm.h."""
    text = _strip_comments(_text("cco_devcomm.h"))
    m = re.search(r"typedef enum\s*\{([^{}]*)\}\s*" + re.escape(name) + r";", text)
    assert m, name
    return {k: int(v, 0) for k, v in re.findall(r"(\w+)\s*=\s*(\w+)", m.group(1))}


# Python's names (unchanged since 0.1) of the C enumerators they mirror.
ENUM_MIRRORS = {
    "ccoGdaConnectionType_t": {"ccoGdaConnectionNone": "GDA_CONNECTION_NONE",
                               "ccoGdaConnectionCrossNode": "GDA_CONNECTION_CROSSNODE",
                               "ccoGdaConnectionFull": "GDA_CONNECTION_FULL",
                               "ccoGdaConnectionRail": "GDA_CONNECTION_RAIL"},
    "ccoTeamKind_t": {"ccoTeamWorld": "TEAM_WORLD", "ccoTeamLsa": "TEAM_LSA",
                      "ccoTeamCrossNode": "TEAM_CROSS_NODE", "ccoTeamRail": "TEAM_RAIL"},
}


@pytest.mark.parametrize("enum", sorted(ENUM_MIRRORS))
def test_enum_mirrors_match_the_header(enum):
    import cco
    c_values = _c_enum(enum)
    assert set(c_values) == set(ENUM_MIRRORS[enum]), enum
    for c_name, py_name in ENUM_MIRRORS[enum].items():
        assert getattr(cco.devcomm, py_name) == c_values[c_name], (c_name, py_name)
        assert getattr(cco, py_name) == c_values[c_name], py_name


@pytest.mark.parametrize("name", sorted(MIRRORS))
def test_field_names_and_order(name):
    assert [f for f, _ in MIRRORS[name]._fields_] == _c_fields(name)


def test_static_asserts_hold_for_the_mirrors():
    text = _text("cco_devcomm.h", "cco_window.h")
    sizes = re.findall(r"static_assert_?\w*\(sizeof\((\w+)\)\s*==\s*(\d+)", text, flags=re.I)
    offsets = re.findall(r"static_assert_?\w*\(offsetof\((\w+),\s*(\w+)\)\s*==\s*(\d+)", text, flags=re.I)
    assert len(sizes) >= 4 and len(offsets) >= 10
    for name, size in sizes:
        assert ctypes.sizeof(MIRRORS[name]) == int(size), name
    for name, field, off in offsets:
        assert getattr(MIRRORS[name], field).offset == int(off), (name, field)


def test_requirements_defaults_match_the_initializer():
    text = _strip_comments(_text("cco_devcomm.h"))
    body = text[text.index("#define CCO_DEV_COMM_REQUIREMENTS_INITIALIZER"):]
    body = body[body.index("{") + 1:]
    values = [v.strip() for v in re.sub(r"\\\n", " ", body).split("{")[0].split(",")][3:]
    values = [v for v in values if v]
    symbols = _c_enum("ccoGdaConnectionType_t")
    parsed = [symbols[v] if v in symbols else int(v) for v in values]
    assert parsed == [REQUIREMENT_DEFAULTS[k] for k in REQUIREMENT_FIELDS]
    reqs = CCODevCommRequirements()
    assert reqs.size == 64 and reqs.magic == 0x43435251 and reqs.version == 1
    assert reqs.as_dict() == REQUIREMENT_DEFAULTS


def test_magic_constants_match_headers():
    text = _text("cco_devcomm.h", "cco_window.h", "cco.h")
    for macro, value in [("CCO_DEV_COMM_REQUIREMENTS_MAGIC", _abi.DEV_COMM_REQUIREMENTS_MAGIC),
                         ("CCO_DEV_COMM_MAGIC", _abi.DEV_COMM_MAGIC),
                         ("CCO_WINDOW_MAGIC", _abi.WINDOW_MAGIC),
                         ("CCO_UNIQUE_ID_BYTES", _abi.UNIQUE_ID_BYTES)]:
        m = re.search(r"#define " + macro + r"\s+(0x[0-9a-fA-F]+|\d+)", text)
        assert m and int(m.group(1), 0) == value, macro


def test_snake_case_names_map_onto_c_fields():
    reqs = CCODevCommRequirements()
    for snake, c_name in REQUIREMENT_FIELDS.items():
        setattr(reqs, snake, 7)
        assert getattr(reqs, c_name) == 7 and getattr(reqs, snake) == 7
    raw = bytes(reqs)
    assert len(raw) == 64 and raw[36:40] == (7).to_bytes(4, "little")  # lsaBarrierCount at 36
