"""The writer's compression against a base: primed once per base, read back by any reader."""

from __future__ import annotations

import hashlib
import random
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from trustbench.core.ledger._contents import (
    COMPRESSION_LEVEL,
    BaseCompressor,
    NewContent,
    mem_level,
    window_bits,
)


def _unpack(body: bytes, base: bytes) -> bytes:
    """What `ContentReader.text` does: a default window, the base as preset dictionary."""
    unpacker = zlib.decompressobj(zdict=base)
    return unpacker.decompress(body) + unpacker.flush()


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _noise(size: int, seed: int) -> bytes:
    """Hex digits that compress poorly alone, so only matches against the base make them small."""
    rng = random.Random(seed)
    return "".join(f"{rng.getrandbits(32):08x}" for _ in range(size // 8 + 1))[:size].encode()


def _one_change(base: bytes, at: int) -> bytes:
    return base[:at] + b"rtb-0123456789abcdef0123456789abcdef" + base[at + 36 :]


@given(
    base=st.binary(min_size=1, max_size=6000),
    data=st.binary(max_size=6000),
    repeats=st.integers(min_value=1, max_value=3),
)
@settings(max_examples=60, deadline=None)
def test_a_body_compressed_against_a_base_reads_back_with_a_default_window(
    base: bytes, data: bytes, repeats: int
) -> None:
    compressor = BaseCompressor()
    for _ in range(repeats):  # the first call primes, later ones copy the primed compressor
        body = compressor.against(data, (_digest(base), base))
        assert _unpack(body, base) == data


def test_a_copied_primed_compressor_writes_the_bytes_a_fresh_one_writes() -> None:
    base = _noise(2700, 1)
    compressor = BaseCompressor()
    for seed in range(4):
        data = _one_change(base, 100 + 300 * seed)
        wbits = window_bits(len(base), len(data))
        fresh = zlib.compressobj(
            COMPRESSION_LEVEL, zlib.DEFLATED, wbits, mem_level(wbits), zdict=base
        )
        expected = fresh.compress(data) + fresh.flush()
        assert compressor.against(data, (_digest(base), base)) == expected


def test_a_near_copy_of_a_large_base_is_a_few_bytes_whatever_the_window() -> None:
    # The window must reach back to the same offset in the base: with a window smaller than
    # the base, a 20 kB near-copy of hex noise would cost kilobytes.
    for size in (300, 2700, 9000, 20000):
        base = _noise(size, size)
        data = _one_change(base, size // 2)
        body = BaseCompressor().against(data, (_digest(base), base))
        # deflate matches at most 258 bytes at a time: about 3 bytes per 258 of the base.
        assert len(body) < 64 + size // 64, (size, len(body))
        assert _unpack(body, base) == data


def test_window_bits_cover_the_base_and_the_body_within_zlibs_range() -> None:
    assert window_bits(10, 10) == 9
    assert window_bits(2672, 2680) == 12
    assert window_bits(40000, 10) == 15
    for size in range(1, 33000, 97):
        wbits = window_bits(size, size // 2)
        assert 9 <= wbits <= 15
        assert wbits == 15 or (1 << wbits) - 262 >= size


def test_primed_compressors_stay_within_their_memory_bound() -> None:
    compressor = BaseCompressor()
    compressor.MAX_BYTES = 200_000
    for seed in range(40):
        base = _noise(2700, seed)
        compressor.against(_one_change(base, 50), (_digest(base), base))
        assert compressor._bytes <= compressor.MAX_BYTES
    assert 1 < len(compressor._primed) < 40
    # The newest bases are the ones kept.
    assert (_digest(_noise(2700, 39)), 12) in compressor._primed


def test_a_new_content_without_a_base_is_compressed_alone() -> None:
    data = _noise(500, 7)
    sql, (digest, body, base) = NewContent(_digest(data), data, None).statement(BaseCompressor())
    assert sql.startswith("INSERT OR IGNORE INTO contents")
    assert (digest, base) == (_digest(data), None)
    assert zlib.decompress(body) == data
