"""Bearer tokens for `ct serve --tokens FILE` and `ct mcp --http ... --tokens FILE`.

A tokens file holds one token a line, `TOKEN read|write` or `sha256:HEX read|write` (the hash of
the token, as `ct tokens new` writes it, so the file never holds a usable token); `#` comments and
blank lines are allowed. A read token may call everything that does not write; a write token may
also add, mark and forget. The file must live outside the store's git work tree (a commit would
publish it) and be readable by its owner only.

Checking a presented token hashes it and compares the hash with every line's with
`hmac.compare_digest`, all lines every time, so neither the answer's timing nor its order tells a
caller how close a guess came or which line matched.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError

LEVELS = ("read", "write")
MIN_LENGTH = 16  # characters of a plain token: shorter ones are guessable
MAX_LENGTH = 512  # characters of a token a caller presents (longer: refused before hashing)
_HEX = re.compile(r"sha256:([0-9a-f]{64})")
_PLAIN = re.compile(r"[A-Za-z0-9._~+/=-]+")  # what RFC 6750 allows in a bearer token


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


@dataclass(frozen=True)
class Grant:
    """One line of a tokens file: the token's hash, what it may do, where it was written."""

    digest: bytes
    level: str  # "read" or "write"
    line: int

    @property
    def writes(self) -> bool:
        return self.level == "write"

    @property
    def name(self) -> str:
        """How logs and rate limits name this token: its line, never the token."""
        return f"token of line {self.line}"


@dataclass(frozen=True)
class Tokens:
    """The grants of one tokens file."""

    path: Path
    grants: tuple[Grant, ...]

    def find(self, presented: str) -> Grant | None:
        """The grant of the token `presented`, or None; every line is compared, in constant time."""
        if not presented or len(presented) > MAX_LENGTH:
            return None
        h = digest(presented)
        found = None
        for g in self.grants:
            if hmac.compare_digest(h, g.digest) and found is None:
                found = g
        return found


def parse(text: str, path: Path) -> tuple[Grant, ...]:
    """The grants in `text`; UsageError naming the file and line of the first bad one."""
    grants = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        where = f"{path}, line {n}"
        if len(parts) != 2:
            raise UsageError(
                f"{where}: expected 'TOKEN read' or 'TOKEN write' (or 'sha256:HEX read|write'), "
                f"got {len(parts)} field{'s' if len(parts) != 1 else ''}",
                "Fix the line, or make a new token with: ct tokens new --file FILE",
            )
        token, level = parts
        if level not in LEVELS:
            raise UsageError(
                f"{where}: the level must be 'read' or 'write', not {level[:40]!r}",
            )
        if token.lower().startswith("sha256:"):
            m = _HEX.fullmatch(token.lower())
            if m is None:
                raise UsageError(
                    f"{where}: a hashed token is 'sha256:' and 64 hex digits "
                    f"(got {len(token) - 7} characters after 'sha256:')"
                )
            grants.append(Grant(bytes.fromhex(m.group(1)), level, n))
            continue
        if len(token) < MIN_LENGTH:
            raise UsageError(
                f"{where}: a token of {len(token)} characters is too easy to guess; use at least "
                f"{MIN_LENGTH}",
                "Make one with: ct tokens new --file FILE",
            )
        if len(token) > MAX_LENGTH or not _PLAIN.fullmatch(token):
            raise UsageError(
                f"{where}: a token is letters, digits and - . _ ~ + / = only, at most "
                f"{MAX_LENGTH} characters"
            )
        grants.append(Grant(digest(token), level, n))
    return tuple(grants)


def refuse_unsafe_place(path: Path, store_root: Path | None) -> None:
    """UsageError when the file at `path` is inside the store's work tree (the next commit of a
    whole-tree tool, or a push, would publish it) or may be read by other users."""
    real = path.resolve()
    if store_root is not None:
        root = Path(store_root).resolve()
        if real == root or root in real.parents:
            raise UsageError(
                f"the tokens file {path} is inside the store's git work tree ({root}): anyone "
                "with a clone could read it, and one commit would publish it",
                "Keep it outside the store, e.g. ~/.config/memstore/tokens (ct tokens new does).",
            )
    if os.name != "posix":
        return
    mode = real.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(
            f"the tokens file {path} may be read or changed by other users (mode "
            f"{stat.filemode(mode)}); it holds what lets a caller read and write memory",
            f"Make it yours alone: chmod 600 {path}",
        )


def load(path: str | Path, store_root: Path | None = None) -> Tokens:
    """The tokens of the file at `path`, checked: where it is, who may read it, every line."""
    path = Path(path).expanduser()
    try:
        if not path.is_file():
            raise UsageError(
                f"no tokens file {path}" + (" (it is a folder)" if path.is_dir() else ""),
                "Make one with: ct tokens new --file " + str(path),
            )
        refuse_unsafe_place(path, store_root)
        raw = path.read_bytes()
    except PermissionError as exc:
        raise UsageError(f"cannot read the tokens file {path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"the tokens file {path} is not UTF-8 text (byte {exc.start})") from None
    grants = parse(text, path)
    if not grants:
        raise UsageError(
            f"the tokens file {path} holds no token, so no caller could be let in",
            "Add one with: ct tokens new --file " + str(path),
        )
    return Tokens(path, grants)


def default_file() -> Path:
    """${XDG_CONFIG_HOME:-~/.config}/memstore/tokens."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "memstore" / "tokens"


def new(path: str | Path, level: str, store_root: Path | None = None, note: str = "") -> str:
    """A fresh token for `level`, its hash appended to the file at `path` (made, mode 600, if
    missing); the token itself is returned and never written. The file is checked as `load`
    checks it first, so a bad file is refused and left as it was."""
    if level not in LEVELS:
        raise UsageError(f"the level must be 'read' or 'write', not {level!r}")
    path = Path(path).expanduser()
    line = ""
    if path.exists():
        load(path, store_root)  # refuses an unsafe or malformed file before touching it
        if not path.read_bytes().endswith(b"\n"):
            line = "\n"  # the last line stays a line of its own
    else:
        real = path.parent.resolve() / path.name
        if store_root is not None and Path(store_root).resolve() in real.parents:
            raise UsageError(
                f"the tokens file {path} would be inside the store's git work tree "
                f"({Path(store_root).resolve()}): one commit would publish it",
                "Keep it outside the store, e.g. " + str(default_file()),
            )
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = "mst_" + secrets.token_urlsafe(32)
    if note:
        line += f"# {note}\n"
    line += f"sha256:{digest(token).hex()} {level}\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(line)
    return token
