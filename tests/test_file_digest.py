"""`file_digest` and `read_input_file`: one read of a regular file; anything else refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from trustbench._canonical import file_digest, file_sha256, read_input_file
from trustbench.errors import InputError


@pytest.mark.parametrize("size", [0, 1, 4096, (1 << 20) + 7])
def test_the_digest_and_size_are_those_of_the_files_bytes(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    path = tmp_path / "f.bin"
    path.write_bytes(data)
    assert file_digest(path) == (hashlib.sha256(data).hexdigest(), size)
    assert file_sha256(path) == hashlib.sha256(data).hexdigest()


def test_a_folder_a_pipe_and_a_missing_path_are_refused_without_blocking(tmp_path: Path) -> None:
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # opened for reading without a writer, a pipe would block forever
    for path in (tmp_path, pipe, tmp_path / "missing"):
        with pytest.raises(FileNotFoundError):
            file_digest(path)


def test_an_input_file_is_read_whole_up_to_its_bound_and_refused_past_it(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_bytes(b"x" * 10)
    assert read_input_file(path, max_bytes=10) == b"x" * 10
    with pytest.raises(InputError, match="larger than 9 bytes") as refused:
        read_input_file(path, max_bytes=9)
    assert refused.value.location == str(path)


def test_an_input_that_is_not_a_regular_file_is_refused_naming_it_without_blocking(
    tmp_path: Path,
) -> None:
    pipe = tmp_path / "spec.toml"
    os.mkfifo(pipe)  # no writer: a plain open would block, a read would wait for ever
    expected = {
        pipe: "not a regular file",
        tmp_path: "is a folder",
        tmp_path / "missing.toml": "not found",
    }
    for path, message in expected.items():
        with pytest.raises(InputError, match=message) as refused:
            read_input_file(path)
        assert refused.value.location == str(path)
