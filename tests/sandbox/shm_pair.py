"""Two candidates that try to pass state through System V shared memory (written as a cheat would).

`write_secret` puts a message in a segment under a key both know; `read_secret` looks for it,
through plain ctypes calls (`shmget`, `shmat`), no package. `shm_adapters.py` makes the same
two moves as TRB adapters.
"""

from __future__ import annotations

import ctypes

KEY = 0x54524253  # "TRBS"
SIZE = 4096
MESSAGE = b"the eval split's labels are ..."
_IPC_CREAT, _IPC_RMID = 0o1000, 0

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
_libc.shmdt.argtypes = [ctypes.c_void_p]
_libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]


def write_secret() -> bool:
    """Create the segment and write the message; whether it worked."""
    segment = _libc.shmget(KEY, SIZE, _IPC_CREAT | 0o666)
    if segment < 0:
        return False
    address = _libc.shmat(segment, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return False
    ctypes.memmove(address, MESSAGE, len(MESSAGE))
    _libc.shmdt(address)
    return True


def read_secret() -> bytes:
    """The message, if a segment under the key holds it (else empty)."""
    segment = _libc.shmget(KEY, 0, 0)
    if segment < 0:
        return b""
    address = _libc.shmat(segment, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return b""
    found = ctypes.string_at(address, len(MESSAGE))
    _libc.shmdt(address)
    return found


def remove_secret() -> None:
    """Remove the segment from this IPC namespace (cleanup after the unconfined control)."""
    segment = _libc.shmget(KEY, 0, 0)
    if segment >= 0:
        _libc.shmctl(segment, _IPC_RMID, None)
