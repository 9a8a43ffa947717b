"""Portable document locations: how an ingested file is named in committed data, and how moves are found.

No absolute machine path is ever committed. A document's location (`source.path`) is
`<base>/<rel>`: `rel` is its path relative to the folder that was ingested (for a single file,
its name), and `base` is that folder's path relative to the store when it lies inside the store,
else the folder's own name ("docs"). Two different folders of the same name on one machine are
told apart by prefixing parent names ("b/docs"); which local folder a base was last used for is
remembered in the disposable `.memstore/ingest-bases.json` (losing it only drops that hint).

A document's identity is its content and its `rel`: a file whose location is new to the store
but whose bytes and relative path match a live document elsewhere is that document, moved. It adds
no chunks; one `meta` record notes the move (`source.moved_from`), and later versions of the file
at its new location supersede the chunks made at the old one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..index import queries

BASES_FILE = "ingest-bases.json"


def folder_of(root: Path) -> Path:
    """The folder an ingest is relative to: the root itself, or a single file's parent."""
    real = Path(os.path.realpath(root))
    return real if real.is_dir() else real.parent


def base_label(store, root: Path) -> str:
    """The committed name of the ingested folder `root` (see the module docstring).

    FormatError when that name is not UTF-8 (it is committed as text, verbatim or not at all)."""
    label = _base_label(store, root)
    try:
        label.encode("utf-8")
    except UnicodeEncodeError:
        from ..errors import FormatError
        from .importers import printable

        shown = printable(folder_of(root))
        raise FormatError(
            shown, "the folder's name is not valid UTF-8; rename it", hint="Nothing was ingested."
        ) from None
    return label


def _base_label(store, root: Path) -> str:
    folder = folder_of(root)
    try:
        return folder.relative_to(store.root).as_posix().strip(".")
    except ValueError:
        pass
    bases_path = store.meta_dir / BASES_FILE
    bases = _bases(store)
    parts = [p for p in folder.parts if p not in ("/", "")]
    label = ""
    for depth in range(1, len(parts) + 1):
        label = "/".join(parts[-depth:])
        owner = bases.get(label)
        # A label stays with its folder while that folder exists; a vanished one was moved or renamed.
        if owner in (None, str(folder)) or not os.path.isdir(owner):
            break
    bases[label] = str(folder)
    try:
        store.meta_dir.mkdir(exist_ok=True)
        tmp = bases_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(bases, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, bases_path)
    except OSError:
        pass  # only a hint for telling same-named folders apart
    return label


def _bases(store) -> dict:
    """Which local folder each base label was last used for (the disposable hint file)."""
    try:
        bases = json.loads((store.meta_dir / BASES_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return {}
    return bases if isinstance(bases, dict) else {}


def still_there(store, old: str, rel: str, sha256: str) -> bool:
    """Does the document at location `old` still lie on this machine with these bytes? Then a file
    of the same bytes and `rel` found elsewhere is a copy of it, not the document moved."""
    import hashlib

    if not old.endswith("/" + rel):
        return False  # a single file ingested on its own: no folder to look in
    base = old[: -len(rel) - 1]
    folders = [Path(store.root) / base, _bases(store).get(base)]
    for folder in folders:
        if not isinstance(folder, (str, Path)):
            continue
        path = Path(folder) / rel
        try:
            if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == sha256:
                return True
        except OSError:
            continue
    return False


def location(base: str, rel: str) -> str:
    return f"{base}/{rel}" if base else rel


def live_rows(index, key: str) -> list[tuple[str, str, int]]:
    """(id, fsha, rowid) of the live records at location `key`, following recorded moves back."""
    out, seen, todo = [], set(), [key]
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        for rid, fsha, rowid, rtype in queries.live_rows_at(index, k):
            out.append((rid, fsha, rowid))
            if rtype == "meta":
                src = index.record_at(rowid).get("source") or {}
                if isinstance(src, dict) and src.get("moved_from"):
                    todo.append(str(src["moved_from"]))
    return out


def moved_from(index, sha256: str, rel: str, key: str) -> str | None:
    """The location of a live document with the same bytes and relative path, or None."""
    for rowid, src_path in queries.live_rows_with_content(index, sha256, key):
        src = index.record_at(rowid).get("source") or {}
        if isinstance(src, dict) and src.get("rel") == rel and src_path:
            return str(src_path)
    return None


def current_location(index, source: dict) -> str | None:
    """Where a document was last seen, when a later ingest recorded it moved; None when it has not moved."""
    sha, path = source.get("file_sha256"), source.get("path")
    if not sha or not path:
        return None
    newest, seen = None, {path}
    frontier = path
    for _ in range(32):  # a chain of moves; bounded against a cycle of renames back and forth
        nxt = None
        for rowid in queries.move_notes(index, sha):
            src = index.record_at(rowid).get("source") or {}
            if (
                isinstance(src, dict)
                and src.get("moved_from") == frontier
                and src.get("path") not in seen
            ):
                nxt = str(src["path"])
        if nxt is None:
            break
        seen.add(nxt)
        newest = frontier = nxt
    return newest
