"""gc: consolidate every day that has more than one pack into one deterministic pack, in one commit."""

from __future__ import annotations

from dataclasses import dataclass, field

from .format import pack as packfmt


@dataclass
class GcResult:
    """Days consolidated and pack counts before and after (planned only, with `dry_run`)."""

    days: list[str] = field(default_factory=list)
    damaged: list[str] = field(default_factory=list)  # days left alone: a pack there is damaged (see fsck)
    packs_before: int = 0
    packs_after: int = 0
    commit: str | None = None
    dry_run: bool = False

    def message(self) -> str:
        return (f"Consolidate {self.packs_before} packs into {self.packs_after} "
                f"for {len(self.days)} day{'s' if len(self.days) != 1 else ''}")

    def to_json(self) -> dict:
        return {"days": self.days, "damaged": self.damaged, "packs_before": self.packs_before, "packs_after": self.packs_after,
                "commit": self.commit, "dry_run": self.dry_run}


def gc(store, dry_run: bool = False) -> GcResult:
    """Consolidate each day with two or more packs (see `pack.consolidate`); one commit, none if nothing to do.

    The new pack depends only on the entries it holds, so two clones that consolidate the same
    day write the same file, and their histories merge with plain git.
    """
    from .store import consolidate_day

    res = GcResult(dry_run=dry_run)
    with store.transaction(res.message, allow_old_format=dry_run) as tx:
        for day, folder in packfmt.all_pack_days(store.root).items():
            n = len(packfmt.pack_files(folder))
            if n < 2:
                continue
            if dry_run:
                res.days.append(day)
                res.packs_before += n
                res.packs_after += 1
                continue
            before, after = consolidate_day(store, day)
            if after == before:
                res.damaged.append(day)
                continue
            res.days.append(day)
            res.packs_before += before
            res.packs_after += after
            tx.stage(store.rel(folder))
    res.commit = tx.commit
    return res
