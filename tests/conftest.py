"""Fixtures every test gets (an offline environment) or asks for (``runner``, ``dataset``), and
the Hypothesis profiles; shared helpers are in helpers.py and the other helper modules (never in a
test module: no test module imports another).

Hypothesis profiles, chosen by $HYPOTHESIS_PROFILE: ``dev`` (the default: few examples, for the
fast lane a developer runs before each commit) and ``ci`` (.ci/run exports it: more examples). A
test keeps a count of its own only where one example is expensive, and says so."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import ROOT
from hypothesis import HealthCheck, settings

# no deadline in either: the machine's other users make one example's time meaningless
settings.register_profile("dev", max_examples=40, deadline=None)
settings.register_profile("ci", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          print_blob=True)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or "dev"
settings.load_profile(PROFILE)


def pytest_report_header(config) -> str:
    return f"hypothesis profile {PROFILE!r} ($HYPOTHESIS_PROFILE: dev or ci)"


@pytest.fixture(autouse=True)
def _offline_env(monkeypatch, tmp_path_factory):
    """No test may reach a model server by accident or find a user's tiktoken cache."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path_factory.mktemp("empty-tiktoken-cache")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(autouse=True)
def _installed_package(monkeypatch):
    """A ``python -m compactor_cli`` a test starts runs the package ``import compactor_cli`` finds
    here, not the source tree in its working directory: CI tests the installed wheel, and the tree
    of a fresh clone has none of the compiled parts (Python 3.11+; 3.10 has no such switch)."""
    monkeypatch.setenv("PYTHONSAFEPATH", "1")


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture(scope="session")
def dataset(tmp_path_factory) -> Path:
    """6 MB of generated agent conversations (bench/generate.py), read-only: over the 4 MiB below
    which xcompact stays in one process, and long enough a run to be killed part way."""
    sys.path.insert(0, str(ROOT / "bench"))
    from generate import generate

    path = tmp_path_factory.mktemp("data") / "agents.jsonl"
    generate(str(path), 6)
    return path
