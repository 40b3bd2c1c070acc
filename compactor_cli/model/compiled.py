"""The optional C extensions of model/ (``_walk.c``, ``_vocab.c``): loaded once, or None.

Each does exactly what a Python function beside it does, faster; setuptools builds them where a
C compiler is (pyproject.toml), and the package runs without them where none is.
``XCOMPACT_PURE_PYTHON=1`` runs the Python instead, to compare or to rule them out."""

from __future__ import annotations

import importlib
import os
from typing import Any


def extension(name: str) -> Any:
    """``compactor_cli.model.<name>``, or None: not built, or XCOMPACT_PURE_PYTHON set."""
    if os.environ.get("XCOMPACT_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
