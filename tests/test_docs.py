"""The documentation runs as written: docs/cli.md is what scripts/cli_reference.py generates from
``--help`` now, and every ``sh``, ``bash`` and ``python`` block of README.md and docs/*.md runs (in a
temporary directory holding a copy of fixtures/ and the sample files below, with the installed
``xcompact`` on PATH), unless the line before its fence says why not:

    <!-- not-run: REASON -->     never run (a model server, Ray, the network, an install)
    <!-- exit: N -->             run; its last command exits with N
    <!-- example: NAME -->       run, and written to NAME for the other blocks of the same page
    <!-- hf-recipe -->           the README's datasets recipe, run by tests/test_hf_recipe.py

The files are read from the source tree (found from this file), never from the package."""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import lzma
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import FIXTURES, ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_LANGUAGES = {"sh", "bash", "python"}
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
MARKER = re.compile(r"^<!--\s*(not-run|exit|example|hf-recipe)\s*(?::\s*(.*?))?\s*-->$")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: str | None = None  # not-run, exit, example, hf-recipe
    argument: str = ""

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and self.marker not in ("not-run", "hf-recipe")


def blocks_of(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, language = opening.groups()
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        code = "\n".join(line[len(indent):] for line in lines[i + 1:end]) + "\n"
        block = Block(page, i + 1, language, code)
        before = lines[i - 1].strip() if i else ""
        marker = MARKER.match(before)
        if marker:
            block.marker, block.argument = marker.group(1), marker.group(2) or ""
        elif before.startswith("<!--") and "README" not in before:
            raise AssertionError(f"{block.name}: unknown marker {before!r}")
        found.append(block)
        i = end + 1
    return found


BLOCKS = [block for page in PAGES for block in blocks_of(page)]
RUNNABLE = [block for block in BLOCKS if block.runs]


# ---- the generated CLI reference


def _cli_reference():
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_generated_from_help():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == _cli_reference().render(), "docs/cli.md is out of date: run python scripts/cli_reference.py"


def test_the_cli_reference_script_checks(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


# ---- the links between the pages


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_link_between_the_pages_leads_somewhere(page):
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, fragment = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        missing_anchor = bool(fragment) and goal.suffix == ".md" and goal.exists() and fragment not in _anchors(goal)
        if not goal.exists() or missing_anchor:
            broken.append(target)
    assert broken == [], f"{page.relative_to(ROOT)}: links to nothing: {broken}"


# ---- the blocks


def test_the_markers_are_used_as_documented():
    for block in BLOCKS:
        if block.marker == "not-run":
            assert block.argument, f"{block.name}: say why it is not run"
        if block.marker == "exit":
            assert block.argument.isdigit(), f"{block.name}: <!-- exit: N --> takes a number"
        if block.marker == "example":
            assert re.fullmatch(r"[\w.-]+", block.argument), f"{block.name}: <!-- example: NAME --> takes a file name"
        if block.marker == "hf-recipe":
            assert block.page.name == "README.md" and block.language == "python"


def test_most_blocks_run():
    """Marking a block not-run is for what needs a server, a cluster or the network."""
    code = [block for block in BLOCKS if block.language in RUN_LANGUAGES]
    not_run = [block.name for block in code if not block.runs]
    assert len(RUNNABLE) >= 20
    assert len(RUNNABLE) > len(not_run), f"only {len(RUNNABLE)} of {len(code)} blocks run; not run: {not_run}"
    # the README's own commands run, except installing and running the suite
    readme = [block for block in code if block.page.name == "README.md"]
    assert sum(block.runs for block in readme) >= 5


@pytest.fixture(scope="module")
def sandbox_template(tmp_path_factory) -> Path:
    """The files the documentation names: fixtures/ and sample data in each form."""
    root = tmp_path_factory.mktemp("docs-sandbox")
    shutil.copytree(FIXTURES, root / "fixtures")
    tau = (FIXTURES / "taubench_airline_5.jsonl").read_bytes()
    for name in ("data.jsonl", "req.jsonl", "runs.jsonl", "transcripts.jsonl"):
        (root / name).write_bytes(tau)
    (root / "data.jsonl.gz").write_bytes(gzip.compress(tau))
    (root / "data.jsonl.zst").write_bytes(__import__("zstandard").ZstdCompressor().compress(tau))
    (root / "data.jsonl.xz").write_bytes(lzma.compress(tau))
    (root / "data.jsonl.bz2").write_bytes(bz2.compress(tau))
    (root / "data").mkdir()  # transcripts valid under --strict
    shutil.copy(FIXTURES / "exact" / "taubench_airline.jsonl", root / "data" / "run.jsonl")
    shutil.copy(FIXTURES / "exact" / "swe_agent.jsonl", root / "data" / "swe.jsonl")
    (root / "trajectories").mkdir()
    for traj in (FIXTURES / "formats").glob("*.traj"):
        shutil.copy(traj, root / "trajectories" / traj.name)
    shutil.copy(FIXTURES / "formats" / "sharegpt.jsonl", root / "data.sharegpt.jsonl")
    for name, to in (("requests.jsonl", "anthropic"), ("responses.jsonl", "responses")):
        argv = [_xcompact(), "convert", "fixtures/taubench_airline_5.jsonl", "--to", to, "-q", "-o", name]
        proc = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    return root


def _xcompact() -> str:
    exe = shutil.which("xcompact", path=os.path.dirname(sys.executable)) or shutil.which("xcompact")
    assert exe, "xcompact is not installed"
    return exe


@pytest.fixture
def sandbox(sandbox_template, tmp_path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(sandbox_template, work, symlinks=True)
    return work


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda block: block.name)
def test_the_block_runs_as_written(block, sandbox, monkeypatch):
    for other in BLOCKS:
        if other.page == block.page and other.marker == "example":
            (sandbox / other.argument).write_text(other.code, encoding="utf-8")
    expected = int(block.argument) if block.marker == "exit" else 0
    home = sandbox.parent / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "PATH": os.pathsep.join([os.path.dirname(_xcompact()), os.path.dirname(sys.executable),
                                    os.environ.get("PATH", "")])}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAY_ADDRESS"):
        env.pop(key, None)
    if block.language == "python":
        monkeypatch.chdir(sandbox)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.syspath_prepend(str(sandbox))
        exec(compile(block.code, block.name, "exec"), {"__name__": "__docs__"})
        return
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=sandbox, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == expected, f"{block.name} exited {proc.returncode}:\n{block.code}\n{proc.stderr[-3000:]}"
