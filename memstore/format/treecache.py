"""The tree's replay cache: the topic tree replayed from its op shards, kept as JSON in the store's
disposable folder (`layout.meta_dir_for`: `.memstore/`, or this user's cache for a store it cannot
write) and keyed by the shards' stat fingerprint, so a read replays the op log only after it
changed. Disposable like the index: a missing, damaged or planted file is rebuilt, never trusted
(it is parsed as plain JSON and checked shape by shape; nothing in it can run code).

A write does not rewrite the whole cache: it appends its op lines to a tail file (one JSON line per
write: the snapshot it continues, the fingerprints before and after, the ops), and a reader applies
the tail to the snapshot. The snapshot is written again only when the tail passes TAIL_BYTES, so a
write's cache cost does not grow with the tree."""

from __future__ import annotations

import json
import os
import secrets as _random
from dataclasses import dataclass
from pathlib import Path

from . import treelog
from .layout import meta_dir_for
from .topics import Topic, Tree

CACHE = "tree-cache.json"  # the replayed tree, keyed by the shards' stat fingerprint
OLD_CACHE = (
    "tree-cache.pickle"  # what memstore once kept there: never read, removed on the next save
)
CACHE_VERSION = 4
TAIL = "tree-cache.tail.jsonl"  # the writes since the snapshot: their ops, applied on reading
TAIL_BYTES = 256 * 1024  # past this the next write folds the tail into a new snapshot


@dataclass
class Loaded:
    """A replayed tree and what a writer needs to extend its cache: the newest op time, the damaged
    lines skipped, the shards' fingerprint it was read at and the snapshot's generation (None when
    there is no cache to extend)."""

    tree: Tree
    last_at: str
    problems: list[str]
    fp: list
    gen: str | None


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


def _tail(meta: Path, gen: str, snap_fp: list, fp: list) -> list[dict] | None:
    """The tail's entries for snapshot `gen` when they chain from the snapshot's fingerprint to
    `fp` (each entry's `base` the fingerprint before it); None when they do not (rebuild)."""
    try:
        raw = (meta / TAIL).read_bytes()
    except FileNotFoundError:
        raw = b""
    except OSError:
        return None
    cur, out = snap_fp, []
    for text in raw.split(b"\n"):
        if not text.strip():
            continue
        try:
            entry = json.loads(text)
        except (ValueError, RecursionError):
            return None  # a torn or damaged line: the snapshot and tail are rebuilt
        if not isinstance(entry, dict) or entry.get("gen") != gen:
            continue  # a line for an older snapshot (a rebuild raced a write): not ours
        if entry.get("base") != cur or not isinstance(entry.get("last_at"), str):
            return None
        cur = entry.get("fp")
        out.append(entry)
    return out if cur == fp else None


def _apply_states(tree: Tree, entry: dict) -> bool:
    """Apply one tail entry that gives the new state of each topic a write changed (None: the
    topic left the tree), the current topic, the archive when it changed and new tombstones.
    False when any part has the wrong shape."""
    topics, gone = entry.get("topics"), entry.get("gone")
    current, archived = entry.get("current"), entry.get("archived")
    if not isinstance(topics, dict) or not isinstance(gone, dict):
        return False
    if current is not None and not isinstance(current, str):
        return False
    if archived is not None and not _str_list(archived):
        return False
    fresh = _unpack(
        {
            "topics": {k: v for k, v in topics.items() if v is not None},
            "current": None,
            "archived": [],
            "gone": gone,
        }
    )
    if fresh is None:
        return False
    for tid, f in topics.items():
        if f is None:
            tree.topics.pop(tid, None)
    tree.topics.update(fresh.topics)
    tree.gone.update(fresh.gone)
    tree.current = current
    if archived is not None:
        tree.archived = list(archived)
    return True


def _cached(meta: Path, fp: list) -> Loaded | None:
    """The cache's tree (snapshot and tail) when it is ours, whole and for these shards."""
    try:
        data = json.loads((meta / CACHE).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None  # missing, damaged or not JSON: rebuilt by the caller
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
        return None
    last_at, problems, gen = data.get("last_at"), data.get("problems"), data.get("gen")
    if not isinstance(gen, str) or not isinstance(last_at, str) or not _str_list(problems):
        return None
    tail = _tail(meta, gen, data.get("fp"), fp)
    if tail is None:
        return None
    tree = _unpack(data.get("tree"))
    if tree is None:
        return None
    for entry in tail:
        if "topics" in entry:  # the states of the topics a write changed: O(what it changed)
            if not _apply_states(tree, entry):
                return None
        else:  # op lines (a write that gave no states): applied through a replay
            lines = entry.get("ops")
            if not _str_list(lines):
                return None
            try:
                ops = [treelog.parse_line(t) for t in lines]
            except treelog.OpError:
                return None
            tree = treelog.Replay.of(tree).apply_all(ops).result()
        last_at = max(last_at, entry["last_at"])
    return Loaded(tree, last_at, problems, fp, gen)


def replayed(root: Path) -> tuple[Tree, str, list[str]]:
    """(tree, newest op time, damaged-line problems), from the cache when the shards are unchanged."""
    got = load(root)
    return got.tree, got.last_at, got.problems


def load(root: Path) -> Loaded:
    """The replayed tree with what a writer needs to extend the cache (see `extend`)."""
    meta = meta_dir_for(root)
    fp = _fingerprint(root)
    hit = _cached(meta, fp) if meta.is_dir() else None
    if hit is not None:
        return hit
    ops, problems = treelog.read_ops(root)
    tree = treelog.replay(ops)
    last_at = ops[-1].at if ops else ""
    gen = save(root, tree, last_at, problems, fp)
    return Loaded(tree, last_at, problems, fp, gen)


def extend(
    root: Path, base: Loaded, lines: list[str], last_at: str, folded, states: dict | None = None
) -> None:
    """After a writer appended op `lines` to a shard of the tree it read as `base`: add them to the
    cache's tail (one line), or, when the tail has grown past TAIL_BYTES (or there is no snapshot to
    continue), save the tree `folded()` gives as a new snapshot. The lines sort after every op
    `base` holds, so the tail applied to the snapshot is exactly what a full replay gives.
    `states` (from `changed_states`) is written instead of the lines when given: a reader then
    replaces those topics instead of replaying the lines over every record of the tree."""
    meta = meta_dir_for(root)
    if not meta.is_dir():
        return
    body = states if states is not None else {"ops": lines}
    entry = json.dumps(
        {"gen": base.gen, "base": base.fp, "fp": _fingerprint(root), "last_at": last_at, **body},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    try:
        size = (meta / TAIL).stat().st_size
    except OSError:
        size = 0
    if base.gen is None or size + len(entry) > TAIL_BYTES:
        save(root, folded(), last_at, base.problems)
        return
    try:
        with open(meta / TAIL, "ab") as f:
            f.write(entry + b"\n")
    except OSError:
        (meta / TAIL).unlink(missing_ok=True)  # a reader then rebuilds from the shards


def changed_states(old: Tree, new: Tree, touched: list[str] | None = None) -> dict:
    """What a tail entry holds for a write that turned `old` into `new`: the packed state of every
    topic that is new or differs (None for one that left), the current topic, the archive when it
    changed, and the tombstones `new` added."""
    topics: dict = {}
    if touched is None:
        touched = treelog.changed_topics(old, new)
    fresh = [tid for tid in new.topics if tid not in old.topics]
    for tid in touched + fresh:
        t = new.topics[tid]
        topics[tid] = [t.name, t.summary, t.parent, t.records, t.created, t.last_active, t.named_by]
    for tid in old.topics:
        if tid not in new.topics:
            topics[tid] = None
    return {
        "topics": topics,
        "current": new.current,
        "archived": None if new.archived == old.archived else new.archived,
        "gone": {k: v for k, v in new.gone.items() if old.gone.get(k) != v},
    }


def save(
    root: Path, tree: Tree, last_at: str, problems: list[str] | None = None, fp=None
) -> str | None:
    """Write the snapshot (a new generation, so no older tail line applies to it) and drop the
    tail; its generation, or None when it could not be written."""
    meta = meta_dir_for(root)
    if not meta.is_dir():
        return None
    gen = _random.token_hex(8)
    data = {
        "version": CACHE_VERSION,
        "gen": gen,
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
        (meta / TAIL).unlink(missing_ok=True)
        (meta / OLD_CACHE).unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)
        return None
    return gen
