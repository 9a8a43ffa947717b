"""The topic tree's nouns: a `Topic` (a name, a summary, a parent and the ids of its records) and
the `Tree` that holds them, with the topics that left it (`gone`) and the archived records.
docs/format.md "The topic tree" defines them; memstore/format/tree.py reads and writes them."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field

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
