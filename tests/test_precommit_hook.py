"""The pre-commit hook (.pre-commit-hooks.yaml), as a user's repository runs it: ``pre-commit
try-repo`` installs this repository's hook into its own environment (pip, from the package
registry) and runs it on the files of a temporary git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from helpers import ROOT, tool_conv

pytestmark = [pytest.mark.slow,  # pip-installs the package into pre-commit's environment, twice
              pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                                 reason="needs git and this repository's git checkout (pre-commit try-repo)")]


def _pre_commit() -> list[str]:
    try:
        import pre_commit  # noqa: F401
    except ImportError:
        pytest.skip("pre-commit is not installed: pip install 'xcompact[test]'")
    return [sys.executable, "-m", "pre_commit"]


@pytest.fixture(scope="module")
def user_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("user-repo")
    big = tool_conv(n_tools=10, size=4000)  # thousands of tokens
    small = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    (repo / "big.jsonl").write_bytes(orjson.dumps(small) + b"\n" + orjson.dumps(big) + b"\n")
    (repo / "small.json").write_bytes(orjson.dumps(small))
    # the budget, where a project keeps xcompact's options: the hook runs in the repository's root
    (repo / "pyproject.toml").write_text('[tool.xcompact.compact]\ntoken-threshold = 500\n')
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for cmd in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "transcripts"]):
        subprocess.run(cmd, cwd=repo, check=True, env=env)
    return repo


def _try_repo(repo: Path, tmp_path: Path, *files: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path.parent / "pre-commit-home")}
    return subprocess.run([*_pre_commit(), "try-repo", str(ROOT), "xcompact-check", "--verbose", "--files", *files],
                          cwd=repo, capture_output=True, text=True, timeout=900, env=env)


def test_the_hook_fails_on_an_over_budget_transcript_and_names_it(user_repo, tmp_path):
    res = _try_repo(user_repo, tmp_path, "big.jsonl", "small.json")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "over threshold: big.jsonl:2:" in res.stdout and "> 500" in res.stdout  # the offender, by file and line
    assert "big.jsonl:1" not in res.stdout and "small.json" not in res.stdout.split("- hook id")[-1]


def test_the_hook_passes_on_a_compliant_transcript(user_repo, tmp_path):
    res = _try_repo(user_repo, tmp_path, "small.json")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Passed" in res.stdout
