"""The push guard: what a push must never carry to a remote, checked on the pushed tip's files.

Four things, and nothing else, are refused: a commit of the history `ct forget --purge-history`
rewrote (purged-history.jsonl, at the pushed tip or at the ref's current value, names them), which
holds forgotten text; a line of a record or marker that `forgotten.jsonl`
(at that tip) names as forgotten, brought back by a plain git merge with a clone that still had
it; a conflict marker committed into one of memstore's files; a file memstore cannot read (a day
log line, tree op or marker that is not valid, a pack that does not parse or whose bytes do not
hash to its name, a memstore.toml that is not TOML). Only files the push changes are read.

It runs in two places: the `pre-push` hook of a clone (`ct hooks install`), and the `pre-receive`
hook of a shared bare remote (`ct -C REMOTE.git hooks install`), where the new objects are still in
git's quarantine; both read through `gitrepo.RevReader`, so neither needs a work tree.
"""

from __future__ import annotations

import tomllib
from pathlib import PurePosixPath

from ..format import layout
from ..format import log as logfmt
from ..format import safejson
from ..format import tombstones
from ..format import sealed_lines
from ..format import treelog
from ..format.markers import FILENAME as MARKERS
from ..format.pack import PackError, pack_name, parse
from ..forget.purge import PURGED

ZERO = "0" * 40
CONFLICT = (b"<<<<<<< ", b">>>>>>> ", b"=======\n", b"||||||| ")
HOW = 'run "ct sync" (or "ct fsck --repair") in the clone, then push again'


def check_tip(reader, old: str | None, new: str) -> list[str]:
    """Problems of the commit `new` in the files it changed since `old` (None or zeros: all files)."""
    base = None if not old or old == ZERO else old
    problems = _purged_back(reader, base, new)
    changed = reader.changed_paths(base, new)
    problems += [
        f"{path}: in memstore's disposable folder, which is never committed (a clone that merges "
        "it gets it written over its own index or pending sync)"
        for path in changed
        if path.startswith(".memstore/")
    ]
    ours = [p for p in changed if _kind(p)]
    if not ours:
        return problems
    gone = tombstones.ids_in(reader.blob(new, tombstones.FILENAME) or b"")
    for path, data in zip(ours, reader.blobs(new, ours)):
        if data is not None:  # None: the push deletes it
            problems += _check_file(path, data, gone)
    return problems


def _purged_back(reader, old: str | None, new: str) -> list[str]:
    """The purged commits (as the pushed tip or the ref's current value records them) that `new` holds."""
    listed: set[str] = set()
    for rev in filter(None, (old, new)):
        for line in (reader.blob(rev, PURGED) or b"").splitlines():
            try:
                entry = safejson.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                listed |= {
                    c
                    for c in [*(entry.get("commits") or []), *(entry.get("tips") or [])]
                    if isinstance(c, str)
                }
    return [
        f"commit {c[:10]} of the history ct forget --purge-history rewrote ({PURGED}) is in this push: it holds "
        'forgotten text. Run "ct sync --drop-purged" in the clone (or re-clone), then push again'
        for c in sorted(listed)
        if reader.is_ancestor(c, new)
    ]


def _kind(path: str) -> str | None:
    p = PurePosixPath(path)
    if p.parts[:1] == (layout.LOG,) and p.suffix == ".jsonl":
        return "log"
    if p.parts[:1] == ("tree",) and p.suffix == ".jsonl":
        return "tree"
    if path == MARKERS:
        return "markers"
    if path == tombstones.FILENAME:
        return "tombstones"
    if p.parts[:1] == (layout.PACKS,) and p.suffix == ".is":
        return "pack"
    if path == "memstore.toml":
        return "config"
    return None


def _check_file(path: str, data: bytes, gone: set[str]) -> list[str]:
    kind = _kind(path)
    if kind == "pack":
        return _check_pack(path, data)
    for no, line in enumerate(data.splitlines(keepends=True), 1):
        if line.startswith(CONFLICT) or line.rstrip(b"\n") == b"=======":
            return [
                f"{path}:{no}: a git conflict marker was committed ({line[:7].decode()}…); {HOW}"
            ]
    if kind == "config":
        try:
            tomllib.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # nested too deep, ...
            why = "nested too deep" if isinstance(exc, RecursionError) else exc
            return [f"{path}: not TOML memstore can read ({why})"]
        return []
    if data.startswith((sealed_lines.PREFIX, sealed_lines.PRIVATE_PREFIX)):
        return _check_sealed(path, data)
    if kind == "log":
        return _check_log(path, data, gone)
    return _check_lines(path, data, gone if kind == "markers" else set(), kind == "tree")


def _check_sealed(path: str, data: bytes) -> list[str]:
    """An encrypted store's file: only its form can be checked here (no key opens it): every line
    whole and sealed (docs/format.md, "Encrypted stores")."""
    for no, raw in enumerate(data.split(b"\n"), 1):
        if raw and not sealed_lines.is_sealed_line(raw):
            return [f"{path}:{no}: a plain or damaged line in an encrypted store's file; {HOW}"]
    if not data.endswith(b"\n"):
        return [f"{path}: last line has no newline (an unfinished write); {HOW}"]
    return []


def _check_log(path: str, data: bytes, gone: set[str]) -> list[str]:
    out = []
    for ln in logfmt.read_lines(PurePosixPath(path), data=data):
        if ln.record is None:
            out.append(f"{path}:{ln.line_no}: not a record memstore can read ({ln.error})")
        elif ln.record.get("id") in gone:
            out.append(
                f"{path}:{ln.line_no}: record {ln.record['id']} was forgotten (forgotten.jsonl); {_BACK}"
            )
    return out


_BACK = f"this push brings its text back (a git merge with a clone that still had it); {HOW}"


def _check_lines(path: str, data: bytes, gone: set[str], tree: bool) -> list[str]:
    out = []
    for no, raw in enumerate(data.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
            if tree:
                treelog.parse_line(text)
                continue
            obj = safejson.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:  # OpError is a ValueError
            out.append(f"{path}:{no}: not a line memstore can read ({exc})")
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            out.append(f"{path}:{no}: not a JSON object with an id")
        elif obj["id"] in gone:
            out.append(f"{path}:{no}: marker {obj['id']} was forgotten (forgotten.jsonl); {_BACK}")
    return out


def _check_pack(path: str, data: bytes) -> list[str]:
    name = PurePosixPath(path).name
    if pack_name(data) != name:
        return [f"{path}: its bytes do not hash to its name (a damaged or edited pack)"]
    try:
        parse(data, path)
    except PackError as exc:
        return [f"{exc}"]
    return []


def pre_receive(reader, lines) -> list[str]:
    """The bare remote's check of every pushed branch tip: `old new ref` per line on stdin."""
    problems = []
    for line in lines:
        parts = line.split()
        if len(parts) != 3 or parts[1] == ZERO or not parts[2].startswith("refs/heads/"):
            continue  # a deleted branch, a tag: not memory
        problems += [f"{parts[2]}: {p}" for p in check_tip(reader, parts[0], parts[1])]
    return problems


def pre_push(reader, lines) -> list[str]:
    """The clone's check: `local-ref local-oid remote-ref remote-oid` per line on stdin."""
    problems = []
    for line in lines:
        parts = line.split()
        if len(parts) != 4 or parts[1] == ZERO:
            continue
        old = parts[3] if parts[3] != ZERO and reader.has_commit(parts[3]) else None
        problems += [f"{parts[2]}: {p}" for p in check_tip(reader, old, parts[1])]
    return problems
