"""Finds credentials in text and in file names, so ingest can refuse to commit them to git."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePath

__all__ = ["Finding", "scan", "is_credentials_file", "shannon_entropy"]


@dataclass(frozen=True)
class Finding:
    """One suspected secret: 1-based line, what it looks like, and the line with the secret masked."""

    line: int
    kind: str
    excerpt_redacted: str


# File names that hold credentials by convention. Matched case-insensitively on the base name.
_CREDENTIAL_GLOBS = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "credentials*",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    ".htpasswd",
)
# Templates are committed on purpose and hold placeholders; their contents are still scanned.
_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist", ".tmpl")


def is_credentials_file(path: str | PurePath) -> bool:
    """True when the file's name says it holds credentials (.env, *.pem, id_rsa, .netrc, ...)."""
    name = PurePath(path).name.lower()
    if name.endswith(_TEMPLATE_SUFFIXES) or name.endswith(".pub"):
        return False  # an env template or a public key is not a secret
    return any(fnmatchcase(name, pattern) for pattern in _CREDENTIAL_GLOBS)


def shannon_entropy(value: str) -> float:
    """Bits per character of the value's own character distribution."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# Each rule: (kind, pattern, group holding the secret). Token shapes are the vendors' documented ones.
_TOKEN_RULES: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("aws-access-key-id", re.compile(r"(?<![A-Z0-9])((?:AKIA|ASIA)[0-9A-Z]{16})(?![A-Z0-9])"), 1),
    (
        "aws-secret-access-key",
        re.compile(
            r"(?i:aws_?secret_?(?:access_?)?key|secret_?access_?key)[\"']?\s*(?:=|:|=>)\s*[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        1,
    ),
    ("openai-api-key", re.compile(r"(?<![\w-])(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"), 1),
    ("github-token", re.compile(r"(?<![\w])(gh[pousr]_[A-Za-z0-9]{36,255})(?![A-Za-z0-9])"), 1),
    ("github-token", re.compile(r"(?<![\w])(github_pat_[A-Za-z0-9_]{22,255})"), 1),
    ("slack-token", re.compile(r"(?<![\w-])(xox[baprs]-[A-Za-z0-9-]{10,})"), 1),
    ("google-api-key", re.compile(r"(?<![\w-])(AIza[0-9A-Za-z_-]{35})(?![\w-])"), 1),
    ("stripe-secret-key", re.compile(r"(?<![\w])([sr]k_live_[0-9A-Za-z]{16,})"), 1),
)

_PRIVATE_KEY = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
# A key block is only reported when key material follows, so prose that names the header is not.
_KEY_BODY_LINE = re.compile(r"^[ \t]*[A-Za-z0-9+/=]{32,}[ \t]*\r?$", re.MULTILINE)

# name = value, name: value, "name": "value", name := value, export NAME=value. The search starts
# at the name's last word (key, secret, ...) and reads the name backwards from there, because an
# expression that must try every position of a line as a name's start is slow.
_NAME_LAST_WORD = re.compile(r"(?i:key|secret|token|passw(?:or)?d|pwd)(?![a-z0-9])")
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_AFTER_NAME = re.compile(
    r"[\"']?"
    r"(?:[ \t]*:[ \t]*[A-Za-z_][\w.\[\]| ]{0,40}?(?=[ \t]*=[^=>]))?"  # a type hint: `key: str = ...`
    r"[ \t]*(?P<sep>:=|=>|=|:)[ \t]*"
    r"(?:(?P<q>[\"'`])(?P<quoted>[^\"'`\r\n]{1,512})(?P=q)|(?P<bare>[^\s\"'`#;,)}\]]{1,512}))"
)
_SECRET_NAME_WORDS = {"key", "secret", "token", "password", "passwd", "pwd", "apikey", "secretkey"}
_PLACEHOLDER_HINTS = (
    "your", "example", "xxxx", "****", "....", "changeme", "change-me", "change_me", "placeholder",
    "dummy", "redacted", "insert", "replace", "sample", "fake", "<", ">", "${", "{{", "%(", "$(",
)
_ENTROPY_BITS = 3.5  # random base64/base62 of 20+ chars sits near 4+; English-like words near 3
_HEX_ENTROPY_BITS = 3.0  # hex has only 16 symbols, so its ceiling is 4 bits
_MIN_GENERIC_LEN = 20


def scan(text: str) -> list[Finding]:
    """Every suspected secret in the text, in order of position, each place reported once."""
    found: dict[tuple[int, int], str] = {}

    def report(pos: int, end: int, kind: str) -> None:
        if not any(s <= pos < e for s, e in found):  # rules run most specific first
            found[(pos, end)] = kind

    for m in _PRIVATE_KEY.finditer(text):
        if _KEY_BODY_LINE.search(text, m.end(), m.end() + 4096):
            report(m.start(), m.end(), "private-key")
    for start, end in _candidate_lines(text):
        _scan_line(text, start, end, report)
    return [_finding(text, pos, end, kind) for (pos, end), kind in sorted(found.items())]


# Lower-case words that every rule's match contains; only lines holding one are run through the
# regular expressions, which are slow when tried at every position of a large file.
_ANCHORS = (
    "akia", "asia", "sk-", "k_live_", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "xox", "aiza",
    "key", "secret", "token", "passw", "pwd",
)


def _candidate_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of the lines that contain an anchor word, in order."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a rare character grew when lowered; offsets would drift
        return [(0, len(text))]
    starts: set[int] = set()
    for anchor in _ANCHORS:
        pos = lowered.find(anchor)
        while pos != -1:
            line_start = text.rfind("\n", 0, pos) + 1
            starts.add(line_start)
            line_end = text.find("\n", pos)
            pos = -1 if line_end == -1 else lowered.find(anchor, line_end)
    spans = []
    for line_start in sorted(starts):
        line_end = text.find("\n", line_start)
        spans.append((line_start, len(text) if line_end == -1 else line_end))
    return spans


def _scan_line(text: str, start: int, end: int, report) -> None:
    for kind, pattern, group in _TOKEN_RULES:
        for m in pattern.finditer(text, start, end):
            if _plausible_token(kind, m.group(group)):
                report(m.start(group), m.end(group), kind)
    for word in _NAME_LAST_WORD.finditer(text, start, end):
        m = _AFTER_NAME.match(text, word.end(), end)
        if m is None:
            continue
        name_start = word.start()
        while name_start > start and text[name_start - 1] in _NAME_CHARS:
            name_start -= 1
        value_group = "quoted" if m.group("quoted") is not None else "bare"
        value = m.group(value_group)
        if value_group == "bare" and not _ends_bare_value(text, m.end(), m.group("sep")):
            continue  # `f(key=name, ...)`, `key: TypeName | None`: code that names a value
        if _secret_name(text[name_start : word.end()]) and _high_entropy_value(
            value, quoted=value_group == "quoted"
        ):
            report(m.start(value_group), m.end(value_group), "generic-secret")


def _ends_bare_value(text: str, pos: int, sep: str) -> bool:
    """Whether an unquoted value stands alone, as in .env files, YAML and shell, not inside code.

    After "=", anything but a comma or closer may follow (`TOKEN=v ./run`, `?token=v&x=1`); after
    ":", only the end of the line or a comment, since `key: Name,` or `key: Name | None` is a type.
    """
    if sep != ":":
        return pos >= len(text) or text[pos] not in ",)]}|"
    rest = text[pos : pos + 200].lstrip(" \t")
    return not rest or rest[0] in "\r\n#"


def _plausible_token(kind: str, value: str) -> bool:
    """Filters the documented example keys and word-like look-alikes of a token shape."""
    lowered = value.lower()
    if "example" in lowered or _is_placeholder(value):
        return False
    if kind == "openai-api-key":
        # Real keys are random base62: they carry digits and capitals, unlike "sk-some-long-name".
        tail = value.split("-", 1)[1]
        return any(c.isdigit() for c in tail) and any(c.isupper() for c in tail)
    if kind == "slack-token":
        return any(c.isdigit() for c in value)
    return True


def _secret_name(name: str) -> bool:
    """True for names like API_KEY, client_secret, authToken, DB_PASSWORD (last word decides)."""
    words = re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)
    return bool(words) and words[-1].lower() in _SECRET_NAME_WORDS


def _is_placeholder(value: str) -> bool:
    lowered = value.lower()
    return any(hint in lowered for hint in _PLACEHOLDER_HINTS) or len(set(lowered)) <= 3


def _high_entropy_value(value: str, *, quoted: bool) -> bool:
    if len(value) < _MIN_GENERIC_LEN or _is_placeholder(value):
        return False
    if any(c.isspace() for c in value):
        return False  # prose or code in quotes; generated secrets have no spaces
    if not quoted and any(c in value for c in ".([{/"):
        return False  # a bare dotted name, call, index or path is code that fetches the secret
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False  # identifiers and words; random tokens of this length almost always mix both
    if re.fullmatch(r"[0-9a-fA-F]+", value):
        return shannon_entropy(value) >= _HEX_ENTROPY_BITS
    return shannon_entropy(value) >= _ENTROPY_BITS


def _finding(text: str, pos: int, end: int, kind: str) -> Finding:
    """The finding with its line number and its line, the secret masked (first four characters kept)."""
    line_no = text.count("\n", 0, pos) + 1
    start = text.rfind("\n", 0, pos) + 1
    stop = text.find("\n", pos)
    line = text[start : len(text) if stop == -1 else stop].rstrip("\r")
    end = min(end, start + len(line))
    secret = text[pos:end]
    masked = secret if secret.startswith("-----BEGIN") else secret[:4] + "…[redacted]"
    excerpt = (line[: pos - start] + masked + line[end - start :]).strip()
    return Finding(line_no, kind, excerpt if len(excerpt) <= 160 else excerpt[:159] + "…")
