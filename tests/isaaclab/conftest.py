"""Shared fixtures of the Isaac Lab layer's tests.

Isaac Lab runs one simulation per process, so each engine's checks run in a worker process (``engine_worker.py``)
once per session, and the tests read its JSON. The ``isaaclab`` command is run as a user runs it, with this checkout
first on ``PYTHONPATH`` and its entry points (``setup.py egg_info`` into a temporary folder, so the checkout's
declarations are what Isaac Lab discovers, not those of whichever copy is installed).

Skipped only where Isaac Lab is not installed (``make setup`` installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HAVE_ISAACLAB = importlib.util.find_spec("isaaclab") is not None and importlib.util.find_spec("pxr") is not None
REASON = "Isaac Lab 3.0 is not installed (make setup installs the kit-less stack: docs/isaaclab.md)"


def pytest_collection_modifyitems(config, items):
    if HAVE_ISAACLAB:
        return
    skip = pytest.mark.skip(reason=REASON)
    for item in items:
        if "tests/isaaclab" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def entry_point_metadata(tmp_path_factory) -> Path:
    """A folder holding this checkout's ``diffloco_ext.egg-info`` (entry points as ``setup.py`` declares them)."""
    out = tmp_path_factory.mktemp("metadata")
    subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(out)], cwd=ROOT, check=True,
                   capture_output=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    shutil.rmtree(ROOT / "build", ignore_errors=True)
    return out


@pytest.fixture(scope="session")
def user_env(entry_point_metadata, tmp_path_factory) -> dict:
    """Environment variables for an ``isaaclab`` command run on this checkout (USD files in a session folder)."""
    usd_dir = tmp_path_factory.mktemp("usd")
    path = os.pathsep.join([str(entry_point_metadata), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "DIFFLOCO_USD_DIR": str(usd_dir)}


def isaaclab_command() -> str:
    exe = Path(sys.executable).with_name("isaaclab")
    return str(exe) if exe.exists() else "isaaclab"


def run_isaaclab(args: list[str], env: dict, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``isaaclab ARGS`` in ``cwd``; the output is kept for the assertion messages."""
    return subprocess.run([isaaclab_command(), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


_PROBES: dict[str, dict] = {}


@pytest.fixture(scope="session")
def probe(user_env, tmp_path_factory):
    """``probe(engine)``: the JSON of ``engine_worker.py`` for ``"physx"`` or ``"newton"`` (run once per session)."""

    def get(engine: str) -> dict:
        if engine not in _PROBES:
            out = tmp_path_factory.mktemp(f"probe-{engine}") / "probe.json"
            proc = subprocess.run([sys.executable, str(Path(__file__).with_name("engine_worker.py")), engine, str(out)],
                                  env=user_env, cwd=ROOT, capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise AssertionError(f"engine_worker.py on {engine} failed:\n{proc.stdout[-4000:]}\n"
                                     f"{proc.stderr[-4000:]}")
            _PROBES[engine] = json.loads(out.read_text())
        return _PROBES[engine]

    return get
