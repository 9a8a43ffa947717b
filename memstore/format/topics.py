"""The topic tree's nouns: a `Topic` (a name, a summary, a parent and the ids of its records) and
the `Tree` that holds them, with the topics that left it (`gone`) and the archived records.
docs/format.md "The topic tree" defines them; memstore/format/tree.py reads and writes them."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from itertools import chain

TREE_FORMAT = 1


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
    gone: dict[str, dict] = field(
        default_factory=dict
    )  # topic id -> {"into": id|None, "why", "at"}

    def copy(self) -> "Tree":
        """A copy whose topics, record lists, archive and tombstones can change without touching
        this tree (what a writer diffs its changes against)."""
        return Tree(
            topics={
                tid: Topic(
                    tid,
                    t.name,
                    t.summary,
                    t.parent,
                    list(t.records),
                    t.created,
                    t.last_active,
                    t.named_by,
                )
                for tid, t in self.topics.items()
            },
            current=self.current,
            archived=list(self.archived),
            gone={k: dict(v) for k, v in self.gone.items()},
        )

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

    def holding(self, ids: set[str]) -> set[str]:
        """Those of `ids` the tree holds: placed in a topic or archived."""
        out = ids & set(chain.from_iterable(t.records for t in self.topics.values()))
        return out | (ids & set(self.archived))

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


# ----- a tree read in part --------------------------------------------------------------------------


class LazyTopics(MutableMapping):
    """A tree's topics, each read from `source` (see LazyTree) the first time it is asked for, so a
    write that looks at a few topics reads a few. `orig` keeps each one as it was read (what the
    write's ops are found against); iterating reads them all (a whole-tree walk costs what it did)."""

    def __init__(self, source):
        self.source = source
        self.got: dict[str, Topic | None] = {}  # read or set here; None: absent or deleted
        self.orig: dict[str, Topic] = {}
        self.whole = False

    def _see(self, t: Topic) -> Topic:
        """The live topic for a row the source gave (the one already held, if any)."""
        if t.id in self.got:
            return self.got[t.id]
        self.orig[t.id] = _copy(t)
        self.got[t.id] = t
        return t

    def load(self, tid) -> Topic | None:
        if tid in self.got:
            return self.got[tid]
        t = self.source.topic(tid) if isinstance(tid, str) and not self.whole else None
        if t is None:
            self.got[tid] = None
            return None
        return self._see(t)

    def __getitem__(self, tid):
        t = self.load(tid)
        if t is None:
            raise KeyError(tid)
        return t

    def __contains__(self, tid) -> bool:
        return self.load(tid) is not None

    def __setitem__(self, tid, t: Topic) -> None:
        self.load(tid)
        self.got[tid] = t

    def __delitem__(self, tid) -> None:
        if self.load(tid) is None:
            raise KeyError(tid)
        self.got[tid] = None

    def read_all(self) -> None:
        if not self.whole:
            for t in self.source.topics():
                self._see(t)
            self.whole = True

    def __iter__(self):
        self.read_all()
        return iter([k for k, t in self.got.items() if t is not None])

    def __len__(self) -> int:
        self.read_all()
        return sum(1 for t in self.got.values() if t is not None)

    def changes(self) -> tuple[list[str], list[str], list[str]]:
        """(new, changed, removed) topic ids: only the topics read or set are looked at."""
        orig = self.orig
        fresh = [k for k, t in self.got.items() if t is not None and k not in orig]
        touched = [k for k, t in self.got.items() if t is not None and k in orig and orig[k] != t]
        removed = [k for k, t in self.got.items() if t is None and k in orig]
        return fresh, touched, removed


class LazyGone(MutableMapping):
    """A tree's tombstones, read one by one from `source`; `added` holds those set here."""

    def __init__(self, source):
        self.source = source
        self.got: dict[str, dict | None] = {}
        self.added: dict[str, dict] = {}
        self.whole = False

    def __getitem__(self, tid):
        if tid not in self.got:
            self.got[tid] = self.source.gone(tid) if isinstance(tid, str) else None
        if self.got[tid] is None:
            raise KeyError(tid)
        return self.got[tid]

    def __contains__(self, tid) -> bool:
        try:
            self[tid]
        except KeyError:
            return False
        return True

    def __setitem__(self, tid, value: dict) -> None:
        self.got[tid] = self.added[tid] = value

    def __delitem__(self, tid) -> None:
        raise TypeError("a tombstone is never removed by a write")

    def __iter__(self):
        if not self.whole:
            for k, v in self.source.all_gone().items():
                self.got.setdefault(k, v)
            self.whole = True
        return iter([k for k, v in self.got.items() if v is not None])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class StoredGone(Mapping):
    """The tombstones as the source holds them (what a write's own are found against)."""

    def __init__(self, source):
        self.source = source

    def __getitem__(self, tid):
        value = self.source.gone(tid) if isinstance(tid, str) else None
        if value is None:
            raise KeyError(tid)
        return value

    def __iter__(self):
        return iter(self.source.all_gone())

    def __len__(self) -> int:
        return len(self.source.all_gone())


class LazyTree(Tree):
    """A Tree whose topics, tombstones and archive are read from `source` when first asked for:
    what a one-record write reads costs what it looks at, not what the tree holds. `source` has
    topic(id), children(parent), topics(), owners(record ids), archived(), gone(id), all_gone()
    (memstore/format/treecache.py reads them from the cache). Whole-tree methods (walk,
    children_map, topic_of, to_json) read every topic, as on a Tree."""

    def __init__(self, source, current: str | None):
        self.source = source
        self.topics = LazyTopics(source)
        self.gone = LazyGone(source)
        self.current = current
        self.orig_current = current
        self._archived: list[str] | None = None
        self.orig_archived: list[str] | None = None

    @property
    def archived(self) -> list[str]:
        if self._archived is None:
            self._archived = list(self.source.archived())
            self.orig_archived = list(self._archived)
        return self._archived

    @archived.setter
    def archived(self, value: list[str]) -> None:
        self.archived  # noqa: B018  (read the stored archive first: the write diffs against it)
        self._archived = value

    def archive_read(self) -> bool:
        return self._archived is not None

    def stored_children(self, tid: str | None) -> list[Topic]:
        """The live topics the source holds under `tid` that are still there."""
        see = self.topics._see
        return [k for k in map(see, self.source.children(tid)) if k.parent == tid]

    def children(self, tid: str | None) -> list[Topic]:
        if self.topics.whole:
            return Tree.children(self, tid)
        kids = {id(k): k for k in self.stored_children(tid)}
        for t in self.topics.got.values():
            if t is not None and t.parent == tid:
                kids[id(t)] = t
        return sorted(kids.values(), key=lambda t: (t.created, t.id))

    def holding(self, ids: set[str]) -> set[str]:
        owners = self.source.owners(sorted(ids))
        got = self.topics.got
        out = set()
        for rid, tid in owners.items():
            if tid is None and self._archived is None:
                out.add(rid)  # archived, and the archive is as stored
            elif tid is not None and tid not in got:
                out.add(rid)  # in a topic this write has not read
        for t in got.values():
            if t is not None:
                out |= ids & set(t.records)
        if self._archived is not None:
            out |= ids & set(self._archived)
        return out

    def copy(self) -> "Tree":
        self.topics.read_all()
        return Tree.copy(self)


def _copy(t: Topic) -> Topic:
    return Topic(
        t.id, t.name, t.summary, t.parent, list(t.records), t.created, t.last_active, t.named_by
    )


def new_topic_id() -> str:
    """Random, so two clones that branch on the same day never mint the same id."""
    return "t" + secrets.token_hex(6)
