"""Where the facts are in a text: the URLs, paths, identifiers and numbers the offline
summariser ranks (``facts.py``), found by one pattern, ``_FACT``, or by the compiled walk that asks
its kinds only where one may start (``_facts.c``)."""

from __future__ import annotations

import re
from functools import cache

from ..model.compiled import extension

#: The file extensions a path may end with, and the top-level domains of a URL without a scheme.
_EXTENSIONS = ("py|js|ts|tsx|jsx|json|jsonl|md|rst|txt|ya?ml|toml|rs|go|java|c|h|cc|cpp|hpp|cs|sh|bash|zsh|ps1|bat|"
               "cfg|ini|conf|env|html?|heex|eex|css|scss|sql|csv|tsv|log|lock|ex|exs|erl|rb|php|pl|lua|kt|swift|"
               "scala|dart|vue|proto|tf|xml|ipynb|pdf|png|jpe?g|gif|svg|webp|gz|tgz|bz2|xz|zip|tar|7z|img|iso|bin|"
               "exe|dll|so|dylib|pcap|pcapng|mpeg|mp4|m4v|avi|mov|mp3|wav|enc|pem|key|pub|crt|db|sqlite3?|parquet|"
               "traj|out")
_TLDS = "com|io|org|net|dev|ai|co|edu|gov|app|cloud|local|internal"
#: The kinds of fact, as pattern text: ``_FACT`` and ``_FACT_KINDS`` are made of them.
_PATH = (r"(?<![\w/.~-])(?:~?/|\./)?(?:[\w.@+-]+/)+[\w.@+-]*[\w]|(?<![\w/.-])[\w.-]*\w\.(?:" + _EXTENSIONS
         + r")\b")
_URL = (r"\bhttps?://[^\s<>\"'`)\]]+[^\s<>\"'`)\].,;:]|(?<![\w.@-])(?:[a-z0-9-]+\.)+(?:" + _TLDS
        + r")(?::\d+)?\b(?![.\w-])")
_EXT = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,5}$")
_IDENT = (r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,10}\b|\b[a-z]+_[a-z]+_?\d+\b"
          r"|\b[A-Z][A-Z0-9]{1,9}-\d+\b"
          r"|\b[0-9a-f]{7,12}\b(?=[^\n]{0,40}\b(?:commit|sha|hash)\b)"
          r"|\b(?:commit|sha|hash)\b[^\n]{0,20}?\b[0-9a-f]{7,40}\b")
_UNITS = (r"%|ms|s|sec|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|KB|MB|GB|TB|KiB|MiB|GiB|"
          r"bytes|tokens|lines|items|tests?|files|rows|records|requests|users|errors|failures|passengers|bags|"
          r"flights|nights|people|points|calls|retries|workers|threads|cores|replicas|pods|nodes|servers|dollars|"
          r"USD|EUR|GBP|kg|km|miles")
_CURRENCY = r"[$€£]\s?\d[\d,]*(?:\.\d+)?"  # the one kind of fact that may start inside a word (US$5)
_NUMBER_AT_WORD = r"\b\d[\d,]*(?:\.\d+)?\s?(?:" + _UNITS + r")\b|\b\d{4}-\d{2}-\d{2}\b"


def _is_path(p: str) -> bool:
    if p.startswith(("/", "~/", "./")) or p.count("/") >= 2:
        return len(p.strip("/.~")) > 2
    return bool(_EXT.search(p)) and not p.endswith("/")


#: Where no kind of fact can start, so the alternatives are not tried (issue 32: the fact scan was
#: a quarter of the extractive summariser's time):
#: - every kind begins with a word character or one of ``~/.@+-`` (a currency amount with its
#:   sign): at a space, a quote or a bracket the search moves on after one look-ahead;
#: - every kind but a currency amount starts where no word character precedes (each begins with
#:   ``\b`` or a look-behind that excludes ``\w``): inside a word, after one look-behind;
#: - a word of ASCII letters and underscores that is followed by none of ``.@+/:-`` is no fact:
#:   a URL, a path and an ``ABC-12`` need one of those next, every other identifier and number a
#:   digit, except a 7-12 letter hex word and "commit", "sha" and "hash" (the hash patterns).
_NO_FACT_WORD = r"(?!(?!(?:[a-f]{7,12}|commit|sha|hash)(?!\w))[A-Za-z_]+(?![\w.@+/:-]))"
#: The URLs, paths, identifiers and numbers in one pattern; where two could start, the first
#: kind listed wins. ``tests/test_facts_scan.py`` holds it to the plain alternation of the four
#: patterns, match for match.
_KINDS = "|".join(f"(?P<{name}>{rx})" for name, rx in (("url", _URL), ("path", _PATH), ("id", _IDENT),
                                                        ("number", _NUMBER_AT_WORD)))
_FACT = r"(?=[\w~/.@+\-$€£])(?:(?<!\w)" + _NO_FACT_WORD + "(?:" + _KINDS + r")|(?P<currency>" + _CURRENCY + "))"


@cache
def fact_pattern() -> re.Pattern[str]:
    """``_FACT`` compiled: the scan where the compiled one is not, and the reference the tests
    hold that one to (compiled only when asked for: it is the largest of the summariser's
    patterns)."""
    return re.compile(_FACT)


#: ``_FACT`` without its gates, and its currency amount alone: what the compiled scan tries where
#: the gates hold, and where only a currency sign lets a match start (backends/_facts.c).
_FACT_KINDS = re.compile(_KINDS + r"|(?P<currency>" + _CURRENCY + ")")
_FACT_CURRENCY = re.compile(r"(?P<currency>" + _CURRENCY + ")")


def spellings(alternatives: str) -> frozenset[str]:
    """The words ``(?:ALTERNATIVES)`` matches, for alternatives of letters, digits, ``%`` and an
    optional character (``ya?ml``): what the compiled scan looks a word up in."""
    out: set[str] = set()
    todo = alternatives.split("|")
    while todo:
        word = todo.pop()
        i = word.find("?")
        if i < 0:
            out.add(word)
        else:
            todo += [word[:i - 1] + word[i + 1:], word[:i] + word[i + 1:]]
    return frozenset(out)


#: The compiled part (backends/_facts.c): its scan finds the same matches as ``_FACT.finditer``,
#: with the pattern tried only where a fact may start; or None (compiled.py).
COMPILED = extension("_facts", __package__)
_DOT_WORDS = spellings(_EXTENSIONS + "|" + _TLDS)
_UNIT_WORDS = spellings(_UNITS)


def facts_in(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of the URLs, paths, identifiers and numbers in ``text``, in one pass:
    where two could start, the first kind listed wins (a path inside a URL is the URL's)."""
    found = (COMPILED.scan(_FACT_KINDS, _FACT_CURRENCY, _DOT_WORDS, _UNIT_WORDS, text) if COMPILED
             else [(*m.span(), m.lastgroup) for m in fact_pattern().finditer(text)])
    out = []
    for start, end, kind in found:
        if kind == "path" and not _is_path(text[start:end]):
            continue
        out.append((start, end, "path" if kind == "url" else "number" if kind == "currency" else kind or ""))
    return out
