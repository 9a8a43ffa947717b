"""Finds credentials in text and in file names, so ingest can refuse to commit them to git."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import PurePath

__all__ = [
    "Finding",
    "scan",
    "scan_rules",
    "scan_detect_secrets",
    "redact",
    "is_credentials_file",
    "shannon_entropy",
]


@dataclass(frozen=True)
class Finding:
    """One suspected secret: 1-based line, what it looks like, and the line with the secret masked."""

    line: int
    kind: str
    excerpt_redacted: str
    start: int = field(default=-1, compare=False)  # the secret's span in the scanned text
    end: int = field(default=-1, compare=False)


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
    (
        "anthropic-api-key",
        re.compile(r"(?<![\w-])(sk-ant-(?:api|admin|oat)\d{2}-[A-Za-z0-9_-]{40,})"),
        1,
    ),
    (
        "openai-api-key",
        re.compile(r"(?<![\w-])(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})"),
        1,
    ),
    (
        "huggingface-token",
        re.compile(r"(?<![\w-])((?:hf|api_org)_[A-Za-z0-9]{30,40})(?![A-Za-z0-9_])"),
        1,
    ),
    ("gitlab-token", re.compile(r"(?<![\w-])(glpat-[A-Za-z0-9_-]{20,})"), 1),
    ("google-oauth-client-secret", re.compile(r"(?<![\w-])(GOCSPX-[A-Za-z0-9_-]{28})(?![\w-])"), 1),
    # a Google Cloud service-account key file: its private key is found as a key; this is its id
    (
        "gcp-service-account",
        re.compile(r"[\"']private_key_id\\*[\"']\s*:\s*\\*[\"']([0-9a-f]{40})\\*[\"']"),
        1,
    ),
    ("github-token", re.compile(r"(?<![\w])(gh[pousr]_[A-Za-z0-9]{36,255})(?![A-Za-z0-9])"), 1),
    ("github-token", re.compile(r"(?<![\w])(github_pat_[A-Za-z0-9_]{22,255})"), 1),
    ("slack-token", re.compile(r"(?<![\w-])(xox[baprs]-[A-Za-z0-9-]{10,})"), 1),
    ("google-api-key", re.compile(r"(?<![\w-])(AIza[0-9A-Za-z_-]{35})(?![\w-])"), 1),
    ("stripe-secret-key", re.compile(r"(?<![\w])([sr]k_live_[0-9A-Za-z]{16,})"), 1),
    (
        "slack-webhook",
        re.compile(
            r"(https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{16,})"
        ),
        1,
    ),
    (
        "jwt",
        re.compile(r"(?<![\w-])(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,})"),
        1,
    ),
    ("docker-auth", re.compile(r"(?<![\w])(dckr_pat_[A-Za-z0-9_-]{20,})"), 1),
    ("docker-auth", re.compile(r"\"auth\"\s*:\s*\"([A-Za-z0-9+/]{12,}={0,2})\""), 1),
    ("telegram-bot-token", re.compile(r"(?<![\w:])([0-9]{8,10}:AA[0-9A-Za-z_-]{33})(?![\w-])"), 1),
    ("npm-token", re.compile(r"(?<![\w])(npm_[A-Za-z0-9]{36})(?![A-Za-z0-9])"), 1),
    (
        "url-credentials",
        re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]{1,64}:([^\s:/@]{3,128})@[\w.-]"),
        1,
    ),
)

# For each rule of _TOKEN_RULES, in order: lower-case words one of which every match of the rule
# holds once lowered. A line that holds none of them, lowered, is not searched with the rule.
_RULE_WORDS: tuple[tuple[str, ...], ...] = (
    ("akia", "asia"),
    ("secret",),
    ("sk-ant-",),
    ("sk-",),
    ("hf_", "api_org_"),
    ("glpat-",),
    ("gocspx-",),
    ("private_key_id",),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("github_pat_",),
    ("xox",),
    ("aiza",),
    ("k_live_",),
    ("https://hooks.slack.com/services/t",),
    ("eyj",),
    ("dckr_pat_",),
    ('"auth"',),
    (":aa",),
    ("npm_",),
    ("://",),
)
_PASSWORD_WORDS = ("passw", "pwd", "passphrase")
_NAME_WORDS = ("key", "secret", "token", "passw", "pwd")
_GATED_RULES = tuple(
    (kind, pattern, group, words, "(?i" in pattern.pattern)  # the last: the rule ignores case
    for (kind, pattern, group), words in zip(_TOKEN_RULES, _RULE_WORDS, strict=True)
)


_PRIVATE_KEY = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*)PRIVATE KEY( BLOCK)?-----")
# A key block is only reported when key material follows, so prose that names the header is not.
_KEY_BODY_LINE = re.compile(r"^[ \t]*[A-Za-z0-9+/=]{32,}[ \t]*\r?$", re.MULTILINE)
# The same key pasted on one line, or inside a JSON string with its line breaks escaped as \n.
_KEY_BODY_INLINE = re.compile(
    r"(?:[ \t]|\\+r|\\+n)+(?:[A-Za-z-]+: [^\\\n]*(?:\\+r)?\\+n)*(?:\\+r|\\+n)*[A-Za-z0-9+/=]{32,}"  # Proc-Type: ... headers
)
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----")
_KEY_INLINE_RUN = re.compile(r"(?:[A-Za-z0-9+/=]|\\+r|\\+n|[ \t])+")

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
    "your",
    "example",
    "xxxx",
    "****",
    "....",
    "changeme",
    "change-me",
    "change_me",
    "placeholder",
    "dummy",
    "redacted",
    "insert",
    "replace",
    "sample",
    "fake",
    "<",
    ">",
    "${",
    "{{",
    "%(",
    "$(",
)
_ENTROPY_BITS = 3.5  # random base64/base62 of 20+ chars sits near 4+; English-like words near 3
_HEX_ENTROPY_BITS = 3.0  # hex has only 16 symbols, so its ceiling is 4 bits
_MIN_GENERIC_LEN = 20


def scan_rules(text: str) -> list[Finding]:
    """Every secret the hand-written rules find, in order of position, each place reported once."""
    found: dict[tuple[int, int], str] = {}

    def report(pos: int, end: int, kind: str) -> None:
        if not any(s <= pos < e for s, e in found):  # rules run most specific first
            found[(pos, end)] = kind

    for m in _PRIVATE_KEY.finditer(text) if "-----BEGIN " in text else ():
        if _KEY_BODY_INLINE.match(text, m.end()):
            report(m.start(), _inline_key_end(text, m.end()), "private-key")
        elif _KEY_BODY_LINE.search(text, m.end(), m.end() + 4096):
            report(m.start(), _key_block_end(text, m.end()), "private-key")
    lowered = text.lower()
    lines = _candidate_lines(text, lowered)
    aligned = lowered if len(lowered) == len(text) else None
    for start, end in lines:
        _scan_line(text, start, end, report, aligned)
    if lines:  # every wrapped-token prefix holds an anchor word: no anchor, no wrapped token
        _scan_wrapped(text, report, lowered)
    spans = sorted(found.items())
    return [_finding(text, pos, end, kind, spans) for (pos, end), kind in spans]


# Lower-case words that every rule's match contains; only lines holding one are run through the
# regular expressions, which are slow when tried at every position of a large file.
_ANCHORS = (
    "akia",
    "asia",
    "sk-",
    "k_live_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "ghr_",
    "github_pat_",
    "xox",
    "aiza",
    "key",
    "secret",
    "token",
    "passw",
    "pwd",
    "hooks.slack",
    "eyj",
    "dckr_pat_",
    '"auth"',
    "npm_",
    "://",
    "hf_",
    "api_org_",
    "glpat-",
    "gocspx-",
    ":aa",
)


# Most anchors hold a character that is rare in conversation text; one expression finds them all
# from that character (a search whose first characters are rare tries few positions: ~6 against
# ~20 us for a str.find per anchor over a 1,000-character text). The anchors made of common
# letters only are found with str.find.
_RARE_CHARS = '/jz"_x-:kw'  # rarest first, as counted in conversation text (LongMemEval)


def _anchor_search():
    by_char: dict[str, list[str]] = {}
    plain = []
    for anchor in _ANCHORS:
        rare = [c for c in _RARE_CHARS if c in anchor]
        if not rare:
            plain.append(anchor)
            continue
        i = anchor.index(rare[0])  # match the rare character, then look back for the rest
        head, tail = re.escape(anchor[: i + 1]), re.escape(anchor[i + 1 :])
        by_char.setdefault(rare[0], []).append(f"(?<={head}){tail}")
    branches = (re.escape(c) + "(?:" + "|".join(alts) + ")" for c, alts in by_char.items())
    return re.compile("|".join(branches)), tuple(plain)


_ANCHOR_RARE, _ANCHORS_PLAIN = _anchor_search()


def _candidate_lines(text: str, lowered: str) -> list[tuple[int, int]]:
    """(start, end) of the lines that contain an anchor word, in order (`lowered` is text.lower())."""
    if len(lowered) != len(text):  # a rare character grew when lowered; offsets would drift
        return [(0, len(text))]
    starts: set[int] = set()
    m = _ANCHOR_RARE.search(lowered)
    while m is not None:  # no anchor holds a line break, so each lies within one line
        pos = m.start()
        starts.add(text.rfind("\n", 0, pos) + 1)
        line_end = text.find("\n", pos)
        m = None if line_end == -1 else _ANCHOR_RARE.search(lowered, line_end)
    for anchor in _ANCHORS_PLAIN:
        pos = lowered.find(anchor)
        while pos != -1:
            starts.add(text.rfind("\n", 0, pos) + 1)
            line_end = text.find("\n", pos)
            pos = -1 if line_end == -1 else lowered.find(anchor, line_end)
    spans = []
    for line_start in sorted(starts):
        line_end = text.find("\n", line_start)
        spans.append((line_start, len(text) if line_end == -1 else line_end))
    return spans


def _scan_line(text: str, start: int, end: int, report, lowered: str | None = None) -> None:
    """Run the rules on one line. With `lowered` (text.lower(), as long as text), a rule is tried
    only when the lowered line holds one of its words; a rule that ignores case only on a line of
    ASCII characters, since it also matches characters that lower() keeps (ſ for s, ı for i)."""
    line = None if lowered is None else lowered[start:end]
    ascii_line = line is not None and (text.isascii() or text[start:end].isascii())
    if not ascii_line or any(word in line for word in _PASSWORD_WORDS):
        _scan_passwords(text, start, end, report)
    for kind, pattern, group, words, caseless in _GATED_RULES:
        if line is not None and (ascii_line or not caseless):
            for word in words:  # (a loop, not any(): this runs ~20 times a line)
                if word in line:
                    break
            else:
                continue
        for m in pattern.finditer(text, start, end):
            if _plausible_token(kind, m.group(group)):
                report(m.start(group), m.end(group), kind)
    if ascii_line and not any(word in line for word in _NAME_WORDS):
        return
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


# A password needs no entropy to be one: `password: hunter2-SuperSecret!` is as bad as a token.
_PASSWORD_RULE = re.compile(
    r"(?i:\b(?:[a-z0-9_]*?passw(?:or)?d|pwd|passphrase)\b)[\"']?"
    r"(?:[ \t]*(?::=|=>|=|:)[ \t]*|[ \t]+is[ \t]+)"
    r"(?:(?P<q>[\"'])(?P<quoted>[^\"'\r\n]{1,200})(?P=q)|(?P<bare>[^\s\"'`,;)}\]]{1,200}))"
)
_PLACEHOLDER_PASSWORDS = {
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "changeme",
    "xxx",
    "none",
    "null",
    "true",
    "false",
    "required",
    "optional",
    "string",
    "str",
    "hidden",
}


def _scan_passwords(text: str, start: int, end: int, report) -> None:
    for m in _PASSWORD_RULE.finditer(text, start, end):
        group = "quoted" if m.group("quoted") is not None else "bare"
        value = m.group(group)
        if _plausible_password(value):
            report(m.start(group), m.end(group), "generic-secret")


def _plausible_password(value: str) -> bool:
    """Chosen passwords: 6+ characters mixing at least two of letters, digits and symbols, not code."""
    value = value.rstrip(".")
    if len(value) < 6 or _is_placeholder(value) or value.lower() in _PLACEHOLDER_PASSWORDS:
        return False
    if value.startswith(("$", "%", "*", "@")) or any(c in value for c in "()[]{}"):
        return False  # a variable, a format string, a call or an index: code that fetches it
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+", value):
        return False  # settings.DB_PASSWORD
    classes = sum(
        (
            any(c.isalpha() for c in value),
            any(c.isdigit() for c in value),
            any(not c.isalnum() for c in value),
        )
    )
    return classes >= 2


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
    if (
        kind == "huggingface-token"
    ):  # random mixed-case letters, unlike hf_hub_download or hf_TOKENNAME
        tail = value.split("_", 1)[1]
        return any(c.isupper() for c in tail) and any(c.islower() for c in tail)
    if kind == "docker-auth" and not value.startswith("dckr_"):
        return _decodes_to_user_and_password(value)
    if kind == "url-credentials":
        return lowered not in _PLACEHOLDER_PASSWORDS and not value.startswith(("$", "%", "*"))
    return True


def _decodes_to_user_and_password(value: str) -> bool:
    """A Docker config `auth` is base64 of "user:password"."""
    import base64
    import binascii

    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return False
    user, sep, password = raw.partition(":")
    return bool(sep and user and password)


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


# Token shapes that start with a fixed prefix: a token of one of them that a terminal or an editor
# wrapped over two lines is found by joining the lines at the break.
_WRAP_PREFIXES = (
    "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "sk-", "sk_live_", "rk_live_", "xox",
    "aiza", "akia", "asia", "hf_", "api_org_", "npm_", "dckr_pat_", "eyj", "glpat-", "gocspx-",
)  # fmt: skip
_TOKEN_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.+/=")
_WRAP_BREAK = re.compile(r"[ \t]*(?:\\?\r?\n|\\+n)[ \t>]*")
_MAX_WRAPS = 3  # a token of up to 4 lines


def _scan_wrapped(text: str, report, lowered: str) -> None:
    """Report tokens cut by line breaks: each prefix's run of token characters that ends at a line
    break is joined with the runs that start the next lines, and the rules are tried on the join
    (`lowered` is text.lower())."""
    if len(lowered) != len(text):
        return
    absent = [c for c in "_-" if c not in lowered]  # most prose has neither: skip those prefixes
    for prefix in _WRAP_PREFIXES:
        if absent and any(c in prefix for c in absent):
            continue
        pos = lowered.find(prefix)
        while pos != -1:
            _try_wrapped(text, pos, report)
            pos = lowered.find(prefix, pos + len(prefix))


def _run_end(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _TOKEN_CHARS:
        pos += 1
    return pos


def _try_wrapped(text: str, pos: int, report) -> None:
    pieces = [(pos, _run_end(text, pos))]  # (start, end) in the text of each line's part
    for _ in range(_MAX_WRAPS):
        brk = _WRAP_BREAK.match(text, pieces[-1][1])
        if brk is None:
            break
        end = _run_end(text, brk.end())
        if end == brk.end():
            break
        pieces.append((brk.end(), end))
    if len(pieces) == 1:
        return
    joined = "".join(text[a:b] for a, b in pieces)
    cuts = [0]
    for a, b in pieces:
        cuts.append(cuts[-1] + b - a)

    def place(i: int) -> int:  # a position in `joined` -> the position in `text`
        for (a, _b), lo, hi in zip(pieces, cuts, cuts[1:]):
            if i < hi or hi == cuts[-1]:
                return a + i - lo
        return pieces[-1][1]

    for kind, pattern, group in _TOKEN_RULES:
        m = pattern.search(joined)
        if m and m.start(group) < cuts[1] < m.end(group) and _plausible_token(kind, m.group(group)):
            report(place(m.start(group)), place(m.end(group) - 1) + 1, kind)
            return


def _inline_key_end(text: str, pos: int) -> int:
    """The end of a key pasted on one line or with escaped line breaks: its END marker, else its run."""
    m = _KEY_END.search(text, pos, pos + 16384)
    if m and "\n" not in text[pos : m.start()]:
        return m.end()
    run = _KEY_INLINE_RUN.match(text, pos)
    return run.end() if run else pos


def _key_block_end(text: str, pos: int) -> int:
    """The end of a private key block: its END line, else the last line of key material."""
    m = _KEY_END.search(text, pos)
    if m:
        return m.end()
    last = pos
    for body in _KEY_BODY_LINE.finditer(text, pos):
        if text.count("\n", last, body.start()) > 1:
            break
        last = body.end()
    return last


def _finding(text: str, pos: int, end: int, kind: str, spans=()) -> Finding:
    """The finding with its line number and its line, with this secret and every other one found
    on the line masked (first four characters kept; a private key keeps its header)."""
    line_no = text.count("\n", 0, pos) + 1
    start = text.rfind("\n", 0, pos) + 1
    return Finding(line_no, kind, _masked_line(text, start, [((pos, end), kind), *spans]), pos, end)


def _mask_secret(secret: str, kind: str) -> str:
    """A private key keeps its header (a header alone on its line as it is), anything else four characters."""
    head = _PRIVATE_KEY.match(secret) if kind == "private-key" else None
    if head:
        return secret if secret == head.group(0) else head.group(0) + "…[redacted]"
    return secret[:4] + "…[redacted]"


def _masked_line(text: str, start: int, spans) -> str:
    """The line starting at `start`, each (start, end) span of `spans` that meets it masked."""
    stop = text.find("\n", start)
    line = text[start : len(text) if stop == -1 else stop].rstrip("\r")
    line_end = start + len(line)
    cuts = sorted(
        {(max(a, start), min(b, line_end), k) for (a, b), k in spans if a < line_end and b > start}
    )
    out, at = [], start
    for a, b, kind in cuts:
        if a < at:
            a = at
            if a >= b:
                continue
            out.append("…[redacted]")
        else:
            secret = text[a:b]
            out += [text[at:a], _mask_secret(secret, kind)]
        at = b
    out.append(text[at:line_end])
    excerpt = "".join(out).strip()
    return excerpt if len(excerpt) <= 160 else excerpt[:159] + "…"


# ---------------------------------------------------------------------------------------------
# detect-secrets (Yelp), measured against the rules above in docs/reliability.md

# Plugins that recognise one vendor's token shape; the entropy and keyword plugins are left out of
# the adopted detector because they flag hashes, UUIDs and words (see the measurements).
_DS_SPECIFIC = {
    "AWS Access Key": "aws-access-key-id",
    "GitHub Token": "github-token",
    "GitLab Token": "gitlab-token",
    "Slack Token": "slack-token",
    "Stripe Access Key": "stripe-secret-key",
    "JSON Web Token": "jwt",
    "Private Key": "private-key",
    "OpenAI Token": "openai-api-key",
    "NPM tokens": "npm-token",
    "PyPI Token": "pypi-token",
    "SendGrid API Key": "sendgrid-key",
    "Twilio API Key": "twilio-key",
    "Discord Bot Token": "discord-token",
    "Telegram Bot Token": "telegram-token",
    "Mailchimp Access Key": "mailchimp-key",
    "Azure Storage Account access key": "azure-storage-key",
    "Square OAuth Secret": "square-oauth-secret",
    "Artifactory Credentials": "artifactory-token",
    "Basic Auth Credentials": "basic-auth",
    "IBM Cloud IAM Key": "ibm-cloud-key",
    "IBM COS HMAC Credentials": "ibm-cos-hmac",
    "Cloudant Credentials": "cloudant-credentials",
    "SoftLayer Credentials": "softlayer-credentials",
}
_DS_SKIP = {"Public IP (ipv4)"}


def scan_detect_secrets(
    text: str, specific_only: bool = False, token_lines_only: bool | None = None
) -> list[Finding]:
    """What detect-secrets (pinned 1.5.0) reports for the text, scanned as one file with its filters.

    With `specific_only`, only lines holding a long token are handed over and only the
    vendor-specific plugins count: the way the adopted detector (`scan`) uses it.
    """
    from detect_secrets.core import scan as ds_scan

    _ds_configure()
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    lines = [line.rstrip("\r\n") for line in lines]
    numbered = list(enumerate(lines, start=1))
    if specific_only if token_lines_only is None else token_lines_only:
        numbered = [(n, line) for n, line in numbered if _has_long_token(line)]
    if specific_only:
        # A vendor-specific plugin reports only what one of its own patterns matches: a line none
        # of them matches cannot give a finding that counts here, and skipping it skips every
        # plugin's Python per line (~2 ms a text with a long token, most of a scan).
        patterns = _ds_specific_patterns()
        if patterns is not None:
            numbered = [(n, line) for n, line in numbered if any(p.search(line) for p in patterns)]
        if not numbered:
            return []
    out: dict[tuple[int, int], str] = {}
    # The line-based scan of a file (with the heuristic filters), minus the file I/O; its name is
    # private, which is why the dependency is pinned.
    for s in ds_scan._process_line_based_plugins(numbered, filename="record.txt"):
        if s.type in _DS_SKIP or (specific_only and s.type not in _DS_SPECIFIC):
            continue
        kind = _DS_SPECIFIC.get(s.type, s.type.lower().replace(" ", "-"))
        value = s.secret_value or ""
        if _documented_example(value) or (value and _is_placeholder(value)):
            continue
        line = lines[s.line_number - 1]
        base = offsets[s.line_number - 1]
        places = _occurrences(line, value) or [(0, len(line))]  # not found as such: the whole line
        for pos, stop in places:
            out.setdefault((base + pos, base + stop), kind)
    spans = sorted(out.items())
    return [_finding(text, a, b, kind, spans) for (a, b), kind in spans]


def _occurrences(line: str, value: str) -> list[tuple[int, int]]:
    if not value:
        return []
    out, pos = [], line.find(value)
    while pos != -1:
        out.append((pos, pos + len(value)))
        pos = line.find(value, pos + len(value))
    return out


_DS_SETTINGS = []


_DS_PATTERNS: list = []


def _ds_specific_patterns() -> list | None:
    """The regular expressions of every vendor-specific plugin (`_DS_SPECIFIC`), or None when one
    of them is not a plain pattern-list detector (then no line may be skipped)."""
    if not _DS_PATTERNS:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.plugins.base import RegexBasedDetector

        mapping = get_mapping_from_secret_type_to_class()
        patterns: list | None = []
        for secret_type in _DS_SPECIFIC:
            cls = mapping.get(secret_type)
            if (
                cls is None
                or not issubclass(cls, RegexBasedDetector)
                or "analyze_line" in vars(cls)
            ):
                patterns = None
                break
            patterns += list(cls.denylist)
        _DS_PATTERNS.append(patterns)
    return _DS_PATTERNS[0]


def _ds_configure() -> None:
    """detect-secrets keeps its settings in a process global; set its defaults once, not per text."""
    if not _DS_SETTINGS:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
        from detect_secrets.settings import cache_bust, configure_settings_from_baseline

        # What its `default_settings()` sets up, made permanent instead of per call.
        plugins = [{"name": t.__name__} for t in get_mapping_from_secret_type_to_class().values()]
        cache_bust()
        _DS_SETTINGS.append(configure_settings_from_baseline({"plugins_used": plugins}))


def warm() -> None:
    """Load detect-secrets and its settings now (~0.1 s, otherwise at the first text that needs
    it): a big write's naming does it before it forks, so that the child does not load it again."""
    from detect_secrets.core import scan as _ds_scan  # noqa: F401

    _ds_configure()
    _ds_specific_patterns()


def _documented_example(value: str) -> bool:
    """AWS's documented example keys (and anything labelled EXAMPLE) are allowed on purpose."""
    return "EXAMPLE" in value.upper()


def scan(text: str) -> list[Finding]:
    """The adopted detector: the hand-written rules, plus detect-secrets' vendor-specific plugins
    where the rules found nothing (docs/reliability.md has the measurements).

    Each finding's excerpt masks every secret found on its line, not only its own. A text that
    holds no anchor word, private-key header or long token is told in one C pass (_quiet.c)
    where that module is built: nothing here could flag it."""
    if quiet(text):
        return []
    found = scan_rules(text)
    if _has_long_token(text):  # every vendor shape has one; prose without one skips the slow part
        ours = len(found)
        for f in scan_detect_secrets(text, specific_only=True):
            if f.kind != "private-key" and not any(
                g.start < f.end and f.start < g.end for g in found
            ):
                found.append(f)  # the rules' key check needs the key body; a place is reported once
        if ours < len(found):  # the excerpts of each side mask the other side's secrets too
            every = sorted(((f.start, f.end), f.kind) for f in found)
            found = [_finding(text, f.start, f.end, f.kind, every) for f in found]
    return sorted(found, key=lambda f: (f.start, f.line))


_LONG_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.:-"
# The test for a long token, held by tests/test_secrets_speed.py against `_has_long_token`, which
# answers the same without searching (the search retries at every position of the text: ~13
# against ~2 us a 1,000-character text): the characters are ASCII, so in the text's UTF-8 bytes
# mapped to 1 for them and 0 for every other byte (a non-ASCII character's bytes are all >= 0x80),
# a match is a run of twenty 1s.
_LONG_TOKEN = re.compile("[" + re.escape(_LONG_TOKEN_CHARS) + "]{20,}")
_LONG_TOKEN_BYTES = bytes(int(chr(b) in _LONG_TOKEN_CHARS) for b in range(256))
_LONG_TOKEN_RUN = b"\x01" * 20


def _has_long_token(text: str) -> bool:
    """Whether `_LONG_TOKEN` matches somewhere in the text."""
    return _LONG_TOKEN_RUN in text.encode("utf-8", "surrogatepass").translate(_LONG_TOKEN_BYTES)


try:  # (optional: built by `make install`; without it every text goes through the rules)
    from . import _quiet
except ImportError:  # pragma: no cover - a build without a C compiler
    _quiet = None
else:
    _quiet.configure(tuple(_ANCHORS), _LONG_TOKEN_CHARS, len(_LONG_TOKEN_RUN))


def quiet(text: str) -> bool:
    """Whether the one C pass tells that nothing in the detector could flag the text (False
    where that module is not built, or the text holds an anchor, a header or a long token)."""
    return _quiet is not None and _quiet.quiet(text)


_REDACT_PASSES = 8


def redact(text: str, findings: list[Finding] | None = None) -> tuple[str, list[str]]:
    """The text with every detected secret replaced by `[REDACTED <kind>]`, and the kinds replaced.

    The result is scanned again until the detector finds nothing in it (a second copy of a token that
    only showed once the first was gone, a secret that overlapped another); a line still flagged
    after several passes is replaced whole."""
    kinds: list[str] = []
    for _ in range(_REDACT_PASSES):
        findings = scan(text) if findings is None else findings
        if not findings:
            return text, kinds
        text, more = _replace(text, findings)
        kinds += more
        findings = None
    lines = text.split("\n")
    for f in scan(text):
        if 0 < f.line <= len(lines):
            lines[f.line - 1] = f"[REDACTED {f.kind}]"
            kinds.append(f.kind)
    return "\n".join(lines), kinds


def _replace(text: str, findings: list[Finding]) -> tuple[str, list[str]]:
    spans = sorted((f.start, f.end, f.kind) for f in findings if 0 <= f.start < f.end)
    out, pos, kinds = [], 0, []
    for start, end, kind in spans:
        if start < pos:
            continue
        out += [text[pos:start], f"[REDACTED {kind}]"]
        kinds.append(kind)
        pos = end
    out.append(text[pos:])
    return "".join(out), kinds
