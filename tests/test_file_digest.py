"""`file_digest`: the hash and the size of one read of a regular file; anything else refused."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from trustbench._canonical import file_digest, file_sha256


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
