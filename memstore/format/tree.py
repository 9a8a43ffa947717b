"""The topic tree (Tree, Topic) and its bytes on disk: the op log `tree/` (format 2) or `tree.json` (format 1).

The tree refers to records by id only. Format 2 keeps it as an append-only log of operations
(memstore/format/treelog.py) that plain git merges by union; `read` replays it and `write` appends
the ops that turn the replayed tree into the one given. A format-1 store's `tree.json` is still read
as before. Topics that leave the tree (merged into another, or archived as trivial) keep a tombstone
in `gone`, so records another clone placed into them later still find their topic.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError
from . import treelog

FILENAME = "tree.json"  # format 1
DIR = treelog.DIR  # format 2: tree/YYYY/YYYY-MM-DD.jsonl
CACHE = "tree-cache.json"  # in .memstore/: the replayed tree, keyed by the shards' stat fingerprint
OLD_CACHE = "tree-cache.pickle"  # what memstore once kept there: never read, removed on the next save
CACHE_VERSION = 3
TREE_FORMAT = 1
TOPIC_KEYS = ("name", "summary", "parent", "records", "created", "last_active")


@dataclass
class Topic:
    id: str
    name: str
    summary: str = ""
    parent: str | None = None
    records: list[str] = field(default_factory=list)
    created: str = ""
    last_active: str = ""
    named_by: str = "offline"  # "offline" (key terms) or "llm"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "summary": self.summary,
            "parent": self.parent,
            "records": list(self.records),
            "created": self.created,
            "last_active": self.last_active,
            "named_by": self.named_by,
        }


@dataclass
class Tree:
    topics: dict[str, Topic] = field(default_factory=dict)
    current: str | None = None
    archived: list[str] = field(default_factory=list)  # record ids archived as trivial
    gone: dict[str, dict] = field(default_factory=dict)  # topic id -> {"into": id|None, "why", "at"}

    # ----- structure -----------------------------------------------------------------------

    def children(self, tid: str | None) -> list[Topic]:
        """Child topics of `tid` (None = the virtual root), oldest first."""
        kids = [t for t in self.topics.values() if t.parent == tid]
        kids.sort(key=lambda t: (t.created, t.id))
        return kids

    def children_map(self) -> dict[str | None, list[Topic]]:
        out: dict[str | None, list[Topic]] = {}
        for t in self.topics.values():
            out.setdefault(t.parent, []).append(t)
        for kids in out.values():
            kids.sort(key=lambda t: (t.created, t.id))
        return out

    def ancestry(self, tid: str | None) -> list[str]:
        """Ids from the top-level topic down to `tid` itself (the root is implicit)."""
        path: list[str] = []
        seen: set[str] = set()
        while tid is not None and tid in self.topics and tid not in seen:
            seen.add(tid)
            path.append(tid)
            tid = self.topics[tid].parent
        return path[::-1]

    def live_path(self) -> set[str]:
        """The current topic and its ancestors: never frozen, never reorganized."""
        return set(self.ancestry(self.current))

    def descendants(self, tid: str) -> set[str]:
        cmap = self.children_map()
        out: set[str] = set()
        stack = [tid]
        while stack:
            for kid in cmap.get(stack.pop(), []):
                if kid.id not in out:
                    out.add(kid.id)
                    stack.append(kid.id)
        return out

    def walk(self, max_depth: int | None = None):
        """(depth, topic) in display order, iteratively (a deep tree must not hit the recursion limit)."""
        cmap = self.children_map()
        stack = [(0, t) for t in reversed(cmap.get(None, []))]
        while stack:
            depth, t = stack.pop()
            yield depth, t
            if max_depth is None or depth + 1 < max_depth:
                stack += [(depth + 1, k) for k in reversed(cmap.get(t.id, []))]

    def topic_of(self) -> dict[str, str]:
        """record id -> topic id."""
        return {rid: t.id for t in self.topics.values() for rid in t.records}

    def resolve(self, tid: str | None) -> str | None:
        """Follow `gone` tombstones to the topic that holds a vanished topic's records now."""
        seen: set[str] = set()
        while tid is not None and tid not in self.topics and tid in self.gone and tid not in seen:
            seen.add(tid)
            tid = self.gone[tid].get("into")
        return tid if tid in self.topics else None

    def record_count(self) -> int:
        return sum(len(t.records) for t in self.topics.values())

    # ----- (de)serialisation ----------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "format": TREE_FORMAT,
            "current": self.current,
            "archived": sorted(set(self.archived)),
            "gone": {k: dict(v) for k, v in sorted(self.gone.items())},
            "topics": {tid: t.to_json() for tid, t in sorted(self.topics.items())},
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def new_topic_id() -> str:
    """Random, so two clones that branch on the same day never mint the same id."""
    return "t" + secrets.token_hex(6)


def path_of(root: Path) -> Path:
    return Path(root) / FILENAME


def parse(text: str, path: Path | str = FILENAME) -> Tree:
    """Parse and validate tree.json text; FormatError names the file and what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(
            path,
            f"not valid JSON ({exc.msg} at line {exc.lineno})",
            hint='Fix or remove the file ("git checkout -- tree.json" restores the committed one).',
        ) from None
    return from_json(data, path)


def from_json(data, path: Path | str = FILENAME) -> Tree:
    if not isinstance(data, dict):
        raise FormatError(path, "the top level must be a JSON object")
    if data.get("format") != TREE_FORMAT:
        raise FormatError(path, f"unsupported tree format {data.get('format')!r} (this memstore reads {TREE_FORMAT})")
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
    if current is not None and current not in tree.topics:
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
        tree, _last, problems = _replayed(root)
        treelog.warn(problems)
        return tree
    return read_file(path_of(root))


def read_file(path: Path, empty_ok: bool = False) -> Tree:
    """A tree.json tree from `path`: empty when the file is missing (or, with `empty_ok`, blank)."""
    try:
        text = path.read_text(encoding="utf-8")
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


def write(root: Path, tree: Tree, now=None) -> list[str]:
    """Append the ops that turn the stored tree into `tree` to today's shard; the changed paths.

    Today is the store timezone's date. A format-1 `tree.json` is replaced by ops that build the
    whole tree (and removed), which is how a store's tree moves to format 2. Returns [] when the
    tree did not change.
    """
    from .timeutil import local_day, now_utc

    root = Path(root)
    legacy = path_of(root).exists()
    old, last_at, _problems = _replayed(root) if treelog.exists(root) else (Tree(), "", [])
    now = now or now_utc()
    ops = treelog.stamp(treelog.diff(old, tree), last_at, now)
    changed: list[str] = []
    if ops:
        shard = treelog.shard_path(root, local_day(now, _store_zone(root)))
        shard.parent.mkdir(parents=True, exist_ok=True)
        from .log import append_lines

        append_lines(shard, "".join(treelog.dumps(op) + "\n" for op in ops).encode("utf-8"), fsync=False)
        changed.append(shard.relative_to(root).as_posix())
        # The new ops sort after every op already in the log, so applying them to the replayed tree
        # gives exactly what a full replay would: the cache stays valid without replaying.
        new = treelog.Replay.of(old).apply_all([treelog.parse_line(treelog.dumps(op)) for op in ops])
        _save_cache(root, new.result(), ops[-1]["at"])
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
    except (OSError, ValueError, Exception):  # an unreadable config is reported by whoever opens the store
        return zone("UTC")


# ----- the replay cache ------------------------------------------------------------------------


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
    topics, current, archived, gone = (packed.get(k) for k in ("topics", "current", "archived", "gone"))
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


def _replayed(root: Path) -> tuple[Tree, str, list[str]]:
    """(tree, newest op time, damaged-line problems), from the cache when the shards are unchanged."""
    meta = root / ".memstore"
    fp = _fingerprint(root)
    hit = _cached(meta, fp) if meta.is_dir() else None
    if hit is not None:
        return hit
    ops, problems = treelog.read_ops(root)
    tree = treelog.replay(ops)
    last_at = ops[-1].at if ops else ""
    _save_cache(root, tree, last_at, problems, fp)
    return tree, last_at, problems


def _save_cache(root: Path, tree: Tree, last_at: str, problems: list[str] | None = None, fp=None) -> None:
    meta = root / ".memstore"
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
        tmp.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, meta / CACHE)
        (meta / OLD_CACHE).unlink(missing_ok=True)
    except OSError:
        tmp.unlink(missing_ok=True)


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


def forget(root: Path, record_ids, texts) -> list[str]:
    """Rewrite the op shards so no line names a forgotten record or holds text derived from one.

    Record ids leave every `place`/`archive`/`drop` line (a line left with none goes); the name and
    summary of each topic that held a forgotten record, or whose name or summary contains a
    forgotten text, are made again offline from the records that remain, in every line that carries
    them. Returns the changed paths. The one operation that rewrites op lines (issue 13).
    """
    from .treeforget import forget_ops

    return forget_ops(Path(root), set(record_ids), list(texts))
