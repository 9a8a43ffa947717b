"""The result types of the Python API, in one numpy-free module: `from memstore import Hit` (or any
result type) loads no numpy, no model and no git. The modules that produce them import them from here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import FORMAT_VERSION
from .format.timeutil import to_iso
from .format.markers import Marker  # noqa: F401  (a result type: mark, done, markers)
from .format.topics import Tree


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
    author: list[str] = field(default_factory=list)  # a name or an email, any case
    include_hidden: bool = False
    exclude_types: list[str] = field(default_factory=list)
    scope: str | None = None  # "private" | "shared": records of that scope only

    # As SQL: memstore/index/queries.py (filters_where).

    @property
    def narrows_rows(self) -> bool:
        return (
            bool(
                self.role
                or self.actor
                or self.type
                or self.session
                or self.author
                or self.exclude_types
            )
            or self.scope is not None
        )


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

    @property
    def author(self) -> str | None:
        """Who put the record into memory; None for a record written before authors (unknown)."""
        return self.record.get("author")

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
            "scope": self.record.get("scope") or "shared",
            "author": self.author,
        }
        if self.store is not None:
            out["store"] = self.store
        if self.record.get("meta"):
            out["meta"] = self.record["meta"]
        if isinstance(
            self.parts.get("question"), dict
        ):  # the question this hit answers, shown under it
            out["question"] = self.parts["question"]
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
            else {
                "start": to_iso(w.start),
                "end": to_iso(w.end),
                "granularity": w.granularity,
                "phrase": w.phrase,
            },
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
    sections: dict = field(
        default_factory=lambda: {"markers": [], "topics": [], "recall": [], "recent": []}
    )
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
        return bool(
            self.merges or self.archived or self.emptied or self.regrouped or self.dissolved
        )

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
            "session": None
            if self.session is None
            else {"name": self.session, "lines": self.session_lines},
            "lines": [
                {k: r.get(k) for k in ("id", "ts", "actor", "role", "type", "text", "session")}
                for r in self.lines
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


@dataclass
class ForgetResult:
    """What a forget did (or, with dry_run, would do)."""

    records: list[dict] = field(default_factory=list)
    commit: str | None = None
    paths: list[str] = field(default_factory=list)
    purged: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "forgotten": [r["id"] for r in self.records],
            "commit": self.commit,
            "paths": self.paths,
            "purged_history": self.purged,
            "notes": self.notes,
            "records": [
                {
                    "id": r["id"],
                    "ts": r.get("ts"),
                    "session": r.get("session"),
                    "text": (r.get("text") or "")[:200],
                }
                for r in self.records
            ],
        }


@dataclass
class Report:
    damage: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    records: int = 0
    segments: int = 0
    packs: int = 0
    others_private: int = 0  # private lines of other writers, skipped (an encrypted store)
    repair: object = (
        None  # what `fsck(repair=True)` rolled back first (memstore/repair.py Repair), else None
    )
    unvectored: list[tuple[str, str, str]] = field(
        default_factory=list, repr=False
    )  # (where, day, id)
    notes: list[str] = field(default_factory=list)  # an encrypted store: who changed its recipients
    unchecked: list[str] = field(default_factory=list)  # what no key of this user let fsck check

    @property
    def ok(self) -> bool:
        return not self.damage

    def to_json(self) -> dict:
        out = {
            "ok": self.ok,
            "records": self.records,
            "segments": self.segments,
            "packs": self.packs,
            "others_private": self.others_private,
            "damage": self.damage,
            "warnings": self.warnings,
        }
        if self.notes:
            out["notes"] = self.notes
        if self.unchecked:
            out["unchecked"] = self.unchecked
        return out


@dataclass
class SyncResult:
    remote: str
    branch: str
    upstream: str
    merged: int = 0  # commits that came from the remote
    merge_commit: str | None = None
    fast_forward: bool = False
    pushed: int = 0  # commits the remote did not have
    retries: int = 0  # pushes that lost a race and were tried again after a new merge
    reindexed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "remote": self.remote,
            "branch": self.branch,
            "upstream": self.upstream,
            "merged": self.merged,
            "merge_commit": self.merge_commit,
            "fast_forward": self.fast_forward,
            "pushed": self.pushed,
            "retries": self.retries,
            "reindexed": self.reindexed,
            "notes": self.notes,
        }


@dataclass
class TreeDiff:
    old_label: str
    new_label: str
    added: list[dict] = field(default_factory=list)
    merged: list[dict] = field(default_factory=list)
    archived_topics: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    moved: list[dict] = field(default_factory=list)
    renamed: list[dict] = field(default_factory=list)
    grew: list[dict] = field(default_factory=list)
    archived_records: int = 0
    current: tuple[str | None, str | None] | None = None
    old_tree: Tree | None = field(default=None, repr=False, compare=False)  # the two trees compared
    new_tree: Tree | None = field(default=None, repr=False, compare=False)

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.merged
            or self.archived_topics
            or self.removed
            or self.moved
            or self.renamed
            or self.grew
            or self.archived_records
            or self.current
        )

    def to_json(self) -> dict:
        return {
            "old": self.old_label,
            "new": self.new_label,
            "added": self.added,
            "merged": self.merged,
            "archived_topics": self.archived_topics,
            "removed": self.removed,
            "moved": self.moved,
            "renamed": self.renamed,
            "grew": self.grew,
            "archived_records": self.archived_records,
            "current": list(self.current) if self.current else None,
        }

    def lines(self) -> list[str]:
        out = []
        for m in self.merged:
            then = ""
            if "now_in" in m:
                then = f", since merged into {m['now_in']}" if m["now_in"] else ", since archived"
            out.append(
                f'merged   "{m["name"]}" ({m["id"]}, {m["records"]} turns) into "{m["into_name"]}" ({m["into"]}{then})'
            )
        for a in self.archived_topics:
            out.append(f'archived "{a["name"]}" ({a["id"]}): all {a["records"]} turns were trivial')
        if self.archived_records:
            out.append(
                f"archived {self.archived_records} trivial turn{'s' if self.archived_records != 1 else ''} "
                "(still in the logs and the search index)"
            )
        for m in self.moved:
            out.append(
                f'moved    "{m["name"]}" ({m["id"]}): under "{m["from_name"]}" -> under "{m["to_name"]}"'
            )
        for r in self.renamed:
            out.append(f'renamed  "{r["from"]}" -> "{r["to"]}" ({r["id"]})')
        for a in self.added:
            kind = "group" if a["records"] == 0 else f"{a['records']} turns"
            out.append(f'added    "{a["name"]}" ({a["id"]}, {kind}) under "{a["parent_name"]}"')
        for g in self.grew:
            out.append(f'grew     "{g["name"]}" ({g["id"]}): +{g["added"]} turns')
        for r in self.removed:
            why = f", {r['why']}" if r.get("why") else ""
            out.append(f'removed  "{r["name"]}" ({r["id"]}, {r["records"]} turns{why})')
        if self.current:
            out.append(f"current  {self.current[0]} -> {self.current[1]}")
        return out or ["no topic changes"]


@dataclass
class UpgradeResult:
    """What `ct upgrade` did or would do."""

    already: bool = False
    dry_run: bool = False
    source: int = 1  # the format upgraded from
    days: list = field(default_factory=list)  # memstore/upkeep/upgrade.py's DayPlan, one per day
    segment_files: int = 0
    tree: bool = False
    commit: str | None = None

    @property
    def records(self) -> int:
        return sum(d.records for d in self.days)

    @property
    def vectors(self) -> int:
        return sum(len(d.writer.records) for d in self.days)

    @property
    def blobs(self) -> int:
        return sum(len(d.writer.blobs) for d in self.days)

    def to_json(self) -> dict:
        return {
            "already": self.already,
            "dry_run": self.dry_run,
            "from_format": self.source,
            "days": len(self.days),
            "records": self.records,
            "vectors": self.vectors,
            "blobs": self.blobs,
            "packs": sum(1 for d in self.days if d.writer),
            "segment_files_removed": self.segment_files,
            "tree": self.tree,
            "commit": self.commit,
        }

    def lines(self) -> list[str]:
        if self.already:
            return [f"already format {FORMAT_VERSION}: nothing to do"]
        verb = "would" if self.dry_run else "did"
        packs = sum(1 for d in self.days if d.writer)
        if self.source == 2:
            out = [
                f"{verb} rewrite {len(self.days)} day logs: {self.records} records gain their key (vkey)",
                f"{verb} seal {self.vectors} vectors (bit for bit) and {self.blobs} originals into {packs} day "
                f"packs, replacing {sum(len(d.old_packs) for d in self.days)} format-2 packs",
            ]
        else:
            out = [
                f"{verb} rewrite {len(self.days)} day logs: {self.records} records lose their seg field "
                "and gain their key (vkey)",
                f"{verb} seal {self.vectors} vectors (bit for bit) and {self.blobs} originals into {packs} day packs",
                f"{verb} remove segments/ ({self.segment_files} files)",
            ]
            if self.tree:
                out.append(f"{verb} turn tree.json into the tree log (tree/)")
            out.append(f"{verb} rewrite .gitattributes (no merge driver)")
        out.append(f"{verb} set format_version = {FORMAT_VERSION}")
        if self.commit:
            out.append(f"commit {self.commit[:10]}")
        return out


@dataclass
class Repair:
    """What a rollback or repair did (counts), what it left alone, and where the rolled-back lines went."""

    crashed: dict | None = None
    records: int = 0  # complete log lines that were never committed
    other_lines: int = (
        0  # complete lines of the topic tree's shards or markers.jsonl never committed
    )
    partial_lines: int = 0  # unfinished last lines
    segments: int = 0  # uncommitted segment files removed (format 1)
    packs: int = 0  # uncommitted packs removed (format 2)
    temp_files: int = 0
    git_locks: list[str] = field(default_factory=list)
    restored: list[str] = field(
        default_factory=list
    )  # tracked files put back to their committed version
    untouched: list[str] = field(
        default_factory=list
    )  # uncommitted changes we did not make and left alone
    backup: str | None = None
    index: dict | None = None
    forgotten: int = 0  # what a git merge brought back of forgotten records, removed again ...
    forgotten_commit: str | None = None  # ... in this commit
    upgrade: str | None = None  # a killed `ct upgrade`, undone whole: what it was
    unmarked: list[str] = field(default_factory=list)  # files a merge left conflict markers in ...
    unmarked_commit: str | None = None  # ... which this commit removed

    @property
    def changed(self) -> bool:
        return bool(
            self.upgrade
            or self.records
            or self.other_lines
            or self.partial_lines
            or self.segments
            or self.packs
            or self.temp_files
            or self.git_locks
            or self.restored
        )

    def notes(self) -> list[str]:
        out = self._rollback_notes()
        if self.unmarked_commit:
            out.append(
                f"Removed the git conflict markers a merge left in {', '.join(self.unmarked)} "
                f"(commit {self.unmarked_commit[:10]})."
            )
        if self.forgotten_commit:
            out.append(
                f"Removed again what a git merge brought back of {self.forgotten} forgotten records "
                f"(commit {self.forgotten_commit[:10]})."
            )
        return out

    def _rollback_notes(self) -> list[str]:
        if self.upgrade:
            return [
                f'Rolled back {self.upgrade}: the store is as committed (its older format); "ct upgrade" upgrades it again.'
            ]
        if not self.changed:
            return []
        who = f" (pid {self.crashed['pid']})" if self.crashed and self.crashed.get("pid") else ""
        parts = [f"{self.records} uncommitted records"] if self.records else []
        if self.other_lines:
            parts.append(f"{self.other_lines} uncommitted lines of the topic tree or markers")
        if self.partial_lines:
            parts.append(f"{self.partial_lines} unfinished lines")
        if self.segments:
            parts.append(f"{self.segments} orphan segments")
        if self.packs:
            parts.append(f"{self.packs} uncommitted packs")
        if self.temp_files:
            parts.append(f"{self.temp_files} temp files")
        if self.git_locks:
            parts.append(f"stale git locks ({', '.join(self.git_locks)})")
        if self.restored:
            parts.append(f"{len(self.restored)} files restored from HEAD")
        what = (
            f"an interrupted write{who}"
            if self.crashed
            else "uncommitted changes (no write was running)"
        )
        out = [f"Rolled back {what}: " + ", ".join(parts) + "."]
        if self.backup:
            out.append(f"The rolled-back lines are kept in {self.backup}.")
        return out

    def to_json(self) -> dict:
        return {
            "crashed": self.crashed,
            "records": self.records,
            "other_lines": self.other_lines,
            "partial_lines": self.partial_lines,
            "segments": self.segments,
            "packs": self.packs,
            "temp_files": self.temp_files,
            "git_locks": self.git_locks,
            "restored": self.restored,
            "untouched": self.untouched,
            "backup": self.backup,
            "index": self.index,
            "forgotten": self.forgotten,
            "forgotten_commit": self.forgotten_commit,
            "upgrade": self.upgrade,
            "unmarked": self.unmarked,
            "unmarked_commit": self.unmarked_commit,
        }


@dataclass
class Stats:
    """What `Store.stat()` returns: the main counts as fields, everything `ct stat --json` prints in `data`."""

    records: int
    current_records: int
    days: int
    first_day: str | None
    last_day: str | None
    sessions: int
    segments: int  # format-1 segment files (0 in format 2)
    by_type: dict
    by_role: dict
    embedder: dict
    packs: int = 0
    data: dict = field(default_factory=dict, repr=False)

    def to_json(self) -> dict:
        return dict(self.data)


# Every result type the Python API returns: `from memstore import <name>` loads it from here.
RESULT_TYPES = (
    "WriteResult",
    "Hit",
    "Hits",
    "Filters",
    "RecallResult",
    "RecallHit",
    "Marker",
    "Where",
    "Report",
    "Context",
    "Tree",
    "TreeDiff",
    "ReorgResult",
    "SyncResult",
    "Stats",
    "ForgetResult",
    "UpgradeResult",
    "Repair",
    "ShareResult",
)


@dataclass
class ShareResult:
    """What `ct share` shows and did: each private record to be shared (its text, with the
    secrets the scanner flags), the ids that were shared already, and the one commit."""

    records: list[dict] = field(default_factory=list)  # id, day, ts, role, actor, text, secrets
    already: list[str] = field(default_factory=list)
    dry_run: bool = False
    commit: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def secrets(self) -> int:
        return sum(len(r["secrets"]) for r in self.records)

    def to_json(self) -> dict:
        return {
            "records": self.records,
            "already_shared": self.already,
            "secrets": self.secrets,
            "dry_run": self.dry_run,
            "shared": 0 if self.dry_run or not self.commit else len(self.records),
            "commit": self.commit,
            "notes": self.notes,
        }
