"""The topic tree (Tree, Topic) and its bytes on disk: the op log `tree/` (format 2) or `tree.json` (format 1).

The tree refers to records by id only. Format 2 keeps it as an append-only log of operations
(memstore/format/treelog.py) that plain git merges by union; `read` replays it and `write` appends
the ops that turn the replayed tree into the one given. A format-1 store's `tree.json` is still read
as before. Topics that leave the tree (merged into another, or archived as trivial) keep a tombstone
in `gone`, so records another clone placed into them later still find their topic.
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import storefile
from ..errors import FormatError
from . import safejson, treecache, treelog
from .treecache import CACHE, CACHE_VERSION, OLD_CACHE, Damaged  # noqa: F401  (tests, writers)
from .topics import TREE_FORMAT, LazyTree, StoredGone, Topic, Tree, new_topic_id  # noqa: F401

FILENAME = "tree.json"  # format 1
DIR = treelog.DIR  # format 2: tree/YYYY/YYYY-MM-DD.jsonl
TOPIC_KEYS = ("name", "summary", "parent", "records", "created", "last_active")


def path_of(root: Path) -> Path:
    return Path(root) / FILENAME


def parse(text: str, path: Path | str = FILENAME) -> Tree:
    """Parse and validate tree.json text; FormatError names the file and what is wrong."""
    try:
        data = safejson.DECODER.decode(text)
    except (ValueError, RecursionError) as exc:  # also nested too deep, a giant number, NaN
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else None
        raise FormatError(
            path,
            f"not valid JSON ({why} at line {exc.lineno})" if why else safejson.problem(exc),
            hint='Fix or remove the file ("git checkout -- tree.json" restores the committed one).',
        ) from None
    return from_json(data, path)


def from_json(data, path: Path | str = FILENAME) -> Tree:
    if not isinstance(data, dict):
        raise FormatError(path, "the top level must be a JSON object")
    if data.get("format") != TREE_FORMAT:
        raise FormatError(
            path,
            f"unsupported tree format {data.get('format')!r} (this memstore reads {TREE_FORMAT})",
        )
    topics_raw = data.get("topics", {})
    if not isinstance(topics_raw, dict):
        raise FormatError(path, '"topics" must be an object of topic id -> topic')
    tree = Tree()
    for tid, raw in topics_raw.items():
        if not isinstance(raw, dict):
            raise FormatError(path, f"topic {tid!r} must be an object")
        missing = [k for k in TOPIC_KEYS if k not in raw]
        if missing:
            raise FormatError(path, f"topic {tid!r} lacks {', '.join(missing)}")
        recs = raw["records"]
        if not isinstance(recs, list) or not all(isinstance(r, str) for r in recs):
            raise FormatError(path, f'topic {tid!r}: "records" must be a list of record ids')
        for key in ("name", "summary", "created", "last_active"):
            if not isinstance(raw[key], str):
                raise FormatError(path, f"topic {tid!r}: {key!r} must be a string")
        if raw["parent"] is not None and not isinstance(raw["parent"], str):
            raise FormatError(path, f'topic {tid!r}: "parent" must be a topic id or null')
        tree.topics[tid] = Topic(
            id=tid,
            name=raw["name"],
            summary=raw["summary"],
            parent=raw["parent"],
            records=list(recs),
            created=raw["created"],
            last_active=raw["last_active"],
            named_by=str(raw.get("named_by", "offline")),
        )
    for t in tree.topics.values():
        if t.parent is not None and t.parent not in tree.topics:
            raise FormatError(path, f"topic {t.id!r} has parent {t.parent!r}, which is not a topic")
    for t in tree.topics.values():
        if len(tree.ancestry(t.id)) > len(tree.topics) or _in_cycle(tree, t.id):
            raise FormatError(path, f"topic {t.id!r} is its own ancestor (a cycle)")
    current = data.get("current")
    if current is not None and (type(current) is not str or current not in tree.topics):
        raise FormatError(path, f'"current" names {current!r}, which is not a topic')
    tree.current = current
    archived = data.get("archived", [])
    if not isinstance(archived, list) or not all(isinstance(r, str) for r in archived):
        raise FormatError(path, '"archived" must be a list of record ids')
    tree.archived = list(archived)
    gone = data.get("gone", {})
    if not isinstance(gone, dict) or not all(isinstance(v, dict) for v in gone.values()):
        raise FormatError(path, '"gone" must be an object of topic id -> {"into", "why", "at"}')
    tree.gone = {k: dict(v) for k, v in gone.items()}
    return tree


def _in_cycle(tree: Tree, tid: str) -> bool:
    seen: set[str] = set()
    cur: str | None = tid
    while cur is not None:
        if cur in seen:
            return True
        seen.add(cur)
        cur = tree.topics[cur].parent if cur in tree.topics else None
    return False


def read(root: Path) -> Tree:
    """The store's tree: the op log replayed (format 2), else tree.json (format 1), else an empty tree.

    A damaged op line is skipped with a warning on stderr (`ct fsck` names it as damage).
    """
    root = Path(root)
    if treelog.exists(root):
        tree, _last, problems = treecache.replayed(root)
        treelog.warn(problems)
        return tree
    return read_file(path_of(root))


def read_file(path: Path, empty_ok: bool = False) -> Tree:
    """A tree.json tree from `path`: empty when the file is missing (or, with `empty_ok`, blank)."""
    try:
        text = storefile.read_text(path)
    except FileNotFoundError:
        return Tree()
    except UnicodeDecodeError:
        raise FormatError(path, "not UTF-8 text") from None
    return Tree() if empty_ok and not text.strip() else parse(text, path)


def from_files(root: Path, files: dict[str, bytes]) -> Tree:
    """The tree replayed from op shards given as {relative path: bytes} (e.g. read from a git revision)."""
    ops, problems = treelog.read_ops(root, files=files)
    treelog.warn(problems)
    return treelog.replay(ops)


def read_for_write(root: Path, lazy: bool = False) -> tuple[Tree, treecache.Loaded | None]:
    """The tree a writer changes, and the tree as read (pass it to `write` as `base`, so the write
    diffs against it and updates the cache instead of reading the store's tree a second time).
    None for a format-1 store (or one with no tree yet). With `lazy` the tree is a LazyTree read
    from the cache in part, topic by topic as the writer asks (a whole Tree when the cache had to
    be rebuilt); reading it may raise treecache.Damaged (start again without `lazy`)."""
    root = Path(root)
    if not treelog.exists(root):
        return read_file(path_of(root)), None
    base = treecache.load_lazy(root) if lazy else treecache.load(root)
    treelog.warn(base.problems)
    if isinstance(base.tree, LazyTree):
        return base.tree, base
    return base.tree.copy(), base


def _lazy_diff(tree: LazyTree) -> list[dict]:
    """The ops of a write made on a LazyTree: only the topics it read are compared."""
    fresh, touched, removed = tree.topics.changes()
    orig = tree.topics.orig
    old = Tree(
        topics={tid: orig[tid] for tid in touched + removed},
        current=tree.orig_current,
        gone=StoredGone(tree.source),
    )
    archive = (tree.orig_archived, tree.archived) if tree.archive_read() else ([], [])
    return treelog.diff(old, tree, touched, fresh=fresh, removed=removed, archive=archive)


def write(root: Path, tree: Tree, now=None, base: treecache.Loaded | None = None) -> list[str]:
    """Append the ops that turn the stored tree into `tree` to today's shard; the changed paths.

    Today is the store timezone's date; the shard is the day's newest part with room
    (treelog.write_shard). A format-1 `tree.json` is replaced by ops that build the whole tree (and
    removed), which is how a store's tree moves to format 2. `base` is what `read_for_write` gave
    with `tree` (read again when None). Returns [] when the tree did not change.
    """
    from .timeutil import local_day, now_utc

    root = Path(root)
    legacy = path_of(root).exists()
    lazy = isinstance(tree, LazyTree)
    given = base is not None  # `tree` was made from base's copy: its changed topics are known
    if base is None and treelog.exists(root):
        base = treecache.load(root)
    old, last_at = (base.tree, base.last_at) if base is not None else (Tree(), "")
    now = now or now_utc()
    if lazy:
        touched = []
        ops = treelog.stamp(_lazy_diff(tree), last_at, now)
    else:
        touched = treelog.changed_topics(old, tree)
        ops = treelog.stamp(treelog.diff(old, tree, touched), last_at, now)
    changed: list[str] = []
    if ops:
        shard = treelog.write_shard(root, local_day(now, _store_zone(root)))
        storefile.mkdirs(shard.parent, root)
        from .log import append_lines

        lines = [treelog.dumps(op) for op in ops]
        append_lines(shard, "".join(line + "\n" for line in lines).encode("utf-8"), fsync=False)
        changed.append(shard.relative_to(root).as_posix())
        # The new ops sort after every op already in the log, so applying them to the replayed tree
        # gives exactly what a full replay would: the cache stays valid without replaying.
        if base is None:  # the first ops of a tree: nothing to update
            rows = treecache.save(
                root, treelog.replay([treelog.parse_line(x) for x in lines]), ops[-1]["at"]
            )
            if rows is not None:
                rows.close()
        else:
            if lazy:
                states = treecache.lazy_states(tree)
            elif given:
                states = treecache.changed_states(old, tree, touched)
            else:  # a tree made elsewhere (reorganize, forget): what replaying its ops gives
                new = (
                    treelog.Replay.of(old.copy())
                    .apply_all([treelog.parse_line(x) for x in lines])
                    .result()
                )
                states = treecache.changed_states(old, new)
            treecache.update(root, base, states, ops[-1]["at"])
    elif base is not None and base.rows is not None:
        base.rows.close()
    if legacy:
        path_of(root).unlink()
        changed.append(FILENAME)
    return changed


def _store_zone(root: Path):
    """The store's timezone from memstore.toml (UTC where there is none), without the version check."""
    import tomllib

    from .timeutil import zone

    try:
        data = tomllib.loads((root / "memstore.toml").read_text(encoding="utf-8"))
        return zone(str(data.get("timezone", "UTC")))
    except (
        OSError,
        ValueError,
        Exception,
    ):  # an unreadable config is reported by whoever opens the store
        return zone("UTC")


def problems(root: Path, known_ids: set[str] | None = None) -> list[str]:
    """What `ct fsck` should report about the tree: damaged op lines (file:line), an unreadable
    tree.json, records placed twice (format 1) or unknown to the day logs."""
    root = Path(root)
    if treelog.exists(root):
        ops, out = treelog.read_ops(root)
        tree = treelog.replay(ops)
        where = f"{root / DIR}"
    else:
        where = f"{path_of(root)}"
        try:
            tree = read(root)
        except FormatError as exc:
            return [str(exc).splitlines()[0]]
        out = []
    seen: dict[str, str] = {}
    for t in sorted(tree.topics.values(), key=lambda t: t.id):
        for rid in t.records:
            if rid in seen:
                out.append(f"{where}: record {rid} is in topics {seen[rid]} and {t.id}")
            seen[rid] = t.id
            if known_ids is not None and rid not in known_ids:
                out.append(f"{where}: topic {t.id} names record {rid}, which is not in any day log")
    for rid in set(tree.archived) & set(seen):
        out.append(f"{where}: record {rid} is both archived and in topic {seen[rid]}")
    return out
