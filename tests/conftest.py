"""Suite-wide test settings.

Hypothesis keeps no example database and its storage folder lives in the system temp folder:
by default it writes `.hypothesis/` into the working folder, and tests must write nothing into
the checkout.

The suite passes whatever the user's shell exports: for the whole session the test process
drops the user's `TRUSTBENCH_*` settings, proxies and CA bundles (`user_settings`) and gets a
`HOME` and a `TRUSTBENCH_CACHE` of its own, so in-process CLI tests and session fixtures read
only what the suite sets. Processes a test starts get `tests.support.child_env.child_env`,
never `os.environ`.

`demo_run` (`tests.support.demo_run`) is the one `trustbench demo` of the session: the demo test
and the tests of each RTB track's demo read its runs, so each demo track runs once.
"""

import os
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir
from tests.support.child_env import user_settings
from tests.support.demo_run import DEMO_TIMEOUT_S, demo_run  # noqa: F401  (fixture)

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="trustbench-hypothesis-"))
settings.register_profile("trustbench", database=None)
settings.load_profile("trustbench")


@pytest.fixture(scope="session", autouse=True)
def _no_user_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Session-wide, so session and module fixtures (which set their own caches) see it too."""
    with pytest.MonkeyPatch.context() as patch:
        for name in user_settings(os.environ):
            patch.delenv(name)
        patch.setenv("HOME", str(tmp_path_factory.mktemp("home")))
        # Trained TRB checkpoints in one folder per session, the one tests/trb/conftest.py
        # names: the demo test and the TRB tests train each model once between them.
        patch.setenv("TRUSTBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "trb-cache"))
        yield


SHARED_FIXTURE_FILES = {
    "tests/test_demo.py": "demo",
    "tests/rtb/test_review_track_demo.py": "demo",
    "tests/rtb/test_control_track.py": "demo",
    "tests/rtb/test_workflow_track.py": "demo",
    "tests/test_real_model.py": "smollm2",
    "tests/trb/test_outside_cheats.py": "trb-outside-cheats",
    "tests/trb/test_cheat_audit.py": "trb-cheat-audit",
    "tests/trb/test_outside_slot_cheats.py": "trb-outside-slot-cheats",
    "tests/trb/test_trb_profile_track.py": "trb-profile-track",
}
"""Test file -> the worker group of its tests. `make test` runs two workers (`-n 2`); a session
or module fixture is built once per worker that needs it, so every test of the files using a
costly one (the whole demo, a served SmolLM2, the TRB cheat runs of 70-100 s, the sandboxed
slot-world attackers' run and the tiny profile run, 15-30 s each) runs on one worker
and it is built once, as in a serial run. Collection refuses a test using one of
`SHARED_FIXTURES` (the session ones) outside these files."""

SHARED_FIXTURES = ("demo_run", "smollm2_folder", "smollm2_server")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test using `demo_run` gets the demo's time limit: whichever runs first runs the demo.
    A test using a shared session fixture must be in a `SHARED_FIXTURE_FILES` file."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "demo_run" in fixtures:
            item.add_marker(pytest.mark.timeout(DEMO_TIMEOUT_S))
        file = item.nodeid.split("::", 1)[0]
        if any(name in fixtures for name in SHARED_FIXTURES) and file not in SHARED_FIXTURE_FILES:
            raise pytest.UsageError(
                f"{item.nodeid} uses a shared session fixture: list {file} in "
                "tests/conftest.py SHARED_FIXTURE_FILES so its tests share one worker"
            )


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under `-n`, tests are spread one by one, but those of one `SHARED_FIXTURE_FILES` group go
    to one worker. (xdist's own `loadgroup` marks do nothing with pytest 9, which no longer
    reads the node id xdist rewrites.)"""
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SHARED_FIXTURE_FILES.get(nodeid.split("::", 1)[0], nodeid)

    return SharedFixtureScheduling(config, log)  # type: ignore[arg-type]
