"""The tree's replay cache: the topic tree replayed from its op shards, kept as SQLite rows in the
store's disposable folder (`layout.meta_dir_for`: `.memstore/tree-cache.db`, or this user's cache
for a store it cannot write; the SQL is in treerows.py, a database of its own, not the index) and
keyed by the shards' stat fingerprint, so a read replays the op log only after it changed. Disposable like the index: a
missing, damaged or planted file is rebuilt, never trusted (every value read back is checked for
its type, records are parsed as plain JSON; nothing in it can run code).

A reader of the whole tree (`load`) reads every row. A write reads in part (`load_lazy`: a
LazyTree asks for a topic, a topic's children, a record's topic when it needs them) and then
updates the rows of the topics it changed, in one transaction, so neither the read nor the update
of a one-record write grows with the tree. A row found damaged while a write reads in part raises
`Damaged`: the writer starts again from the whole tree (`load`, which rebuilds the cache)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .treerows import TreeRows, Unusable
from . import treelog
from .layout import meta_dir_for
from .topics import LazyTree, Topic, Tree

CACHE = "tree-cache.db"  # the replayed tree, keyed by the shards' stat fingerprint
CACHE_VERSION = 5
OLD_CACHE = (
    "tree-cache.pickle"  # what memstore once kept there: never read, removed on the next save
)
OLD_FILES = (OLD_CACHE, "tree-cache.json", "tree-cache.tail.jsonl")  # older caches: removed too
SIDE = ("-journal",)  # SQLite's own file beside the cache


class Damaged(Exception):
    """A cache row with the wrong shape, or a cache file SQLite cannot read: rebuild it."""


@dataclass
class Loaded:
    """A replayed tree and what a writer needs to update its cache: the newest op time, the damaged
    lines skipped, the shards' fingerprint it was read at and the cache it was read from (None
    when there is none to update)."""

    tree: Tree
    last_at: str
    problems: list[str]
    fp: list
    rows: TreeRows | None


def _fingerprint(root: Path) -> list:
    out = []
    for p in treelog.shards(root):
        st = p.stat()
        out.append([p.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns, st.st_ino])
    return out


def _fp_text(fp: list) -> str:
    return json.dumps(fp, separators=(",", ":"))


# ----- rows <-> topics, every value checked --------------------------------------------------------


def _row(t: Topic) -> tuple:
    records = json.dumps(t.records, ensure_ascii=False, separators=(",", ":"))
    return (t.id, t.name, t.summary, t.parent, records, t.created, t.last_active, t.named_by)


def _str_list(value) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _topic(row) -> Topic:
    """The Topic a row holds; Damaged when any part has the wrong type (damage or a planted file)."""
    try:
        tid, name, summary, parent, records, created, last_active, named_by = row
        if type(records) is not str:
            raise ValueError
        recs = json.loads(records)
    except (TypeError, ValueError, RecursionError):
        raise Damaged("a topic row is not a topic") from None
    if not (
        type(tid) is str
        and type(name) is str
        and type(summary) is str
        and (parent is None or type(parent) is str)
        and type(created) is str
        and type(last_active) is str
        and type(named_by) is str
        and _str_list(recs)
    ):
        raise Damaged(f"topic row {tid!r} has the wrong shape")
    return Topic(tid, name, summary, parent, recs, created, last_active, named_by)


def _tomb(text) -> dict:
    try:
        value = json.loads(text) if type(text) is str else None
    except (ValueError, RecursionError):
        value = None
    if type(value) is not dict:
        raise Damaged("a tombstone row is not an object")
    return value


class _Source:
    """What a LazyTree reads, from the cache's rows, each checked; Damaged on anything wrong."""

    def __init__(self, rows: TreeRows):
        self.rows = rows
        self._gone: dict | None = None

    def _do(self, fn, *args):
        try:
            return fn(*args)
        except Unusable as exc:
            raise Damaged(str(exc)) from None

    def topic(self, tid: str) -> Topic | None:
        row = self._do(self.rows.topic, tid)
        return _topic(row) if row is not None else None

    def children(self, parent: str | None) -> list[Topic]:
        return [_topic(r) for r in self._do(self.rows.children, parent)]

    def topics(self) -> list[Topic]:
        return [_topic(r) for r in self._do(self.rows.topics)]

    def owners(self, ids: list[str]) -> dict:
        got = self._do(self.rows.owners, ids)
        if not all(type(k) is str and (v is None or type(v) is str) for k, v in got.items()):
            raise Damaged("a placed-record row has the wrong shape")
        return got

    def archived(self) -> list[str]:
        got = self._do(self.rows.archived)
        if not _str_list(got):
            raise Damaged("an archived-record row has the wrong shape")
        return got

    def gone(self, tid: str) -> dict | None:
        text = self._do(self.rows.gone, tid)
        return _tomb(text) if text is not None else None

    def all_gone(self) -> dict:
        if self._gone is None:
            rows = self._do(self.rows.all_gone)
            if not all(type(k) is str for k, _ in rows):
                raise Damaged("a tombstone row has the wrong shape")
            self._gone = {k: _tomb(v) for k, v in rows}
        return self._gone


# ----- opening, reading, rebuilding ------------------------------------------------------------------


def _open(root: Path, fp: list) -> tuple[TreeRows, str, list[str], str | None] | None:
    """The cache with its newest op time, problems and current topic when it is ours and for these
    shards; None when it is missing, damaged, of another version or of other shards."""
    meta = meta_dir_for(root)
    if not meta.is_dir():
        return None
    try:
        rows = TreeRows(meta / CACHE)
        m = rows.meta()
    except Unusable:
        return None
    try:
        problems = json.loads(m["problems"]) if type(m.get("problems")) is str else None
    except (ValueError, RecursionError):
        problems = None
    last_at, current = m.get("last_at"), m.get("current")
    if (
        m.get("version") != CACHE_VERSION
        or m.get("fp") != _fp_text(fp)
        or type(last_at) is not str
        or not _str_list(problems)
        or not (current is None or type(current) is str)
    ):
        rows.close()
        return None
    try:
        if current is not None and rows.topic(current) is None:  # a replayed tree's never dangles
            rows.close()
            return None
    except Unusable:
        rows.close()
        return None
    return rows, last_at, problems, current


def _whole(rows: TreeRows, current: str | None) -> Tree:
    src = _Source(rows)
    topics = {t.id: t for t in src.topics()}
    return Tree(topics=topics, current=current, archived=src.archived(), gone=src.all_gone())


def replayed(root: Path) -> tuple[Tree, str, list[str]]:
    """(tree, newest op time, damaged-line problems), from the cache when the shards are unchanged."""
    got = load(root)
    if got.rows is not None:
        got.rows.close()
    return got.tree, got.last_at, got.problems


def load(root: Path) -> Loaded:
    """The whole replayed tree, with what a writer needs to update the cache (see `update`)."""
    fp = _fingerprint(root)
    hit = _open(root, fp)
    if hit is not None:
        rows, last_at, problems, current = hit
        try:
            return Loaded(_whole(rows, current), last_at, problems, fp, rows)
        except Damaged:
            rows.close()
    return _rebuild(root, fp)


def load_lazy(root: Path) -> Loaded:
    """The tree as a LazyTree read from the cache in part; the whole tree (the cache rebuilt from
    the shards) when the cache is not usable."""
    fp = _fingerprint(root)
    hit = _open(root, fp)
    if hit is None:
        return _rebuild(root, fp)
    rows, last_at, problems, current = hit
    return Loaded(LazyTree(_Source(rows), current), last_at, problems, fp, rows)


def _rebuild(root: Path, fp: list) -> Loaded:
    ops, problems = treelog.read_ops(root)
    tree = treelog.replay(ops)
    last_at = ops[-1].at if ops else ""
    rows = save(root, tree, last_at, problems, fp)
    return Loaded(tree, last_at, problems, fp, rows)


def _drop(meta: Path) -> None:
    for name in (CACHE, *(CACHE + s for s in SIDE)):
        try:
            (meta / name).unlink(missing_ok=True)
        except OSError:
            pass


def save(
    root: Path, tree: Tree, last_at: str, problems: list[str] | None = None, fp=None
) -> TreeRows | None:
    """Write the whole cache for `tree` (the shards replayed at fingerprint `fp`, now when None),
    unless the shards changed meanwhile; the open cache, or None when it could not be written."""
    meta = meta_dir_for(root)
    if not meta.is_dir():
        return None
    for name in OLD_FILES:
        try:
            (meta / name).unlink(missing_ok=True)
        except OSError:
            pass
    fp = _fingerprint(root) if fp is None else fp
    values = {
        "version": CACHE_VERSION,
        "fp": _fp_text(fp),
        "last_at": last_at,
        "problems": json.dumps(problems or []),
        "current": tree.current,
    }
    topics = [_row(t) for t in tree.topics.values()]
    for attempt in (1, 2):
        try:
            rows = TreeRows(meta / CACHE, create=True)
            if rows.replace(
                topics, tree.archived, tree.gone, values, still=lambda: _fingerprint(root) == fp
            ):
                return rows
            rows.close()
            return None
        except Unusable:
            _drop(meta)  # not a database (damaged, planted): start a new file
        except OSError:
            return None
    return None


# ----- after a write ----------------------------------------------------------------------------------


def update(root: Path, base: Loaded, states: dict, last_at: str) -> None:
    """After a writer appended its ops to a shard of the tree it read as `base`: apply `states`
    (from `changed_states` or `lazy_states`) to the cache's rows, when the cache is still the one
    it read. The ops sort after every op `base` holds, so the result is exactly what a full replay
    gives. When the cache moved on meanwhile (or cannot be written) it is left for the next reader
    to rebuild."""
    rows = base.rows
    if rows is None:
        return
    values = {"fp": _fp_text(_fingerprint(root)), "last_at": last_at, "current": states["current"]}
    topics = {tid: (_row(t) if t is not None else None) for tid, t in states["topics"].items()}
    try:
        rows.update(_fp_text(base.fp), topics, states["archived"], states["gone"], values)
    except Unusable:
        rows.close()
        _drop(meta_dir_for(root))
        return
    rows.close()


def changed_states(old: Tree, new: Tree, touched: list[str] | None = None) -> dict:
    """What a write that turned `old` into `new` (whole trees) changes in the cache: every topic
    that is new or differs (None for one that left), the current topic, the archive when it
    changed, and the tombstones `new` added."""
    if touched is None:
        touched = treelog.changed_topics(old, new)
    topics: dict = {tid: new.topics[tid] for tid in touched}
    topics.update({tid: t for tid, t in new.topics.items() if tid not in old.topics})
    topics.update({tid: None for tid in old.topics if tid not in new.topics})
    return {
        "topics": topics,
        "current": new.current,
        "archived": None if new.archived == old.archived else new.archived,
        "gone": {k: v for k, v in new.gone.items() if old.gone.get(k) != v},
    }


def lazy_states(tree: LazyTree) -> dict:
    """`changed_states` of a write made on a LazyTree: only the topics it read are looked at."""
    fresh, touched, removed = tree.topics.changes()
    topics: dict = {tid: tree.topics[tid] for tid in fresh + touched}
    topics.update({tid: None for tid in removed})
    archived = None
    if tree.archive_read() and tree.archived != tree.orig_archived:
        archived = tree.archived
    return {  # (reads nothing: it runs after the ops were appended, when a damaged row must not stop it)
        "topics": topics,
        "current": tree.current,
        "archived": archived,
        "gone": dict(tree.gone.added),
    }
