"""Shared fixtures for the end-to-end tests: where the built binaries are,
where the shared corpus is, and a helper that runs trainwatch."""
import atexit
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

SOURCE = pathlib.Path(os.environ.get("TW_SOURCE", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("TW_BUILD", SOURCE / "build"))
CORPUS = SOURCE.parent / "shared" / "corpus"

# Every analyze, run and watch records its run in the history
# ($XDG_DATA_HOME/trainwatch/runs.db): the tests' runs go to a folder of
# their own, never the user's ~/.local/share.
HISTORY_HOME = tempfile.mkdtemp(prefix="tw-test-history-")
os.environ["XDG_DATA_HOME"] = HISTORY_HOME
atexit.register(shutil.rmtree, HISTORY_HOME, True)


@pytest.fixture(autouse=True)
def own_history(tmp_path_factory, monkeypatch):
    """Each test's runs go to a history of its own: a run recorded by one
    test is never another's baseline (docs/history.md#baselines)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data")))


def binary(name):
    path = BUILD / name
    if not path.exists():
        pytest.fail(f"{path} is not built (run make build)")
    return str(path)


def run(args, input=None, timeout=120, env=None):
    """Runs a built binary; returns CompletedProcess with text output."""
    cmd = [binary(args[0])] + [str(a) for a in args[1:]]
    return subprocess.run(cmd, input=input, capture_output=True, timeout=timeout, env=env,
                          text=not isinstance(input, bytes))


def analyze_json(*args):
    result = run(["trainwatch", "analyze", "--json", *args])
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout), result


def records(*args):
    result = run(["trainwatch", "analyze", "--records", *args])
    return [json.loads(line) for line in result.stdout.splitlines()], result


@pytest.fixture
def corpus():
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}: the corpus tests need ../shared/corpus")
    return CORPUS


@pytest.fixture
def procs():
    """Starts server processes (servers.Process and subclasses) for a test and
    stops them all, newest first, when it ends."""
    started = []

    def start(cls, *args, **kwargs):
        p = cls(*args, **kwargs)
        started.append(p)
        return p

    yield start
    for p in reversed(started):
        p.stop()
