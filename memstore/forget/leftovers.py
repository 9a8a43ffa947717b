"""What a clone still holds of records forgotten elsewhere (a plain git merge can bring a forgotten
line, marker or quoting summary back): found, hidden from reads, and removed in one commit.

A clone that still has the record drops it as soon as it sees the tombstone: the index never
indexes a tombstoned id, and `ct sync` (or the next `ct forget`, or `ct fsck --repair`) removes it
from that clone's files.
"""

from __future__ import annotations

import re
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
        data = logfmt.read_plain(path)
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
    text, so `forget` names the topic again from the records it holds.

    An earlier summary that a later rename replaced counts too: replay never shows it, but its
    words are in the shard, so `forget` writes the topic's current summary over them."""
    from ..format import tree as treefmt

    tree = treefmt.read(store.root)
    current = stale_topics(store, tree)
    earlier = replaced_quotes(store, tree)
    out = []
    for tid in sorted(set(current) | set(earlier)):
        topic = tree.topics.get(tid)
        name = repr(topic.name) if topic else f"{tid} (no longer in the tree)"
        if tid in current:
            note = f"topic {name}: its summary quotes a record it no longer holds (forgotten on another clone)"
        else:
            note = (
                f"topic {name}: an earlier summary of it, which a later rename replaced, still in "
                f"{treefmt.DIR}/, quotes a record no longer in the store (forgotten on another clone)"
            )
        quotes = [current[tid]] if tid in current else []
        quotes += [q for q in earlier.get(tid, []) if q not in quotes]
        out.append({"id": f"topic:{tid}", "ts": "", "text": None, "quotes": quotes, "note": note})
    return out


def _opener(summary) -> str:
    """The sentence a summary quotes ("…; opens with: <it>…"), spaces folded; "" when too short."""
    _, sep, opener = (summary if isinstance(summary, str) else "").partition("; opens with: ")
    quote = " ".join(opener.rstrip("…").split())
    return quote if sep and len(quote) >= 12 else ""


def stale_topics(store, tree) -> dict[str, str]:
    """{topic id: the quote} for each topic of `tree` whose summary opens with a sentence no record
    of it (or of its sub-topics) holds; empty when nothing was ever forgotten."""
    from ..tree.naming import scrubbed

    if not forgotten_ids(store.root):
        return {}
    index = store.index()
    out = {}
    for tid, topic in tree.topics.items():
        quote = _opener(topic.summary)
        if not quote:
            continue
        flat = quote.casefold()
        if not any(
            flat in " ".join(text.split()).casefold()
            for rec in _topic_records(index, tree, tid)
            for text in scrubbed([str(rec["text"])])  # summaries are made from scrubbed text
        ):
            out[tid] = quote
    return out


def replaced_quotes(store, tree) -> dict[str, list[str]]:
    """{topic id: quotes} from the summaries replay no longer shows (a later line replaced them, or
    the topic left the tree) that quote a sentence no record of the store holds: what a clone that
    named the topic before it learnt of a forget left in the shards."""
    from ..format import treelog

    if not forgotten_ids(store.root):
        return {}
    ops, _ = treelog.read_ops(store.root)
    seen: dict[str, bool] = {}
    out: dict[str, list[str]] = {}
    index = None
    for op in ops:
        d = op.data
        if d.get("op") not in ("topic", "set") or "summary" not in d:
            continue
        tid, quote = d.get("topic"), _opener(d["summary"])
        topic = tree.topics.get(tid)
        if not quote or (topic is not None and d["summary"] == topic.summary):
            continue  # the current summary: stale_topics looks at that one
        if quote not in seen:
            index = index or store.index()
            seen[quote] = _held_anywhere(index, quote)
        if not seen[quote] and quote not in out.get(tid, []):
            out.setdefault(tid, []).append(quote)
    return out


_REDACTED = re.compile(r"\[REDACTED [^\]]*\]")


def _held_anywhere(index, quote: str) -> bool:
    """Does any record of the store hold the sentence `quote` (as summaries quote it: scrubbed)?"""
    from ..index.tokenize import query_terms
    from ..tree.naming import scrubbed

    words = _REDACTED.sub(" ", quote).split()
    if len(words) > 1:
        words = words[:-1]  # the quote may stop inside its last word
    terms = query_terms(" ".join(words), drop_stop_words=False)[:12]
    flat = quote.casefold()
    rows = queries.fts_rowids(index, " AND ".join(terms)) if terms else None
    if rows is None:
        return True  # nothing to look a record up by: say nothing rather than guess
    for row in rows:
        rec = index.record_at(row)
        if any(flat in " ".join(t.split()).casefold() for t in scrubbed([str(rec["text"])])):
            return True
    return False


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
    """Remove from this clone's files what another clone forgot (one commit; none when clean).

    A store with no tombstone has nothing to apply, and returns before bringing the index up to
    date: `ct sync` runs this between its merge and its push, and a short round is what lets a
    sync win its push while other clones push too."""
    if not forgotten_ids(store.root) and not tombstones(store.root):
        return ForgetResult()
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
