"""ctypes mirrors of the C structures that cross the Python/C boundary.

Each layout is copied field by field from the public headers, which assert
their sizes and offsets; ``tests/python/test_abi.py`` checks these mirrors
against the same numbers read from the header text, so a change on the C
side fails a test instead of corrupting memory.
"""
from __future__ import annotations

import ctypes

UNIQUE_ID_BYTES = 128  # CCO_UNIQUE_ID_BYTES
UNIQUE_ID_STRING_BYTES = 2 * UNIQUE_ID_BYTES + 1  # CCO_UNIQUE_ID_STRING_BYTES

WINDOW_MAGIC = 0x57494E44  # CCO_WINDOW_MAGIC
DEV_COMM_REQUIREMENTS_MAGIC = 0x43435251  # CCO_DEV_COMM_REQUIREMENTS_MAGIC
DEV_COMM_REQUIREMENTS_VERSION = 1  # CCO_DEV_COMM_REQUIREMENTS_VERSION
DEV_COMM_MAGIC = 0x44434F43  # CCO_DEV_COMM_MAGIC
DEV_COMM_VERSION = 1  # CCO_DEV_COMM_VERSION


class UniqueIdStruct(ctypes.Structure):
    """``ccoUniqueId``: 128 opaque bytes (passed by value to ccoCommCreate)."""

    _fields_ = [("internal", ctypes.c_ubyte * UNIQUE_ID_BYTES)]


class TeamStruct(ctypes.Structure):
    """``ccoTeam``: a team as seen from this rank."""

    _fields_ = [
        ("nRanks", ctypes.c_int32),
        ("rank", ctypes.c_int32),
        ("stride", ctypes.c_int32),
    ]


class WindowDeviceStruct(ctypes.Structure):
    """``ccoWindowDevice``: the descriptor a ``ccoWindow_t`` points at."""

    _fields_ = [
        ("winBase", ctypes.c_uint64),
        ("stride4G", ctypes.c_uint32),
        ("lsaRank", ctypes.c_int32),
        ("lsaSize", ctypes.c_int32),
        ("magic", ctypes.c_uint32),
        ("size", ctypes.c_uint64),
        ("offset", ctypes.c_uint64),
        ("rank", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("netInfo", ctypes.c_uint64),
        ("reserved", ctypes.c_uint64),
    ]

    def peer_address(self, peer_lsa_rank: int, offset: int = 0) -> int:
        """``winBase + peer * (stride4G << 32) + offset``, as ccoGetLsaPeerPtr computes it."""
        return self.winBase + peer_lsa_rank * (self.stride4G << 32) + offset


class DevCommStruct(ctypes.Structure):
    """``ccoDevComm``: what kernels take by value (256 bytes)."""

    _fields_ = [
        ("magic", ctypes.c_uint32),
        ("version", ctypes.c_uint32),
        ("rank", ctypes.c_int32),
        ("worldSize", ctypes.c_int32),
        ("lsaRank", ctypes.c_int32),
        ("lsaSize", ctypes.c_int32),
        ("node", ctypes.c_int32),
        ("nNodes", ctypes.c_int32),
        ("teams", TeamStruct * 4),
        ("teamMembers", ctypes.c_uint64 * 4),
        ("flatBase", ctypes.c_uint64),
        ("slotSize", ctypes.c_uint64),
        ("resourceWindow", ctypes.c_uint64),  # ccoWindow_t
        ("resourceBase", ctypes.c_uint64),
        ("abortFlag", ctypes.c_uint64),
        ("lsaBarrierCount", ctypes.c_uint32),
        ("barrierCount", ctypes.c_uint32),
        ("lsaBarrierOffset", ctypes.c_uint32),
        ("lsaEpochOffset", ctypes.c_uint32),
        ("sdmaQueueCount", ctypes.c_uint32),
        ("gdaConnectionType", ctypes.c_uint32),
        ("gdaContextCount", ctypes.c_uint32),
        ("gdaSignalCount", ctypes.c_uint32),
        ("gdaCounterCount", ctypes.c_uint32),
        ("gdaQueueDepth", ctypes.c_uint32),
        ("sdma", ctypes.c_uint64),
        ("gda", ctypes.c_uint64),
        ("handle", ctypes.c_uint64),
        ("lsaScopeGpu", ctypes.c_uint32),  # 1: every LSA peer is this GPU (GPU-scope ordering)
        ("pad0", ctypes.c_uint32),
        ("reserved", ctypes.c_uint64 * 4),
    ]


class DevCommRequirementsStruct(ctypes.Structure):
    """``ccoDevCommRequirements`` with the C field names; see
    :class:`cco.devcomm.CCODevCommRequirements` for the Python face."""

    _fields_ = [
        ("size", ctypes.c_uint32),
        ("magic", ctypes.c_uint32),
        ("version", ctypes.c_uint32),
        ("gdaConnectionType", ctypes.c_uint32),
        ("gdaContextCount", ctypes.c_uint32),
        ("gdaSignalCount", ctypes.c_uint32),
        ("gdaCounterCount", ctypes.c_uint32),
        ("gdaQueueDepth", ctypes.c_uint32),
        ("gdaTrafficClass", ctypes.c_uint32),
        ("lsaBarrierCount", ctypes.c_uint32),
        ("railGdaBarrierCount", ctypes.c_uint32),
        ("sdmaQueueCount", ctypes.c_uint32),
        ("barrierCount", ctypes.c_uint32),
        ("reserved", ctypes.c_uint32 * 3),
    ]
