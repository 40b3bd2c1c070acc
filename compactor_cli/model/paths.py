"""Where xcompact keeps its own files (the summary cache, run journals): one XDG rule."""

from __future__ import annotations

import os


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xcompact")
