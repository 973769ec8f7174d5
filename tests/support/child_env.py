"""The environment a test gives every process it starts: built from an allow-list, never inherited.

A child that inherits the test runner's environment inherits the user's shell: a
`TRUSTBENCH_CACHE` or `TRUSTBENCH_HELDOUT_KEY` changes what trustbench reads, a proxy variable
sends its 127.0.0.1 requests elsewhere, a CA bundle changes which servers it trusts, and a
`HOME` it may not write to breaks caches. So a child gets only what Python and the test need:

- `PATH`, and the variables the interpreter itself may need to start (`PYTHONHOME`,
  `LD_LIBRARY_PATH`, and on Windows `SYSTEMROOT`), when the caller has them;
- the locale (`LANG`, `LC_ALL`, `LC_CTYPE`), so text decodes as it does in the test process;
- `TMPDIR` and `HOME` inside the test's own temporary folder;
- `PYTHONPATH`: first the folder the test process imported `trustbench` from, so the child
  runs the code under test (a source tree or a worktree: the environment's editable install
  may point at another checkout; an installed package is found without it), then the folders
  the test names, then the caller's own entries. The caller's entries are kept, last, because
  a suite run from a source tree (`PYTHONPATH=src python -m pytest`) may find its packages
  through them, and placed after the tested package they cannot replace it;
- whatever the test adds.

Nothing else: no `TRUSTBENCH_*` setting, no proxy, no CA bundle, no `PYTHONPATH` entry of
the user's ahead of the code under test.
"""

from __future__ import annotations

import os
import site
from collections.abc import Mapping, Sequence
from pathlib import Path

import trustbench

KEPT_FROM_CALLER = (
    "PATH",
    "PYTHONHOME",
    "LD_LIBRARY_PATH",
    "SYSTEMROOT",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "PYTHONPYCACHEPREFIX",
)
"""The only variables a child inherits from the test process (each only when it is set): with
`PYTHONPYCACHEPREFIX` (which `make test` sets) a child caches its bytecode there too, not
beside the sources in the checkout."""

TESTED_SOURCE_ROOT = Path(trustbench.__file__).resolve().parents[1]
"""The folder holding the `trustbench` package the tests import (`src/` in a checkout)."""

SUITE_SETTINGS = frozenset({"TRUSTBENCH_SCREENSHOTS", "TRUSTBENCH_TEST_MODEL_CACHE"})
"""`TRUSTBENCH_*` variables that configure the test suite, not trustbench: the test process
reads them (where to keep screenshots, the dequantised test model); no child receives them."""

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
"""Read by aiohttp (`trust_env`), urllib and gRPC in either case: a proxy would carry the
tests' 127.0.0.1 requests to another address."""

TRUST_STORE_VARIABLES = ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE")
"""Change which TLS servers a client trusts; tests that need one set it themselves."""


def _on_default_path(folder: Path) -> bool:
    """Whether a plain `python` already imports from `folder` (an installed package)."""
    installed = [*site.getsitepackages(), site.getusersitepackages()]
    return any(Path(entry).resolve() == folder for entry in installed)


def user_settings(environ: Mapping[str, str]) -> list[str]:
    """The user's variables in `environ` that would change what a test of trustbench sees.

    Every `TRUSTBENCH_*` but the suite's own settings, every proxy variable (any case) and
    every CA-bundle variable. The root conftest removes them from the test process for the
    session; `child_env` never copies them.
    """
    return [
        name
        for name in environ
        if (name.startswith("TRUSTBENCH_") and name not in SUITE_SETTINGS)
        or name.lower() in PROXY_VARIABLES
        or name in TRUST_STORE_VARIABLES
    ]


def child_env(
    tmp: Path,
    *,
    pythonpath: Sequence[str | Path] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment for a process a test starts.

    Args:
        tmp: The test's temporary folder; the child's `HOME` and `TMPDIR` are made inside it.
        pythonpath: Folders the child imports from after the tested package (for example the
            checkout's root, for `python -m tests.support...`).
        extra: Variables the test sets for the child; they win over everything above.

    Returns:
        A new dict: pass it as `env=` to `subprocess.run` / `Popen`.
    """
    home, temp = tmp / "child-home", tmp / "child-tmp"
    home.mkdir(parents=True, exist_ok=True)
    temp.mkdir(parents=True, exist_ok=True)
    env = {name: os.environ[name] for name in KEPT_FROM_CALLER if name in os.environ}
    env.setdefault("PATH", os.defpath)
    caller_path = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    tested = [] if _on_default_path(TESTED_SOURCE_ROOT) else [str(TESTED_SOURCE_ROOT)]
    entries = [*tested, *map(str, pythonpath), *caller_path]
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(entries))
    env["HOME"] = str(home)
    env["TMPDIR"] = str(temp)
    env.update(extra or {})
    return env
