"""A summary cache in stdlib sqlite3, so a rerun over the same dataset makes no model calls and
writes the same bytes. Keyed by a SHA-256 of backend, model, prompt, budgets and the exact head."""

from __future__ import annotations

import hashlib
import os
import sqlite3

import orjson


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "xcompact")


def cache_key(*parts: object) -> str:
    return hashlib.sha256(orjson.dumps(list(parts), option=orjson.OPT_SORT_KEYS)).hexdigest()


class SummaryCache:
    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, "summaries.sqlite3")
        self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, summary TEXT NOT NULL)")

    def get(self, key: str) -> str | None:
        row = self.db.execute("SELECT summary FROM summaries WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, summary: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO summaries (key, summary) VALUES (?, ?)", (key, summary))

    def close(self) -> None:
        self.db.close()
