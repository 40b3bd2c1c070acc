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
            self._refuse_links()
            self.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, summary TEXT NOT NULL)")
            self._refuse_links()  # planted while it was opened: closed before anything is written
        except (OSError, sqlite3.Error, ValueError) as exc:  # ValueError: a path with a NUL byte
            self._fail(exc)

    def _refuse_links(self) -> None:
        """sqlite follows a symbolic link at the database's path (or its journal's) and writes
        through it: one planted there would have the cache overwrite the file it points to. Such
        a link is refused (left in place, the cache off), never followed."""
        import stat

        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                st = os.lstat(self.path + suffix)
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                raise OSError(f"{os.path.basename(self.path + suffix)} is a symbolic link; not following it "
                              "(remove it, or choose another --cache-dir)")
            if not stat.S_ISREG(st.st_mode):
                raise OSError(f"{os.path.basename(self.path + suffix)} is not a regular file")

    def _fail(self, exc: BaseException) -> None:
        reason = str(exc) if isinstance(exc, OSError) and exc.errno is None else f"{type(exc).__name__}: {exc}"
        self.problem = f"summary cache {self.path} unusable ({reason}); running without it"
        self.close()

    def get(self, key: str) -> str | None:
        if self.db is None:
            return None
        try:
            row = self.db.execute("SELECT summary FROM summaries WHERE key = ?", (key,)).fetchone()
            if row and isinstance(row[0], bytes):  # stored by put() for a text that is not valid UTF-8
                return row[0].decode("utf-8", "surrogatepass")
        except (OSError, sqlite3.Error, ValueError) as exc:  # ValueError: a damaged entry's bytes
            self._fail(exc)
            return None
        return row[0] if row and isinstance(row[0], str) else None

    def put(self, key: str, summary: str) -> None:
        if self.db is None:
            return
        try:  # a lone surrogate ("\ud800" in a model's answer) cannot be TEXT: kept exactly as bytes
            self._refuse_links()  # a link planted since the cache was opened
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
