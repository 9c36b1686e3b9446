"""Fixtures shared by the package's tests."""

import os
import shutil

import pytest


@pytest.fixture
def fraglab_binary(monkeypatch):
    """The fraglab binary the package runs for warm forks (``$FRAGLAB_BIN``, PATH, or this
    tree's target/release), set as ``$FRAGLAB_BIN``; the test is skipped without one."""
    binary = os.environ.get("FRAGLAB_BIN") or shutil.which("fraglab")
    if not binary:
        here = os.path.dirname(os.path.abspath(__file__))
        candidate = os.path.join(here, "..", "..", "..", "target", "release", "fraglab")
        if not os.path.exists(candidate):
            pytest.skip("no fraglab binary (FRAGLAB_BIN, PATH or target/release)")
        binary = candidate
    monkeypatch.setenv("FRAGLAB_BIN", binary)
    return binary
