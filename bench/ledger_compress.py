"""Ledger compression bench: a review trial's two bodies compressed against their bases.

Run: `python -m bench.ledger_compress` from the repository root (options: `--help`).

Each case of the built-in corpus gives a base (its first trial's user message and reply) and a
body of a later trial (a fresh evaluation id). The baseline, measured in the same run, loads the
base as zlib's preset dictionary for every body (`compressobj(zdict=base)`, what the writer did
before); trustbench copies a compressor primed once per base (`BaseCompressor`). Both streams
are checked to decompress to the body, and their sizes are printed. Best of `--repeat` timings.
"""

from __future__ import annotations

import argparse
import timeit
import zlib

from bench._common import machine
from bench._workload import corpus, reference_reply, review_messages
from trustbench.core.ledger._contents import COMPRESSION_LEVEL, BaseCompressor


def _pairs(cases: int) -> list[tuple[bytes, tuple[str, bytes]]]:
    """(body, (base digest, base text)) for a user message and a reply of each case."""
    pairs = []
    for index in range(min(cases, len(corpus().cases))):
        first, _ = review_messages(index)
        later, _ = review_messages(index)
        for base, body in (
            (first[1]["content"], later[1]["content"]),
            (reference_reply({"messages": first}), reference_reply({"messages": later})),
        ):
            pairs.append((body.encode(), (f"{index}:{len(pairs)}", base.encode())))
    return pairs


def _fresh(data: bytes, base: tuple[str, bytes]) -> bytes:
    packer = zlib.compressobj(COMPRESSION_LEVEL, zdict=base[1])
    return packer.compress(data) + packer.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    pairs = _pairs(args.cases)
    primed = BaseCompressor()
    results = {}
    for name, compress in (("fresh dictionary", _fresh), ("BaseCompressor", primed.against)):
        for body, base in pairs:  # checked, and (for BaseCompressor) primed before timing
            unpacker = zlib.decompressobj(zdict=base[1])
            packed = compress(body, base)
            assert unpacker.decompress(packed) + unpacker.flush() == body, name
        size = sum(len(compress(body, base)) for body, base in pairs)
        best = min(
            timeit.repeat(
                lambda c=compress: [c(body, base) for body, base in pairs],
                number=20,
                repeat=args.repeat,
            )
        )
        results[name] = (best / 20 / (len(pairs) / 2), size / (len(pairs) / 2))
    print(f"ledger compression: {len(pairs) // 2} trials (two bodies each); {machine()}")
    for name, (seconds, size) in results.items():
        print(f"  {name:18s} {1e6 * seconds:6.2f} us per trial, {size:5.0f} B per trial")
    old, new = results["fresh dictionary"][0], results["BaseCompressor"][0]
    print(f"  BaseCompressor / fresh dictionary: {new / old:.2f}x time")


if __name__ == "__main__":
    main()
