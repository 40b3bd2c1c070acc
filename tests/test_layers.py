"""The import rule between the package's folders, read statically from the source.

A module imports its own folder or a lower rank: errors/status (anyone) < model < evidence < files <
formats | backends (never each other) < tiers (of formats only rules and base) < pages < commands < engine <
façades (batch, ray, parquet, ``__init__``) < cli; only ``__main__`` imports cli. No cycles.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import compactor_cli

PACKAGE = "compactor_cli"
ROOT = Path(compactor_cli.__file__).resolve().parent


#: Rank of each folder (first name under the package). Same rank, different folder: siblings.
FOLDER_RANK = {"model": 0, "evidence": 0.5, "files": 1, "formats": 2, "backends": 2, "tiers": 3, "pages": 3.5,
               "commands": 3.75, "engine": 4, "cli": 6}
#: Top-level modules: the package, the façades at the documented paths (rank 5), the entry point.
TOP_LEVEL = {"": ("facade", 5), "batch": ("facade", 5), "ray": ("facade", 5), "parquet": ("facade", 5),
             "__main__": ("__main__", 7)}
#: Imported by anyone, import nothing of the package.
BASE = {"errors", "status", "version"}
#: What tiers may import from formats.
TIERS_FORMATS = {f"{PACKAGE}.formats.rules", f"{PACKAGE}.formats.base"}


@dataclass(frozen=True)
class Edge:
    """One import statement: who imports what, and where, so a failure points at the line."""

    importer: str
    imported: str
    file: str
    line: int


def _module_files() -> dict[str, Path]:
    """Every module of the package by dotted name, found on disk from ``compactor_cli.__file__``."""
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if any(not p.isidentifier() for p in parts):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((PACKAGE, *parts))] = path
    return found


MODULES = _module_files()


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _resolve_relative(importer: str, level: int, name: str | None) -> str:
    """The absolute name of ``from <level dots><name> import ...`` written in ``importer``."""
    base = importer.split(".")
    if not _is_package(importer):
        base = base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _targets(importer: str, node: ast.AST, constants: set[str]) -> Iterator[str]:
    """The modules an import node imports: ``from pkg import sub`` is pkg.sub when sub is a module."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
    elif isinstance(node, ast.ImportFrom):
        source = _resolve_relative(importer, node.level, node.module) if node.level else (node.module or "")
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            yield sub if sub in MODULES else source
    elif isinstance(node, ast.Call):
        yield from _import_module_targets(importer, node, constants)


def _import_module_targets(importer: str, call: ast.Call, constants: set[str]) -> list[str]:
    """What ``importlib.import_module(...)`` imports when its name is a literal, or an f-string
    whose one hole is filled from ``constants`` (the module's strings) to name a module."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name != "import_module" or not call.args:
        return []
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [_absolute(importer, arg.value)]
    if isinstance(arg, ast.JoinedStr) and len(arg.values) <= 3:
        # f".{name}" (a PEP 562 table of lazy submodules): the module's string constants that complete it
        pieces = [v.value if isinstance(v, ast.Constant) else None for v in arg.values]
        if pieces.count(None) == 1:
            at = pieces.index(None)
            head, tail = "".join(pieces[:at]), "".join(pieces[at + 1:])  # type: ignore[arg-type]
            named = (_absolute(importer, head + c + tail) for c in constants)
            return [m for m in named if m in MODULES]
    return []  # computed at run time: not seen statically


def _absolute(importer: str, target: str) -> str:
    if not target.startswith("."):
        return target
    level = len(target) - len(target.lstrip("."))
    return _resolve_relative(importer, level, target[level:] or None)


@cache
def edges() -> tuple[Edge, ...]:
    """Every import of the package's modules, at any depth (functions, TYPE_CHECKING, try)."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = str(path.relative_to(ROOT.parent))
        constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.Call)):
                for target in _targets(module, node, constants):
                    if (target == PACKAGE or target.startswith(PACKAGE + ".")) and target != module:
                        found.append(Edge(module, target, rel, node.lineno))
    return tuple(sorted(set(found), key=lambda e: (e.importer, e.imported, e.line)))


def _layer(module: str) -> tuple[str, int | None]:
    """(group, rank) of a module: its folder, or its top-level role; rank None for no layer."""
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    if head in FOLDER_RANK:  # cli.py counts as the folder cli/ it becomes
        return head, FOLDER_RANK[head]
    if len(parts) <= 1 and head in BASE:
        return "base", -1
    if len(parts) <= 1 and head in TOP_LEVEL:
        return TOP_LEVEL[head]
    return "unplaced", None


def broken_rule(importer: str, imported: str) -> str | None:
    """Why the edge importer -> imported breaks the rule, or None when it does not."""
    (src, src_rank), (dst, dst_rank) = _layer(importer), _layer(imported)
    if src_rank is None or dst_rank is None:
        return f"{importer if src_rank is None else imported} is in no layer"
    if src == "base":
        return "errors and status import nothing of the package"
    if dst == "cli" and src not in ("cli", "__main__"):
        return "only __main__ imports cli"
    if dst == "base" or src == dst:
        return None
    if dst_rank > src_rank:
        return f"upward: {src} (rank {src_rank}) imports {dst} (rank {dst_rank})"
    if dst_rank == src_rank:
        return f"sibling folders: {src} imports {dst}"
    if src == "tiers" and dst == "formats" and imported not in TIERS_FORMATS:
        return "tiers imports only formats.rules and formats.base of formats"
    return None


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def test_modules_found() -> None:
    """The walk found the package and every import of it (a broken walk would pass everything)."""
    assert PACKAGE in MODULES and f"{PACKAGE}.model" in MODULES
    assert any(e.imported.startswith(f"{PACKAGE}.model") for e in edges())


def test_layers() -> None:
    """Every import goes to the module's own folder or a lower rank: no exceptions."""
    bad = []
    for e in edges():
        rule = broken_rule(e.importer, e.imported)
        if rule:
            bad.append(f"{e.importer} -> {e.imported} ({e.file}:{e.line}, {rule})")
    assert not bad, "imports that break the layer rule:\n" + "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for e in edges():
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    return graph


def cycles(graph: dict[str, set[str]], limit: int = 10_000) -> list[list[str]]:
    """Every elementary cycle (Johnson's algorithm, each from its smallest module), at most ``limit``."""
    found: list[list[str]] = []
    order = sorted(graph)
    for i, start in enumerate(order):
        _circuits(graph, start, set(order[i:]), found, limit)
    return found


def _circuits(graph: dict[str, set[str]], start: str, allowed: set[str], found: list[list[str]], limit: int) -> None:
    """Johnson's search for the cycles through ``start`` among the modules ``allowed``."""
    blocked: set[str] = set()
    blocked_by: dict[str, set[str]] = {}
    path = [start]

    def unblock(node: str) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if n in blocked:
                blocked.discard(n)
                stack.extend(blocked_by.pop(n, ()))

    def circuit(node: str) -> bool:
        closed = False
        blocked.add(node)
        for nxt in sorted(graph[node] & allowed):
            if len(found) >= limit:
                return True
            if nxt == start:
                found.append([*path, start])
                closed = True
            elif nxt not in blocked:
                path.append(nxt)
                closed = circuit(nxt) or closed
                path.pop()
        if closed:
            unblock(node)
        else:
            for nxt in graph[node] & allowed:
                blocked_by.setdefault(nxt, set()).add(node)
        return closed

    circuit(start)


def test_no_cycles() -> None:
    """The module graph, function-local and lazy ``__init__`` imports included, has no cycle."""
    new = cycles(_graph())
    assert not new, "import cycles:\n" + "\n".join(" -> ".join(_short(m) for m in c) for c in new)


OPTIONAL = ("ray", "pyarrow")
IMPORTABLE = sorted(m for m in MODULES if m != f"{PACKAGE}.__main__")


@pytest.fixture(scope="module")
def fresh_imports() -> dict[str, subprocess.CompletedProcess[str]]:
    """``python -c "import X"`` for every module, each in its own interpreter, two at a time."""

    def run(module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True,
                              timeout=120, check=False)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(IMPORTABLE, pool.map(run, IMPORTABLE), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("module", IMPORTABLE)
def test_imports_alone(module: str, fresh_imports: dict[str, subprocess.CompletedProcess[str]]) -> None:
    """Each module imports first in a fresh interpreter: a cycle that only works in one order fails here."""
    done = fresh_imports[module]
    if done.returncode:
        for name in OPTIONAL:
            if importlib.util.find_spec(name) is None and f"No module named '{name}'" in done.stderr:
                pytest.skip(f"{module} needs {name}, which is not installed (pip install 'xcompact[ray]')")
    assert done.returncode == 0, f"import {module} failed on its own:\n{done.stderr}"
