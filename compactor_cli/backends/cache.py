"""A summary cache in stdlib sqlite3, so a rerun over the same dataset makes no model calls and
writes the same bytes. Keyed by a SHA-256 of backend, endpoint, model, prompt, budgets and the
exact head (the caller chooses the parts; see ``OpenAIBackend.summarize``).

The cache is an optimisation, never a reason to fail: a cache that cannot be opened, read or
written (corrupt file, a directory in its place, a read-only or misplaced directory) switches
itself off and says why in ``problem``; the run goes on uncached."""

from __future__ import annotations

import hashlib
import os
import sqlite3

import orjson

CACHE_FILE = "summaries.sqlite3"


def cache_key(*parts: object) -> str:
    return hashlib.sha256(orjson.dumps(list(parts), option=orjson.OPT_SORT_KEYS)).hexdigest()


class SummaryCache:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, CACHE_FILE)
        self.problem: str | None = None  # set once the cache is unusable; it is then off
        self.db: sqlite3.Connection | None = None
        try:
            os.makedirs(directory, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, summary TEXT NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        self.problem = f"summary cache {self.path} unusable ({type(exc).__name__}: {exc}); running without it"
        self.close()

    def get(self, key: str) -> str | None:
        if self.db is None:
            return None
        try:
            row = self.db.execute("SELECT summary FROM summaries WHERE key = ?", (key,)).fetchone()
        except (OSError, sqlite3.Error) as exc:
            self._fail(exc)
            return None
        if row and isinstance(row[0], bytes):  # stored by put() for a text that is not valid UTF-8
            return row[0].decode("utf-8", "surrogatepass")
        return row[0] if row and isinstance(row[0], str) else None

    def put(self, key: str, summary: str) -> None:
        if self.db is None:
            return
        try:  # a lone surrogate ("\ud800" in a model's answer) cannot be TEXT: kept exactly as bytes
            value: str | bytes = summary
            try:
                summary.encode("utf-8")
            except UnicodeEncodeError:
                value = summary.encode("utf-8", "surrogatepass")
            self.db.execute("INSERT OR REPLACE INTO summaries (key, summary) VALUES (?, ?)", (key, value))
        except (OSError, sqlite3.Error, ValueError) as exc:
            self._fail(exc)

    def close(self) -> None:
        if self.db is not None:
            try:
                self.db.close()
            except sqlite3.Error:
                pass
            self.db = None
