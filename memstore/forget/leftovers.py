"""What a clone still holds of records forgotten elsewhere (a plain git merge can bring a forgotten
line, marker or quoting summary back): found, hidden from reads, and removed in one commit.

A clone that still has the record drops it as soon as it sees the tombstone: the index never
indexes a tombstoned id, and `ct sync` (or the next `ct forget`, or `ct fsck --repair`) removes it
from that clone's files.
"""

from __future__ import annotations


from ..format import log as logfmt
from ..format import tombstones as tombfmt
from ..index import queries
from ..results import ForgetResult
from .remove import TOMBSTONES, _forget_in_tree, forget, forgotten_ids, tombstones


# ----- a clone that still has tombstoned records ----------------------------------------------------


def stale_records(store) -> list[dict]:
    """Records in this clone's day logs (or tree) that a tombstone says were forgotten elsewhere."""
    gone = tombstones(store.root)
    if not gone:
        return []
    out = []
    needles = [rid.encode("utf-8") for rid in gone]
    for day, path in sorted(logfmt.list_days(store.root).items()):
        data = path.read_bytes()
        if any(n in data for n in needles):
            out += tombfmt.lines_named(data, gone)
    return out


def leftovers(store) -> list[dict]:
    """What a git merge kept of forgotten records besides day-log lines: a forgotten marker's line
    and stale topic summaries (a pack keeps nothing readable: see `_remove_vectors`). One entry
    each, text None, for `forget`."""
    from ..format import markers as markfmt

    gone = forgotten_ids(store.root)
    if not gone:
        return []
    out: dict[str, dict] = {}
    # No pack holds anything of them that can be read: their keys left with their lines.
    for line in markfmt.forgotten_lines(store.root):
        note = "a forgotten marker, which a git merge brought back to markers.jsonl"
        out.setdefault(
            line["id"], {"id": line["id"], "ts": line.get("ts") or "", "text": None, "note": note}
        )
    return list(out.values()) + stale_quotes(store)


def stale_quotes(store) -> list[dict]:
    """Topics whose summary quotes an opening sentence none of their records holds: a clone that
    named the topic before it learnt of a forget, merged in. The quote is treated as forgotten
    text, so `forget` names the topic again from the records it holds."""
    from ..format import tree as treefmt

    tree = treefmt.read(store.root)
    out = []
    for tid, quote in sorted(stale_topics(store, tree).items()):
        note = f"topic {tree.topics[tid].name!r}: its summary quotes a record it no longer holds (forgotten on another clone)"
        out.append({"id": f"topic:{tid}", "ts": "", "text": None, "quote": quote, "note": note})
    return out


def stale_topics(store, tree) -> dict[str, str]:
    """{topic id: the quote} for each topic of `tree` whose summary opens with a sentence no record
    of it (or of its sub-topics) holds; empty when nothing was ever forgotten."""
    from ..tree.naming import scrubbed

    if not forgotten_ids(store.root):
        return {}
    index = store.index()
    out = {}
    for tid, topic in tree.topics.items():
        _, sep, opener = (topic.summary or "").partition("; opens with: ")
        quote = " ".join(opener.rstrip("…").split())
        if not sep or len(quote) < 12:
            continue
        flat = quote.casefold()
        if not any(
            flat in " ".join(text.split()).casefold()
            for rec in _topic_records(index, tree, tid)
            for text in scrubbed([str(rec["text"])])  # summaries are made from scrubbed text
        ):
            out[tid] = quote
    return out


def _topic_records(index, tree, tid: str):
    for t in [tid, *sorted(tree.descendants(tid))]:
        for rid in tree.topics[t].records if t in tree.topics else []:
            for row in queries.rowids_of(index, record_id=rid):
                yield index.record_at(row)


def without_stale_summaries(store, tree):
    """The tree as reads show it: a summary quoting a forgotten record (merged in from a clone that
    had not learnt of the forget) is made again from the records the topic holds, until a forget
    or `ct sync` commits that."""
    from ..tree.naming import offline_summary

    index = None
    for tid in stale_topics(store, tree):
        index = index or store.index(update=False)
        recs = list(_topic_records(index, tree, tid))
        tree.topics[tid].summary = (
            offline_summary(
                [str(r["text"]) for r in recs], [str(r.get("role") or "") for r in recs]
            )
            if recs
            else ""
        )
    return tree


def apply_tombstones(store) -> ForgetResult:
    """Remove from this clone's files what another clone forgot (one commit; none when clean)."""
    store.index()  # a merge may have rewritten day logs: topic names are rebuilt through fresh offsets
    stale = stale_records(store)
    stale += [r for r in leftovers(store) if r["id"] not in {s["id"] for s in stale}]
    if not stale:
        from ..format import tree as treefmt

        ids = forgotten_ids(store.root)
        in_tree = ids & (set(treefmt.read(store.root).topic_of()) if ids else set())
        if not in_tree:
            return ForgetResult()
        with store.transaction(
            f"Apply {len(in_tree)} tombstones from {TOMBSTONES} to the topic tree"
        ) as tx:
            paths = _forget_in_tree(store, in_tree, [])
            tx.stage(paths)
        return ForgetResult(commit=tx.commit, paths=paths)
    n = len(stale)
    return forget(
        store,
        stale,
        message=f"Apply {n} tombstone{'s' if n != 1 else ''} from {TOMBSTONES} (forgotten on another clone)",
    )
