"""The result types of the Python API, in one numpy-free module: `from memstore import Hit` (or any
result type) loads no numpy, no model and no git. The modules that produce them import them from here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .format.timeutil import to_iso


@dataclass
class WriteResult:
    """What one write command did: records added, duplicates skipped, the commit made (or None)."""

    added: list[dict] = field(default_factory=list)
    skipped: int = 0
    commit: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "added": len(self.added),
            "skipped": self.skipped,
            "commit": self.commit,
            "ids": [r["id"] for r in self.added],
            "notes": self.notes,
        }


@dataclass
class Filters:
    since: float | None = None  # Unix seconds, inclusive
    until: float | None = None  # Unix seconds, exclusive
    role: list[str] = field(default_factory=list)
    actor: list[str] = field(default_factory=list)
    type: list[str] = field(default_factory=list)
    session: list[str] = field(default_factory=list)
    include_hidden: bool = False
    exclude_types: list[str] = field(default_factory=list)

    # As SQL: memstore/index/queries.py (filters_where).

    @property
    def narrows_rows(self) -> bool:
        return bool(self.role or self.actor or self.type or self.session or self.exclude_types)


class Hits(list):
    """What `Store.search` returns: a list of Hit, best first, with `note` saying why it is empty
    when the query had no word to look for (else None)."""

    note: str | None = None


@dataclass
class Hit:
    id: str
    ts: str
    actor: str | None
    role: str
    type: str
    text: str
    score: float
    session: str | None
    source: dict | str | None
    day: str
    rowid: int
    store: str | None = None
    parts: dict = field(default_factory=dict)
    record: dict = field(default_factory=dict)

    def to_json(self, explain: bool = False) -> dict:
        out = {
            "id": self.id,
            "ts": self.ts,
            "actor": self.actor,
            "role": self.role,
            "type": self.type,
            "text": self.text,
            "score": round(self.score, 6),
            "session": self.session,
            "source": self.source,
            "day": self.day,
            "model": self.record.get("model"),
        }
        if self.store is not None:
            out["store"] = self.store
        if self.record.get("meta"):
            out["meta"] = self.record["meta"]
        if explain:
            out["parts"] = self.parts
        return out


@dataclass
class RecallHit:
    """One line of the answer: a hit plus what kind of evidence it is."""

    hit: Hit
    flags: list[str] = field(default_factory=list)

    def to_json(self, explain: bool = False) -> dict:
        out = self.hit.to_json(explain)
        out["flags"] = list(self.flags)
        return out


@dataclass
class RecallResult:
    query: str
    now: str
    window: object | None  # timephrase.Window
    keywords: str  # the words that were searched for ("" when none)
    occurrence: str | None
    level: str
    hits: list[RecallHit] = field(default_factory=list)  # time order
    notes: list[str] = field(default_factory=list)
    window_lines: int | None = None  # conversational lines inside the window

    def to_json(self, explain: bool = False) -> dict:
        w = self.window
        return {
            "query": self.query,
            "now": self.now,
            "window": None
            if w is None
            else {"start": to_iso(w.start), "end": to_iso(w.end), "granularity": w.granularity, "phrase": w.phrase},
            "level": self.level,
            "keywords": self.keywords,
            "occurrence": self.occurrence,
            "window_lines": self.window_lines,
            "notes": self.notes,
            "hits": [h.to_json(explain) for h in self.hits],
        }


@dataclass
class Context:
    query: str
    budget: int | None
    text: str = ""
    tokens: int = 0
    sections: dict = field(default_factory=lambda: {"markers": [], "topics": [], "recall": [], "recent": []})
    dropped: int = 0

    def to_json(self) -> dict:
        return {
            "query": self.query,
            "budget": self.budget,
            "tokens": self.tokens,
            "dropped": self.dropped,
            "sections": self.sections,
            "text": self.text,
        }


@dataclass
class ReorgResult:
    threshold: float
    veto: str  # "llm" or "offline"
    candidates: int = 0
    pairs: int = 0  # pairs at or above the threshold
    merges: list[dict] = field(default_factory=list)
    vetoed: list[dict] = field(default_factory=list)
    skipped: int = 0
    archived: list[str] = field(default_factory=list)
    emptied: list[str] = field(default_factory=list)
    regrouped: list[str] = field(default_factory=list)
    dissolved: list[str] = field(default_factory=list)  # empty or single-child groups removed
    commit: str | None = None
    dry_run: bool = False
    seconds: float = 0.0
    llm_calls: int = 0
    llm_failures: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.merges or self.archived or self.emptied or self.regrouped or self.dissolved)

    def subject(self) -> str:
        parts = [
            f"merge {len(self.merges)}",
            f"archive {len(self.archived)} trivial turn{'s' if len(self.archived) != 1 else ''}",
        ]
        if self.regrouped:
            parts.append(f"regroup {len(self.regrouped)}")
        return "Reorganize topics: " + ", ".join(parts)

    def message(self) -> str:
        lines = [
            self.subject(),
            "",
            f"candidates {self.candidates} frozen topics, {self.pairs} pairs at similarity >= {self.threshold}, "
            f"merged {len(self.merges)}, vetoed {len(self.vetoed)} ({self.veto}), skipped {self.skipped}, "
            f"archived {len(self.archived)} turns, emptied {len(self.emptied)} topics",
        ]
        for m in self.merges:
            lines.append(
                f'merge: "{m["newer_name"]}" ({m["newer"]}) into older "{m["older_name"]}" '
                f"({m['older']}), similarity {m['similarity']:.2f}, +{m['records']} records"
            )
        for v in self.vetoed:
            lines.append(
                f'veto ({v["by"]}): "{v["a_name"]}" / "{v["b_name"]}", similarity {v["similarity"]:.2f}: {v["reason"]}'
            )
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "threshold": self.threshold,
            "veto": self.veto,
            "candidates": self.candidates,
            "pairs": self.pairs,
            "merged": len(self.merges),
            "merges": self.merges,
            "vetoed": self.vetoed,
            "skipped": self.skipped,
            "archived": len(self.archived),
            "emptied": self.emptied,
            "regrouped": self.regrouped,
            "dissolved": self.dissolved,
            "commit": self.commit,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 3),
            "llm_calls": self.llm_calls,
            "llm_failures": self.llm_failures,
        }


@dataclass
class Where:
    """Where the conversation stands (`Store.where`): open markers (newest last) and the latest
    session's last lines."""

    now: str
    markers: list = field(default_factory=list)  # format.markers.Marker
    markers_omitted: int = 0
    markers_done: int = 0
    session: str | None = None
    session_lines: int = 0
    lines: list[dict] = field(default_factory=list)
    fast: bool = True  # answered from the index without updating it

    def to_json(self) -> dict:
        return {
            "now": self.now,
            "markers": [m.to_json() for m in self.markers],
            "markers_omitted": self.markers_omitted,
            "markers_done": self.markers_done,
            "session": None if self.session is None else {"name": self.session, "lines": self.session_lines},
            "lines": [
                {k: r.get(k) for k in ("id", "ts", "actor", "role", "type", "text", "session")} for r in self.lines
            ],
        }

    def short_ids(self, floor: int = 12) -> dict[str, str]:
        """The shortest prefix (at least `floor` characters) that tells each open marker apart from the rest."""
        ids = sorted(m.id for m in self.markers)
        out = {}
        for i, mid in enumerate(ids):
            n = floor
            for other in (ids[i - 1] if i else None, ids[i + 1] if i + 1 < len(ids) else None):
                if other is not None:
                    n = max(n, len(os.path.commonprefix([mid, other])) + 1)
            out[mid] = mid[:n]
        return out
