"""gc: consolidate the small packs of every day into one deterministic pack per day, in one commit."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..format import pack as packfmt


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
        return (
            f"Consolidate {self.packs_before} packs into {self.packs_after} "
            f"for {len(self.days)} day{'s' if len(self.days) != 1 else ''}"
        )

    def to_json(self) -> dict:
        return {
            "days": self.days,
            "damaged": self.damaged,
            "packs_before": self.packs_before,
            "packs_after": self.packs_after,
            "commit": self.commit,
            "dry_run": self.dry_run,
        }


def gc(store, dry_run: bool = False) -> GcResult:
    """Consolidate each day's small packs (see `store.consolidate_day`); one commit, none if nothing to do.

    The new pack depends only on the entries it holds, so two clones that consolidate the same
    packs write the same file; and no merged pack is over 45% of the new one, so git never
    sees a rename and two clones' different consolidations merge with plain git.
    """
    from ..store import consolidate_day

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
    res.commit = tx.commit
    return res
