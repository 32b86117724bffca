"""Device communicators: the requirements struct and the handle.

:class:`CCODevCommRequirements` *is* the C ``ccoDevCommRequirements`` (a
ctypes Structure with the same layout), starting from
``CCO_DEV_COMM_REQUIREMENTS_INITIALIZER``, with the guide's snake_case names (docs/design.md)
as properties. Setting a name that is not a field raises ``AttributeError``
(a typo would otherwise be silently ignored), and a value that does not fit
a ``uint32_t`` raises :class:`~cco.errors.CCOArgumentOverflow`, an
``OverflowError`` and a ``CCOInvalidArgument`` (ctypes would otherwise wrap
-1 to 4294967295). Range checks per field are the library's:
``create_dev_comm`` fails with the field named.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Dict, Tuple

from ._abi import (
    DEV_COMM_REQUIREMENTS_MAGIC,
    DEV_COMM_REQUIREMENTS_VERSION,
    DevCommRequirementsStruct,
    DevCommStruct,
)
from ._convert import UINT32, to_c
from .resources import Resource

if TYPE_CHECKING:  # pragma: no cover
    from .communicator import Communicator

# ccoGdaConnectionType_t
GDA_CONNECTION_NONE = 0
GDA_CONNECTION_CROSSNODE = 1
GDA_CONNECTION_FULL = 2
GDA_CONNECTION_RAIL = 3

# ccoTeamKind_t
TEAM_WORLD = 0
TEAM_LSA = 1
TEAM_CROSS_NODE = 2
TEAM_RAIL = 3

# snake_case name -> C field name.
REQUIREMENT_FIELDS: Dict[str, str] = {
    "gda_connection_type": "gdaConnectionType",
    "gda_context_count": "gdaContextCount",
    "gda_signal_count": "gdaSignalCount",
    "gda_counter_count": "gdaCounterCount",
    "gda_queue_depth": "gdaQueueDepth",
    "gda_traffic_class": "gdaTrafficClass",
    "lsa_barrier_count": "lsaBarrierCount",
    "rail_gda_barrier_count": "railGdaBarrierCount",
    "sdma_queue_count": "sdmaQueueCount",
    "barrier_count": "barrierCount",
}

# CCO_DEV_COMM_REQUIREMENTS_INITIALIZER, field by field.
REQUIREMENT_DEFAULTS: Dict[str, int] = {
    "gda_connection_type": GDA_CONNECTION_CROSSNODE,
    "gda_context_count": 1,
    "gda_signal_count": 64,
    "gda_counter_count": 64,
    "gda_queue_depth": 1024,
    "gda_traffic_class": 0,
    "lsa_barrier_count": 1,
    "rail_gda_barrier_count": 0,
    "sdma_queue_count": 0,
    "barrier_count": 0,
}

_C_NAMES = {field[0] for field in DevCommRequirementsStruct._fields_}


class CCODevCommRequirements(DevCommRequirementsStruct):
    """``ccoDevCommRequirements``: what ``create_dev_comm`` allocates.

    Keyword arguments set fields: ``CCODevCommRequirements(lsa_barrier_count=4)``.
    """

    def __init__(self, **fields: int) -> None:
        super().__init__()
        super().__setattr__("size", ctypes.sizeof(DevCommRequirementsStruct))
        super().__setattr__("magic", DEV_COMM_REQUIREMENTS_MAGIC)
        super().__setattr__("version", DEV_COMM_REQUIREMENTS_VERSION)
        for name, value in REQUIREMENT_DEFAULTS.items():
            setattr(self, name, value)
        for name, value in fields.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        if name in REQUIREMENT_FIELDS:
            super().__setattr__(REQUIREMENT_FIELDS[name], to_c(UINT32, name, value))
        elif name in _C_NAMES and name != "reserved":
            super().__setattr__(name, to_c(UINT32, name, value))
        else:
            raise AttributeError(
                f"ccoDevCommRequirements has no field {name!r}; fields: "
                + ", ".join(REQUIREMENT_FIELDS)
            )

    def as_dict(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in REQUIREMENT_FIELDS}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DevCommRequirementsStruct):
            return NotImplemented
        return bytes(self) == bytes(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    def __repr__(self) -> str:
        body = ", ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"CCODevCommRequirements({body})"


def _field_property(c_name: str) -> property:
    def get(self: CCODevCommRequirements) -> int:
        return getattr(self, c_name)

    return property(get, doc=f"``{c_name}`` of ccoDevCommRequirements")


for _snake, _c in REQUIREMENT_FIELDS.items():
    # Reading goes through the property; writing through __setattr__ above.
    setattr(CCODevCommRequirements, _snake, _field_property(_c))


class DevComm(Resource):
    """A device communicator (``ccoDevComm``).

    ``struct`` is the host copy kernels can take by value; ``ptr`` the
    device copy from ``ccoDevCommCopyToDevice`` for kernels that take a
    pointer (cupy, Triton), freed with the device communicator.
    """

    kind = "device communicator"

    def __init__(self, comm: "Communicator", struct: DevCommStruct, ptr: int) -> None:
        super().__init__(comm)
        self._struct = struct
        self._ptr = ptr

    @property
    def ptr(self) -> int:
        self._check_alive()
        return self._ptr

    @property
    def struct(self) -> DevCommStruct:
        self._check_alive()
        return self._struct

    @property
    def rank(self) -> int:
        return self.struct.rank

    @property
    def world_size(self) -> int:
        return self.struct.worldSize

    @property
    def lsa_rank(self) -> int:
        return self.struct.lsaRank

    @property
    def lsa_size(self) -> int:
        return self.struct.lsaSize

    @property
    def node(self) -> int:
        return self.struct.node

    @property
    def node_count(self) -> int:
        return self.struct.nNodes

    @property
    def flat_va(self) -> Tuple[int, int]:
        """(flat VA base, slot size)."""
        return self.struct.flatBase, self.struct.slotSize

    @property
    def resource_window(self) -> int:
        """The ``ccoWindow_t`` of the barrier/signal resources."""
        return self.struct.resourceWindow

    def to_bytes(self) -> bytes:
        """The 256 bytes of ``ccoDevComm``, to pass by value."""
        return bytes(self.struct)

    def _release_c(self) -> int:
        return self._comm._lib.ccoDevCommDestroy(self._comm._h, ctypes.byref(self._struct))

    def release(self) -> None:
        self._comm.destroy_dev_comm(self)

    destroy = release

    def __repr__(self) -> str:
        if not self._alive:
            return "DevComm(released)"
        s = self._struct
        return (f"DevComm(rank={s.rank}, world_size={s.worldSize}, lsa_rank={s.lsaRank}, "
                f"lsa_size={s.lsaSize}, ptr={self._ptr:#x})")
