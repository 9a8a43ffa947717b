"""The tree's replay cache: the topic tree replayed from its op shards, kept as JSON in the store's
disposable folder (`layout.meta_dir_for`: `.memstore/`, or this user's cache for a store it cannot
write) and keyed by the shards' stat fingerprint, so a read replays the op log only after it
changed. Disposable like the index: a missing, damaged or planted file is rebuilt, never trusted
(it is parsed as plain JSON and checked shape by shape; nothing in it can run code)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import treelog
from .layout import meta_dir_for
from .topics import Topic, Tree

CACHE = "tree-cache.json"  # the replayed tree, keyed by the shards' stat fingerprint
OLD_CACHE = (
    "tree-cache.pickle"  # what memstore once kept there: never read, removed on the next save
)
CACHE_VERSION = 3


def _fingerprint(root: Path) -> list:
    out = []
    for p in treelog.shards(root):
        st = p.stat()
        out.append([p.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns, st.st_ino])
    return out


def _pack(tree: Tree) -> dict:
    """Plain lists and dicts: JSON reads them back several times faster than the dataclasses."""
    return {
        "topics": {
            tid: [t.name, t.summary, t.parent, t.records, t.created, t.last_active, t.named_by]
            for tid, t in tree.topics.items()
        },
        "current": tree.current,
        "archived": tree.archived,
        "gone": tree.gone,
    }


def _str_list(value) -> bool:
    return isinstance(value, list) and set(map(type, value)) <= {str}


def _unpack(packed) -> Tree | None:
    """The Tree a cache entry holds, or None when any part has the wrong shape (damage or a planted
    file: the cache is data in a folder anyone who copied the store could have written)."""
    if not isinstance(packed, dict):
        return None
    topics, current, archived, gone = (
        packed.get(k) for k in ("topics", "current", "archived", "gone")
    )
    if not isinstance(topics, dict) or not _str_list(archived) or not isinstance(gone, dict):
        return None
    if current is not None and not isinstance(current, str):
        return None
    out = {}
    for tid, f in topics.items():
        if not (isinstance(f, list) and len(f) == 7 and _str_list(f[3])):
            return None
        if not all(isinstance(v, str) for v in (f[0], f[1], f[4], f[5], f[6])) or not isinstance(
            f[2], (str, type(None))
        ):
            return None
        out[tid] = Topic(tid, *f)
    if not all(isinstance(v, dict) for v in gone.values()):
        return None
    return Tree(topics=out, current=current, archived=archived, gone=gone)


def _cached(meta: Path, fp: list) -> tuple[Tree, str, list[str]] | None:
    """The cache's (tree, newest op time, problems) when it is ours, whole and for these shards."""
    try:
        data = json.loads((meta / CACHE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None  # missing, damaged or not JSON: rebuilt by the caller
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("fp") != fp:
        return None
    last_at, problems = data.get("last_at"), data.get("problems")
    tree = _unpack(data.get("tree"))
    if tree is None or not isinstance(last_at, str) or not _str_list(problems):
        return None
    return tree, last_at, problems


def replayed(root: Path) -> tuple[Tree, str, list[str]]:
    """(tree, newest op time, damaged-line problems), from the cache when the shards are unchanged."""
    meta = meta_dir_for(root)
    fp = _fingerprint(root)
    hit = _cached(meta, fp) if meta.is_dir() else None
    if hit is not None:
        return hit
    ops, problems = treelog.read_ops(root)
    tree = treelog.replay(ops)
    last_at = ops[-1].at if ops else ""
    save(root, tree, last_at, problems, fp)
    return tree, last_at, problems


def save(root: Path, tree: Tree, last_at: str, problems: list[str] | None = None, fp=None) -> None:
    meta = meta_dir_for(root)
    if not meta.is_dir():
        return
    data = {
        "version": CACHE_VERSION,
        "fp": fp if fp is not None else _fingerprint(root),
        "tree": _pack(tree),
        "last_at": last_at,
        "problems": problems or [],
    }
    tmp = meta / f".{CACHE}.tmp-{os.getpid()}"
    try:
        tmp.write_text(
            json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )
        os.replace(tmp, meta / CACHE)
        (meta / OLD_CACHE).unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)
