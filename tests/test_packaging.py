"""What a user installs: the wheel holds every module of the source tree and the schemas, and
(in CI) the tests ran against the installed package, not the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import compactor_cli

pytestmark = pytest.mark.slow  # builds a wheel

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "compactor_cli"


def _source_files() -> set[str]:
    files = {p.relative_to(ROOT).as_posix() for p in SOURCE.rglob("*.py")}
    files |= {p.relative_to(ROOT).as_posix() for p in (SOURCE / "schemas").glob("*.json")}
    files |= {p.relative_to(ROOT).as_posix() for p in (SOURCE / "pages" / "templates").glob("*.j2")}  # the pages
    assert any(f.endswith(".j2") for f in files)
    return files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel CI built (XCOMPACT_TEST_WHEEL), else one built here from the source tree."""
    given = os.environ.get("XCOMPACT_TEST_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "xcompact"  # a clean copy: a stale build/ would hide missing modules
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                            "__pycache__", ".hypothesis", ".pytest_cache", "*.so"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "-w", str(out), str(src)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {proc.stderr.strip()[-200:]}")
    return next(out.glob("xcompact-*.whl"))


def test_wheel_holds_every_module_of_the_source_tree(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(_source_files() - names)
    assert not missing, f"the wheel lacks {missing}"


@pytest.mark.parametrize("name", ["model/_walk", "model/_vocab", "model/_count", "model/_pieces", "files/_exact",
                                  "files/_crc", "backends/_facts"])
def test_wheel_holds_the_compiled_parts_and_their_stubs(wheel, name):
    """model/_walk.c, model/_vocab.c, model/_count.c, model/_pieces.c, files/_exact.c, files/_crc.c and
    backends/_facts.c built for
    this platform (optional in the
    build: a machine without a C compiler gets a wheel without them, which runs the same code in
    Python; CI's build must not be one)."""
    names = set(zipfile.ZipFile(wheel).namelist())
    assert any(n.startswith(f"compactor_cli/{name}.") and n.endswith(".so") for n in names), name
    assert f"compactor_cli/{name}.pyi" in names


def test_wheel_declares_console_script_and_dependency_floors(wheel):
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
        entry = zf.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert "xcompact = compactor_cli.cli:main" in entry
    assert "Requires-Dist: click>=8.2" in meta
    assert 'Requires-Dist: tomli>=1.1; python_version < "3.11"' in meta


@pytest.mark.skipif(not os.environ.get("XCOMPACT_TEST_INSTALLED"), reason="CI only: tests the installed wheel")
def test_tests_import_the_installed_package_not_the_source_tree():
    assert SOURCE not in Path(compactor_cli.__file__).resolve().parents
    assert "site-packages" in compactor_cli.__file__


@pytest.mark.skipif(not os.environ.get("XCOMPACT_TEST_INSTALLED"), reason="CI only: tests the installed wheel")
def test_the_programs_tests_start_run_the_installed_package_with_its_compiled_parts():
    """``python -m compactor_cli`` from the source tree's root (where CI runs the tests) ran the
    tree's own package, without the compiled parts, until conftest set PYTHONSAFEPATH."""
    probe = ("import compactor_cli; from compactor_cli.model.compiled import extension; "
             "print(compactor_cli.__file__); print(extension('_walk') is not None)")
    where, built = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                                  check=True).stdout.split()
    assert "site-packages" in where and SOURCE not in Path(where).resolve().parents
    assert built == "True"
