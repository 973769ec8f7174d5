"""Unpredictable ids: drawn from the OS in blocks, never repeated, never shared with a fork."""

from __future__ import annotations

import os

import pytest

from trustbench._unpredictable import random_bits


def test_ids_drawn_across_many_blocks_are_distinct_and_in_range() -> None:
    ids = [random_bits(128) for _ in range(2000)]  # about eight 4 KiB blocks
    assert len(set(ids)) == len(ids)
    assert all(0 <= value < 2**128 for value in ids)
    # Uniform bits: the top bit is set in about half of them (binomial sd about 22).
    assert 850 < sum(value >> 127 for value in ids) < 1150


def test_a_forked_child_does_not_repeat_the_parents_next_ids() -> None:
    random_bits(128)  # a block is now buffered in the parent
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(write, random_bits(128).to_bytes(16, "big"))
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    childs = int.from_bytes(os.read(read, 16), "big")
    assert childs != random_bits(128)


def test_bits_must_be_whole_bytes() -> None:
    with pytest.raises(ValueError, match="multiple of 8"):
        random_bits(12)
