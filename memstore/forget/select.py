"""Choosing what to forget: records by id, by every word of a text, by session, by time range or by
the commit that added them."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from ..index import queries
from .leftovers import leftovers, stale_records
from .purge import added_by
from .remove import forgotten_ids


# ----- choosing records ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Criteria:
    """What to forget besides ids (`Store.forget`'s keywords); every one given must hold."""

    match: str | None = None  # every word of it in the text
    session: str | None = None
    since: float | None = (
        None  # Unix seconds (the facade reads ISO times and phrases against `now`)
    )
    until: float | None = None
    now: object = None
    commit: str | None = None  # the records this commit added

    def given(self) -> bool:
        return (
            any((self.match, self.session, self.commit))
            or self.since is not None
            or self.until is not None
        )


def select(store, ids=(), criteria: Criteria = Criteria()) -> list[dict]:
    """The records to forget: by id, by every word of `match`, by session, by time range, by the
    commit that added them (ANDed)."""
    c = criteria
    if not (ids or c.given()):
        raise UsageError(
            "say what to forget: record ids, --match QUERY, --session NAME, --commit REV or --since/--until"
        )
    index = store.index()
    chosen: set[int] | None = None

    def narrow(rowids: set[int]) -> None:
        nonlocal chosen
        chosen = rowids if chosen is None else chosen & rowids

    back: list[dict] = []  # forgotten records whose lines a git merge brought back: removed again
    if ids:
        rows = {}
        gone = forgotten_ids(store.root)
        stale = None
        for rid in ids:
            found = queries.rowids_of(index, record_id=rid)
            if not found and rid.startswith(
                "topic:"
            ):  # fsck names a topic whose summary quotes a forgotten record
                stale = (stale_records(store) + leftovers(store)) if stale is None else stale
                again = [r for r in stale if r["id"] == rid][:1]
                if not again:
                    raise UsageError(
                        f"{rid}: no topic summary quotes a forgotten record",
                        "Nothing was forgotten.",
                    )
                back += again
                continue
            if not found and rid not in gone and rid in _tree_ids(store):
                back.append(
                    {"id": rid, "ts": "", "text": None, "session": None}
                )  # git removed its line
                continue
            if not found and rid in gone:
                stale = (stale_records(store) + leftovers(store)) if stale is None else stale
                again = [r for r in stale if r["id"] == rid][:1]
                if again:
                    back += again
                    continue
                raise UsageError(
                    f"record {rid!r} is forgotten already (forgotten.jsonl).",
                    f'To take its text out of git history too: "ct forget --purge-history {rid}".',
                )
            if not found:
                raise UsageError(
                    f"no record with id {rid!r} in {store.root}", "Nothing was forgotten."
                )
            rows[rid] = found
        narrow(
            {r for found in rows.values() for r in found}
        )  # ids named: other filters only narrow them
    if c.session:
        narrow(set(queries.rowids_of(index, session=c.session)))
    if c.commit:
        added = added_by(store, c.commit)
        rows = {r for rid in sorted(added) for r in queries.rowids_of(index, record_id=rid)}
        if not rows:
            raise UsageError(
                f"none of the {len(added)} records commit {c.commit} added is in the store now (forgotten already?)",
                "Nothing was forgotten.",
            )
        narrow(rows)
    if c.since is not None or c.until is not None:
        lo = float("-inf") if c.since is None else float(c.since)
        hi = float("inf") if c.until is None else float(c.until)
        narrow(set(queries.rowids_of(index, ts_range=(lo, hi))))
    if c.match:
        narrow(_matching(store, c.match))
    recs = [index.record_at(r) for r in sorted(chosen or ())] + back
    seen: set[str] = set()
    return [r for r in recs if not (r["id"] in seen or seen.add(r["id"]))]


def _tree_ids(store) -> set[str]:
    """Every record id the topic tree names (a topic's or archived)."""
    from ..format import tree as treefmt

    tree = treefmt.read(store.root)
    return set(tree.topic_of()) | set(tree.archived)


def _matching(store, query: str) -> set[int]:
    """Rows whose text holds every word of the query (case-insensitive): precise, never "nearest"."""
    from ..index.tokenize import match_expression
    from ..text import WORD as _WORD

    words = [w.lower() for w in _WORD.findall(query)]
    expr = match_expression(query)
    if not words or not expr:
        raise UsageError(f"--match {query!r} has no words to look for")
    index = store.index(update=False)
    out = set()
    for rowid in queries.fts_rowids(index, expr):
        text = index.record_at(rowid)["text"].lower()
        if all(w in text for w in words):
            out.add(rowid)
    return out
