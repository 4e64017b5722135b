"""Fixtures: a scratch workspace per test, and runtimes on it that use the
confined worker `cargo xtask ci` built beside this package (``VSH_WORKER``)."""

import os
import pathlib
from typing import Callable, Iterator

import pytest

import vsh


@pytest.fixture()
def workspace(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[pathlib.Path]:
    """A workspace with a file and a secret, and an authority key beside it."""
    monkeypatch.setenv("VSH_AUTHORITY_KEY", str(tmp_path / "authority.key"))
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    (root / ".env").write_text("SECRET=1\n")
    yield root


@pytest.fixture()
def runtime(workspace: pathlib.Path) -> Callable[[], vsh.Runtime]:
    """Open a runtime on the workspace (each call a new one)."""
    assert os.environ.get("VSH_WORKER"), "cargo xtask ci names the worker in VSH_WORKER"
    return lambda: vsh.Runtime(workspace)
