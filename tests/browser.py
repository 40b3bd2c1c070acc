"""A real browser for the page tests: headless Chromium (Debian's ``chromium``; .ci/run installs
it) loads a page from file://, and the tests read what it rendered (the DOM after scripts ran),
what it printed to its console, and a screenshot a person can look at.

Chromium runs with the network cut (no background requests, every host unresolvable), so a page
that tried to fetch anything would log a failed load on the console, which fails the test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]
_CONSOLE = re.compile(r":INFO:CONSOLE[^\]]*\] (.*)$", re.M)


def chromium() -> str:
    """The browser's path, or skip with the reason (only where none can be installed)."""
    found = os.environ.get("XCOMPACT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("no headless browser: install Debian's chromium (apt-get install chromium; .ci/run does)")
    return found


def screenshot_dir() -> Path:
    """Where screenshots go for a person to look at: $XCOMPACT_SCREENSHOTS (.ci/run sets it)."""
    path = Path(os.environ.get("XCOMPACT_SCREENSHOTS") or Path(tempfile.gettempdir()) / "xcompact-screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Rendered:
    dom: str  # the document as the browser holds it after load
    console: list[str]  # every console message (errors, failed loads, logs)


def _run(args: list[str], profile: str) -> subprocess.CompletedProcess:
    return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=120)


def render(page: Path, shot: str | None = None, width: int = 1280, height: int = 1600) -> Rendered:
    """Load ``page`` from file://; save a screenshot named ``shot`` (PNG) when given."""
    url = page.resolve().as_uri()
    with tempfile.TemporaryDirectory(prefix="xcompact-chromium-") as profile:
        dumped = _run(["--dump-dom", url], profile)
        assert dumped.returncode == 0, dumped.stderr[-2000:]
        if shot is not None:
            png = screenshot_dir() / shot
            taken = _run([f"--window-size={width},{height}", f"--screenshot={png}", url], profile)
            assert taken.returncode == 0 and png.stat().st_size > 10_000, taken.stderr[-2000:]
    return Rendered(dumped.stdout, _CONSOLE.findall(dumped.stderr))


class Elements(HTMLParser):
    """The elements of a DOM dump that carry a given data- attribute, with their text."""

    def __init__(self, attribute: str) -> None:
        super().__init__(convert_charrefs=True)
        self.attribute = attribute
        self.found: list[tuple[str, str]] = []  # (attribute value, text inside)
        self._open: list[tuple[str, int, list[str]]] = []  # (value, depth, text) of elements being read
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "img", "meta", "link", "input", "hr"):
            return
        self._depth += 1
        value = dict(attrs).get(self.attribute)
        if value is not None:
            self._open.append((value, self._depth, []))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][1] == self._depth:
            value, _, text = self._open.pop()
            self.found.append((value, "".join(text).strip()))
            if self._open:
                self._open[-1][2].extend(text)
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][2].append(data)


def elements(dom: str, attribute: str) -> list[tuple[str, str]]:
    parser = Elements(attribute)
    parser.feed(dom)
    return parser.found
