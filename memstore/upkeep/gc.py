"""gc: consolidate the small packs of every day into one deterministic pack per day, and drop the
identical copies of record lines that git merges leave, in one commit."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..format import log as logfmt
from ..format import pack as packfmt
from ..format import safejson


@dataclass
class GcResult:
    """Days consolidated and pack counts before and after (planned only, with `dry_run`)."""

    days: list[str] = field(default_factory=list)
    damaged: list[str] = field(
        default_factory=list
    )  # days left alone: a pack there is damaged (see fsck)
    packs_before: int = 0
    packs_after: int = 0
    duplicates: int = 0  # identical copies of a record's line that a git merge left, dropped
    logs: list[str] = field(default_factory=list)  # the day logs they were dropped from
    commit: str | None = None
    dry_run: bool = False

    def packs(self) -> str:
        """What consolidation does: "9 packs into 3 for 3 days"."""
        return f"{self.packs_before} packs into {self.packs_after} for {len(self.days)} day{'s' if len(self.days) != 1 else ''}"

    def copies(self) -> str:
        """What dropping repeats does: "2 identical copies of record lines that git merged twice"."""
        n = self.duplicates
        return f"{n} identical cop{'ies' if n != 1 else 'y'} of record lines that git merged twice"

    def message(self) -> str:
        parts = [f"Consolidate {self.packs()}"] if self.days or not self.duplicates else []
        if self.duplicates:
            k = len(self.logs)
            parts.append(
                f"{'drop' if parts else 'Drop'} {self.copies()} ({k} day log{'s' if k != 1 else ''})"
            )
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {
            "days": self.days,
            "damaged": self.damaged,
            "packs_before": self.packs_before,
            "packs_after": self.packs_after,
            "duplicates": self.duplicates,
            "logs": self.logs,
            "commit": self.commit,
            "dry_run": self.dry_run,
        }


def gc(store, dry_run: bool = False) -> GcResult:
    """Consolidate each day's small packs (see `store.consolidate_day`); one commit, none if nothing to do.

    The new pack depends only on the entries it holds, so two clones that consolidate the same
    packs write the same file; and no merged pack is over 45% of the new one, so git never
    sees a rename and two clones' different consolidations merge with plain git.
    """
    from ..core import consolidate_day

    res = GcResult(dry_run=dry_run)
    with store.transaction(res.message, allow_old_format=dry_run) as tx:
        for day, folder in packfmt.all_pack_days(store.root).items():
            packs = packfmt.pack_files(folder)
            if len(packs) < 2:
                continue
            if dry_run:
                n = len(packfmt.mergeable(packs))
            else:
                n = consolidate_day(store, day)
                if n is None:
                    res.damaged.append(day)
                    continue
                tx.stage(store.rel(folder))
            if n:
                res.days.append(day)
                res.packs_before += n
                res.packs_after += 1
        for path in logfmt.list_days(store.root).values():
            kept, dropped = _without_repeats(logfmt.read_plain(path))
            kept, shared_again = _without_shared_private(kept)
            dropped += shared_again
            if dropped:
                res.duplicates += dropped
                res.logs.append(store.rel(path))
                if not dry_run:
                    logfmt.rewrite(path, kept)  # journalled: a failed gc puts the file back
                    tx.stage(store.rel(path))
    res.commit = tx.commit
    return res


def _without_repeats(data: bytes) -> tuple[bytes, int]:
    """A day log without the later byte-identical copies of a record's line, and how many went.

    git's union merge keeps an appended line twice when both sides hold it (a cherry-pick, then a
    merge of the original); readers count the first copy only, so dropping the rest changes no
    record. Only whole record lines count: a line that does not parse stays, whatever it repeats.
    """
    lines = data.splitlines(keepends=True)
    if len(set(lines)) == len(lines):
        return data, 0
    seen: set[bytes] = set()
    kept = []
    for raw in lines:
        if raw in seen and raw.endswith(b"\n") and _is_record(raw):
            continue
        seen.add(raw)
        kept.append(raw)
    return b"".join(kept), len(lines) - len(kept)


def _without_shared_private(data: bytes) -> tuple[bytes, int]:
    """A day log without the private copy of a record it also holds shared: what a merge keeps
    when `ct share` replaced a line next to lines another clone appended (readers already count
    the shared copy only)."""
    if b'"scope":"private"' not in data:
        return data, 0
    lines = data.splitlines(keepends=True)
    scopes: dict[str, set[bool]] = {}
    parsed = []
    for raw in lines:
        rec = _record(raw)
        parsed.append(rec)
        if rec is not None:
            scopes.setdefault(rec["id"], set()).add(rec.get("scope") == "private")
    kept = [
        raw
        for raw, rec in zip(lines, parsed)
        if rec is None or rec.get("scope") != "private" or False not in scopes[rec["id"]]
    ]
    return b"".join(kept), len(lines) - len(kept)


def _record(raw: bytes) -> dict | None:
    try:
        rec = safejson.loads(raw)
    except ValueError:  # also nested too deep, a giant number, NaN
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("id"), str) else None


def _is_record(raw: bytes) -> bool:
    try:
        return isinstance(safejson.loads(raw).get("id"), str)
    except (ValueError, AttributeError):
        return False
