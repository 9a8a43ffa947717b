"""Git conflict markers a merge left in memstore's line files, removed in one commit.

Day logs, tree shards, markers.jsonl and forgotten.jsonl merge by git's union driver
(.gitattributes), so a memstore merge never leaves markers in them; a person's merge with another
driver, or a conflict resolved by hand and committed as it stood, can. A line such as
`<<<<<<< HEAD` is no record: every reader skips it, fsck names it and the push guard refuses it
(memstore/upkeep/guard.py) with advice to run `ct sync` or `ct fsck --repair`, which call this.

The lines between the markers are both sides' lines: removing the marker lines alone gives what
the union driver would have given. The base section of a diff3-style conflict (from `|||||||` to
`=======`) holds the common ancestor's lines, which both sides hold too in an append-only file:
it goes with its markers. The other lines stay byte for byte (sealed lines of an encrypted store
included: nothing is opened or sealed again).
"""

from __future__ import annotations

import os
import re

from .. import storefile

# What git writes: `<<<<<<< ours`, `||||||| base`, `=======`, `>>>>>>> theirs` (7 characters,
# then a space and a label, or `=======` alone).
MARKER = re.compile(rb"^(?:<<<<<<<|>>>>>>>|\|\|\|\|\|\|\|)(?: |$)|^=======$", re.M)
_GREP = r"^(<<<<<<<|>>>>>>>|[|]{7})( |$)|^=======$"
# The line files a union merge joins (packs are binary and merged by name, never by lines).
LINE_FILES = ("log", "tree", "markers.jsonl", "forgotten.jsonl", "purged-history.jsonl")


def without_markers(data: bytes) -> bytes:
    """`data` with git's conflict marker lines (and a diff3 base section) removed."""
    out, in_base = [], False
    for line in data.splitlines(keepends=True):
        if MARKER.match(line.rstrip(b"\r\n")):
            in_base = line.startswith(b"|||||||")
            continue
        if not in_base:
            out.append(line)
    return b"".join(out)


def marked(store, paths: list[str] | None = None) -> list[str]:
    """The tracked line files (all of them, or those of `paths`) whose committed work-tree copy
    holds a conflict marker line: one `git grep`, however big the store."""
    from ..errors import GitError

    where = [p for p in paths if p.startswith(LINE_FILES)] if paths is not None else LINE_FILES
    if not where:
        return []
    try:
        out = store.git.run("grep", "-l", "-I", "-E", "-e", _GREP, "--", *where)
    except GitError:  # git grep exits 1 when nothing matches
        return []
    return [p for p in out.split("\n") if p]


def remove(store, paths: list[str] | None = None) -> tuple[str | None, list[str]]:
    """Remove the conflict markers from the line files (see `marked`) in one commit → (commit or
    None, the files changed)."""
    found = marked(store, paths)
    if not found:
        return None, []
    n = len(found)
    with store.transaction(
        f"Remove the git conflict markers a merge left in {n} file{'s' if n != 1 else ''}"
    ) as tx:
        for rel in found:
            path = store.root / rel
            data = storefile.read_bytes(path, store.root)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            fd = storefile.open_fd(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, root=store.root)
            with os.fdopen(fd, "wb") as f:
                f.write(without_markers(data))
            os.replace(tmp, path)
        tx.stage(found)
    return tx.commit, found
