"""Unpredictable random bits for ids a candidate must not guess, drawn from the OS in blocks.

`secrets.randbits` makes one `getrandom` system call per id. That call releases the GIL, and
getting it back behind the ledger's writer thread cost up to 0.1 ms per trial on the event
loop. The bytes here come from the same source (`os.urandom`), only 4 KiB at a time: each id
is still 128 bits no one outside this process can predict. The block is discarded in a forked
child, so two processes never hand out the same ids.
"""

from __future__ import annotations

import os
import threading

_BLOCK = 4096
"""Bytes fetched from the OS at a time (256 ids of 128 bits)."""


class _Pool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer = b""
        self._offset = 0

    def take(self, size: int) -> bytes:
        with self._lock:
            if self._offset + size > len(self._buffer):
                self._buffer, self._offset = os.urandom(max(_BLOCK, size)), 0
            start = self._offset
            self._offset += size
            return self._buffer[start : self._offset]

    def forget(self) -> None:
        self._lock = threading.Lock()  # a lock held by another thread at fork stays held
        self._buffer, self._offset = b"", 0


_POOL = _Pool()
os.register_at_fork(after_in_child=_POOL.forget)


def random_bits(bits: int) -> int:
    """A uniformly random non-negative integer below `2**bits` from the OS's CSPRNG.

    Args:
        bits: How many random bits; a multiple of 8.
    """
    if bits <= 0 or bits % 8:
        raise ValueError(f"bits must be a positive multiple of 8, not {bits}")
    return int.from_bytes(_POOL.take(bits // 8), "big")
