"""Shared fixtures (the real engine, a counting TCP listener). Tests marked `engine` use the real llama-server
built by `make setup`; when it is missing they fail (not skip): `make test` installs it first, so a missing
engine is a broken set-up."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from pipeline.backends.embedded.engine import EmbeddedEngine
from pipeline.backends.embedded.install import installed_assets
from pipeline.config import EngineSettings
from pipeline.files import cache_dir
from tests.fakes.hostile import Listener

# llama-server's threads spin: beside the test process, every engine a test starts (directly or through
# Settings) runs on one thread unless FANOUT_THREADS says otherwise.
os.environ.setdefault("FANOUT_THREADS", "1")
ENGINE_THREADS = int(os.environ["FANOUT_THREADS"])
# FAKE planners answer with random words, which the off-request judge (pipeline/meaning/offrequest.py) would refuse
# as not about the request: books in the suite are planned without it unless a test asks for it.
os.environ.setdefault("FANOUT_JUDGE", "none")


USERS_HOME = "FANOUT_TEST_USERS_HOME"  # where pytest_configure keeps the user's HOME for pytest_unconfigure


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has set up its factory
def pytest_configure(config):
    """The libraries the suite drives write under HOME (matplotlib's font cache, chromium's crash reports,
    Ray's token, pip's cache): the session runs with a HOME of its own, set before any test module is
    imported, so the user's is never written. The engine stays where the user keeps it: FANOUT_CACHE is fixed
    to it first (its default is under HOME)."""
    os.environ.setdefault("FANOUT_CACHE", str(cache_dir()))
    os.environ[USERS_HOME] = os.environ.get("HOME", "")
    os.environ["HOME"] = str(config._tmp_path_factory.mktemp("home"))
    os.environ.setdefault("RAY_TMPDIR", str(ray_temp_dir(config)))


def pytest_unconfigure(config):
    users = os.environ.pop(USERS_HOME, None)
    if users:
        os.environ["HOME"] = users
    if own := os.environ.pop(OWN_RAY_TMPDIR, None):
        shutil.rmtree(own, ignore_errors=True)


RAY_PATH_ROOM = 40  # Ray's sockets lie under RAY_TMPDIR/ray/session_<time>_<pid>/sockets/: 67 bytes more, and a
# Unix socket's path stops at 107 bytes
OWN_RAY_TMPDIR = "FANOUT_TEST_RAY_TMPDIR"  # a Ray folder of the suite's own outside its tmp, removed at the end


def ray_temp_dir(config) -> Path:
    """Where the suite's Ray instances keep their session folders (Ray's default is /tmp/ray, left behind): under
    the suite's own tmp, or where that path is too long for Ray's sockets, a folder removed when the suite ends."""
    folder = config._tmp_path_factory.mktemp("ray")
    if len(str(folder)) <= RAY_PATH_ROOM:
        return folder
    own = Path(tempfile.mkdtemp(prefix="fanout-ray-"))
    os.environ[OWN_RAY_TMPDIR] = str(own)
    return own


@pytest.fixture(scope="session")
def engine_assets():
    return installed_assets()


@pytest.fixture(scope="module")
def engine8(engine_assets, tmp_path_factory):
    """A real llama-server with 8 slots, shared by a module's tests."""
    log = tmp_path_factory.mktemp("engine") / "llama-server.log"
    with EmbeddedEngine(
        EngineSettings(slots=8, threads=ENGINE_THREADS, ctx_per_slot=1024), engine_assets, log
    ) as engine:
        yield engine


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()
