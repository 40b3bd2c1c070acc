"""Masking of credentials in every string that leaves the openai backend.

Servers echo what they receive (an Authorization header in an error body, sometimes in an
answer) and truncation can leave the start of a key behind, so masking removes every
occurrence of a secret *and* every fragment of it long enough to matter, and must run before
any truncation. Pure functions; no I/O."""

from __future__ import annotations

import base64
import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

MASK = "***"
MIN_FRAGMENT = 8  # a run of this many characters of a secret is treated as the secret itself
MIN_SECRET = 6  # shorter secrets are masked only where they sit in a URL (else "user" would vanish everywhere)

# query parameters that carry credentials in a URL (matched case-insensitively)
TOKEN_PARAMS = frozenset({"key", "api_key", "apikey", "api-key", "token", "access_token", "auth", "auth_token",
                          "password", "secret", "client_secret", "sig", "signature"})
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#]+@")
_QUERY_TOKEN = re.compile(r"(?i)([?&;](?:" + "|".join(re.escape(p) for p in sorted(TOKEN_PARAMS)) + r")=)[^&;#\s\"']+")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic|bearer|basic)(\s+)(?=[A-Za-z.]*[0-9_~+/=-])[A-Za-z0-9._~+/=-]{8,}")


def redact_url(url: str | None) -> str | None:
    """``url`` without user:password and without token-like query parameters, for reports
    and cache keys (``https://u:p@host/v1?key=x`` → ``https://host/v1``)."""
    if not url:
        return url
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:  # not parseable as a URL: mask what looks like credentials
        return mask_credentials(url)
    netloc = parts.netloc.rpartition("@")[2]
    if not host and not netloc:
        return mask_credentials(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in pairs if k.lower() not in TOKEN_PARAMS]
    query = urlencode(kept) if len(kept) < len(pairs) else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_credentials(text: str) -> str:
    """Credentials recognisable by their shape, whoever they belong to: ``scheme://user:pw@``,
    token-like query values and ``Bearer``/``Basic`` header values. For error texts (an
    exception may quote a URL), not for summaries, where ``ssh://git@host`` is content."""
    text = _URL_USERINFO.sub(r"\1" + MASK + "@", text)
    text = _QUERY_TOKEN.sub(r"\1" + MASK, text)
    return _AUTH_SCHEME.sub(r"\1\2" + MASK, text)


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries, in every form a server may see or echo: the password
    (raw and percent-decoded), the user name when it is the only credential (a token), the
    ``user:password`` pair and its base64 (HTTP Basic), and token-like query values."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return []
    found: list[str] = []
    if password:
        found += [password, unquote(password)]
    elif user:
        found += [user, unquote(user)]
    if user or password:
        for pair in {f"{user or ''}:{password or ''}", f"{unquote(user or '')}:{unquote(password or '')}"}:
            found += [pair, base64.b64encode(pair.encode()).decode()]
    found += [v for k, v in query if k.lower() in TOKEN_PARAMS and v]
    return found


def base64_forms(secret: str) -> list[str]:
    """The base64 (standard and URL-safe) of ``secret`` at each of the three alignments it can
    take inside a longer base64 text (the base64 of ``Bearer <key>``, of an Authorization header,
    of a whole request), without the characters that mix in its neighbours' bits."""
    if len(secret) < MIN_SECRET:
        return []
    plain = secret.encode("utf-8", "surrogatepass")
    forms: list[str] = []
    for pad in range(3):
        enc = base64.b64encode(b"\0" * pad + plain).decode()
        core = enc[(8 * pad + 5) // 6:len(enc) - 4]
        if len(core) >= MIN_FRAGMENT:
            forms += [core, core.replace("+", "-").replace("/", "_")]
    return forms


def collect_secrets(api_key: str | None, base_url: str | None) -> tuple[str, ...]:
    """Every secret of a backend configuration and its base64 forms (an echoed Authorization
    header, ``Bearer <key>`` encoded), longest first, without duplicates."""
    found = ([api_key] if api_key else []) + url_secrets(base_url)
    found += [form for s in list(found) if s for form in base64_forms(s)]
    return tuple(sorted({s for s in found if s}, key=lambda s: (-len(s), s)))


_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\(/)")


def json_unescaped(text: str) -> str:
    """``text`` with its JSON escapes ``\\uXXXX`` and ``\\/`` decoded: what a structured
    answer becomes once its JSON is read, so a key written as escapes is seen as the key."""
    if "\\" not in text:
        return text
    return _JSON_ESCAPE.sub(lambda m: m.group(2) or chr(int(m.group(1), 16)), text)


def _spans(text: str, secret: str) -> list[tuple[int, int]]:
    """Where ``secret``, or any run of at least MIN_FRAGMENT of its characters, occurs."""
    if len(secret) < MIN_SECRET:
        return []
    size = min(len(secret), MIN_FRAGMENT)
    spans = []
    for gram in {secret[i:i + size] for i in range(len(secret) - size + 1)}:
        at = text.find(gram)
        while at >= 0:
            spans.append((at, at + size))
            at = text.find(gram, at + 1)
    return spans


def mask_secrets(text: str, secrets: tuple[str, ...] | list[str]) -> str:
    """``text`` with every secret and every fragment of one (≥ MIN_FRAGMENT characters, so a
    key cut by an earlier truncation is caught too) replaced by ``***``: ``Bearer <key>``
    becomes ``Bearer ***``. Mask before truncating."""
    if not text:
        return text
    spans = sorted(s for secret in secrets for s in _spans(text, secret))
    if not spans:
        return text
    out, pos = [], 0
    start, end = spans[0]
    for s, e in spans[1:] + [(len(text) + 1, len(text) + 1)]:
        if s <= end:  # overlapping or touching: one masked run
            end = max(end, e)
            continue
        out += [text[pos:start], MASK]
        pos, start, end = end, s, e
    out.append(text[pos:])
    return "".join(out)


def contains_secret(text: str, secrets: tuple[str, ...] | list[str]) -> bool:
    """Whether ``text`` holds a secret or a fragment of one (≥ MIN_FRAGMENT characters), as
    it stands or once its JSON escapes are decoded (the text a structured answer writes)."""
    if not text:
        return False
    forms = {text, json_unescaped(text)}
    return any(_spans(form, secret) for form in forms for secret in secrets)
