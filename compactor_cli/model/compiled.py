"""The optional C extensions (model/``_walk.c``, ``_vocab.c``, ``_count.c``, ``_pieces.c``,
files/``_exact.c``, ``_crc.c``, backends/``_facts.c``): loaded once, or None.

Each does exactly what a Python function beside it does, faster; setuptools builds them where a
C compiler is (pyproject.toml), and the package runs without them where none is.
``XCOMPACT_PURE_PYTHON=1`` runs the Python instead, to compare or to rule them out."""

from __future__ import annotations

import importlib
import os
from typing import Any


def extension(name: str, package: str = __package__) -> Any:
    """``<package>.<name>`` (``compactor_cli.model`` unless named), or None: not built, or
    XCOMPACT_PURE_PYTHON set."""
    if os.environ.get("XCOMPACT_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(f"{package}.{name}")
    except ImportError:
        return None
