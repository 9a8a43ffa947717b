"""`tree.json`: the topic tree's bytes on disk — reading, validating, deterministic writing, merging.

The tree refers to records by id only. Its JSON is written with sorted keys, two-space indentation
and one record id per line, so `git diff tree.json` reads as "these records joined that topic".
Topics that leave the tree (merged into another, or archived as trivial) keep a tombstone in
`gone`, which is what lets two clones' trees merge by topic id without losing records.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError

FILENAME = "tree.json"
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
    named_by: str = "offline"     # "offline" (key terms) or "llm"

    def to_json(self) -> dict:
        return {"name": self.name, "summary": self.summary, "parent": self.parent, "records": list(self.records),
                "created": self.created, "last_active": self.last_active, "named_by": self.named_by}


@dataclass
class Tree:
    topics: dict[str, Topic] = field(default_factory=dict)
    current: str | None = None
    archived: list[str] = field(default_factory=list)        # record ids archived as trivial
    gone: dict[str, dict] = field(default_factory=dict)      # topic id -> {"into": id|None, "why", "at"}

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
        return {"format": TREE_FORMAT, "current": self.current, "archived": sorted(set(self.archived)),
                "gone": {k: dict(v) for k, v in sorted(self.gone.items())},
                "topics": {tid: t.to_json() for tid, t in sorted(self.topics.items())}}

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
        raise FormatError(path, f"not valid JSON ({exc.msg} at line {exc.lineno})",
                          hint='Fix or remove the file ("git checkout -- tree.json" restores the committed one).') from None
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
            raise FormatError(path, f"topic {tid!r}: \"records\" must be a list of record ids")
        for key in ("name", "summary", "created", "last_active"):
            if not isinstance(raw[key], str):
                raise FormatError(path, f"topic {tid!r}: {key!r} must be a string")
        if raw["parent"] is not None and not isinstance(raw["parent"], str):
            raise FormatError(path, f"topic {tid!r}: \"parent\" must be a topic id or null")
        tree.topics[tid] = Topic(id=tid, name=raw["name"], summary=raw["summary"], parent=raw["parent"],
                                 records=list(recs), created=raw["created"], last_active=raw["last_active"],
                                 named_by=str(raw.get("named_by", "offline")))
    for t in tree.topics.values():
        if t.parent is not None and t.parent not in tree.topics:
            raise FormatError(path, f"topic {t.id!r} has parent {t.parent!r}, which is not a topic")
    for t in tree.topics.values():
        if len(tree.ancestry(t.id)) > len(tree.topics) or _in_cycle(tree, t.id):
            raise FormatError(path, f"topic {t.id!r} is its own ancestor (a cycle)")
    current = data.get("current")
    if current is not None and current not in tree.topics:
        raise FormatError(path, f"\"current\" names {current!r}, which is not a topic")
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
    """The store's tree; an empty tree when the file does not exist yet."""
    return read_file(path_of(root))


def read_file(path: Path, empty_ok: bool = False) -> Tree:
    """A tree from `path`: empty when the file is missing (or, with `empty_ok`, blank)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Tree()
    except UnicodeDecodeError:
        raise FormatError(path, "not UTF-8 text") from None
    return Tree() if empty_ok and not text.strip() else parse(text, path)


def write(root: Path, tree: Tree) -> Path:
    """Write atomically (temp file then rename); returns the path."""
    path = path_of(root)
    tmp = path.with_name(f".{FILENAME}.tmp-{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(tree.dumps())
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    return path


# ----- merging by topic id -------------------------------------------------------------------

def merge(base: Tree, ours: Tree, theirs: Tree) -> Tree:
    """Three-way merge by topic id: no record is lost, every record ends in at most one topic.

    Records: union per topic. Name/summary: the side whose topic was active last. Parent: the side
    that changed it from base (the more recently active side if both did). Tombstones win: a topic
    one side merged away is gone, and records the other side added to it follow it to its target.
    """
    out = Tree()
    out.gone = {**theirs.gone, **ours.gone}
    ids = (set(ours.topics) | set(theirs.topics)) - set(out.gone)
    for tid in sorted(ids):
        a, b, o = ours.topics.get(tid), theirs.topics.get(tid), base.topics.get(tid)
        if a is None or b is None:
            if (a or b) is not None and o is not None and _deleted_untracked(o, a, b):
                continue  # removed on one side without a tombstone and untouched on the other
            t = a or b
            out.topics[tid] = Topic(**{**t.__dict__, "records": list(t.records)})
            continue
        newer, older = (b, a) if b.last_active > a.last_active else (a, b)
        parent = a.parent
        if o is not None and a.parent == o.parent and b.parent != o.parent:
            parent = b.parent
        elif o is not None and a.parent != o.parent and b.parent != o.parent:
            parent = newer.parent
        out.topics[tid] = Topic(id=tid, name=newer.name, summary=newer.summary, parent=parent,
                                records=_union(a.records, b.records), created=min(a.created, b.created),
                                last_active=max(a.last_active, b.last_active), named_by=newer.named_by)
    out.archived = sorted(set(ours.archived) | set(theirs.archived))
    # Records that were in topics now gone move to the topic their tombstone points at.
    for side in (ours, theirs):
        for tid, t in side.topics.items():
            if tid in out.topics:
                continue
            target = out.resolve(tid)
            if target is not None:
                out.topics[target].records = _union(out.topics[target].records, t.records)
            elif tid in out.gone:
                out.archived = sorted(set(out.archived) | set(t.records))
    _repair(out)
    a_cur, b_cur = out.resolve(ours.current), out.resolve(theirs.current)
    if a_cur and b_cur:
        out.current = b_cur if out.topics[b_cur].last_active > out.topics[a_cur].last_active else a_cur
    else:
        out.current = a_cur or b_cur
    return out


def _deleted_untracked(base_t: Topic, a: Topic | None, b: Topic | None) -> bool:
    kept = a or b
    return kept is not None and kept.records == base_t.records and kept.name == base_t.name


def _union(first: list[str], second: list[str]) -> list[str]:
    seen = set(first)
    return list(first) + [r for r in second if r not in seen and not seen.add(r)]


def _repair(tree: Tree) -> None:
    """Make a merged tree valid again: parents exist, no cycles, each record in one topic only."""
    for t in sorted(tree.topics.values(), key=lambda t: t.id):
        if t.parent is not None and t.parent not in tree.topics:
            t.parent = tree.resolve(t.parent)
    for t in sorted(tree.topics.values(), key=lambda t: t.id):
        if _in_cycle(tree, t.id):
            t.parent = None
    # A fan-out group (no records) left without children by the merge is dropped, with a tombstone.
    cmap = tree.children_map()
    for t in sorted(tree.topics.values(), key=lambda t: t.id):
        if not t.records and not cmap.get(t.id) and t.id != tree.current:
            del tree.topics[t.id]
            tree.gone.setdefault(t.id, {"into": t.parent, "why": "regrouped", "at": t.last_active})
    archived = set(tree.archived)
    owner: set[str] = set()
    for t in sorted(tree.topics.values(), key=lambda t: (t.created, t.id)):
        kept = []
        for rid in t.records:
            if rid not in owner and rid not in archived:
                owner.add(rid)
                kept.append(rid)
        t.records = kept


def merge_files(base: str, ours: str, theirs: str) -> bool:
    """The git merge driver: merge the three versions, write the result into OURS; False on failure."""
    try:
        merged = merge(*(read_file(Path(p), empty_ok=True) for p in (base, ours, theirs)))
    except (FormatError, UnicodeDecodeError, OSError):
        return False  # git then reports a conflict and keeps OURS untouched
    p = Path(ours)
    tmp = p.with_name(p.name + f".merge-{os.getpid()}")
    tmp.write_text(merged.dumps(), encoding="utf-8")
    os.replace(tmp, p)
    return True


def problems(root: Path, known_ids: set[str] | None = None) -> list[str]:
    """What `ct fsck` should report about tree.json: unreadable, or ids that break the should-rules."""
    path = path_of(root)
    try:
        tree = read(root)
    except FormatError as exc:
        return [str(exc)]
    out: list[str] = []
    seen: dict[str, str] = {}
    for t in sorted(tree.topics.values(), key=lambda t: t.id):
        for rid in t.records:
            if rid in seen:
                out.append(f"{path}: record {rid} is in topics {seen[rid]} and {t.id}")
            seen[rid] = t.id
            if known_ids is not None and rid not in known_ids:
                out.append(f"{path}: topic {t.id} names record {rid}, which is not in any day log")
    for rid in set(tree.archived) & set(seen):
        out.append(f"{path}: record {rid} is both archived and in topic {seen[rid]}")
    return out
