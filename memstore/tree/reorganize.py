"""Reorganize: merge related frozen topics (TRACE's four axioms) and archive trivial turns, in one commit.

The axioms: (1) the older topic absorbs the newer; (2) only frozen topics — off the live path of the
current topic and its ancestors — take part; (3) their similarity must reach the threshold; (4) a
veto confirms the pair is about the same thing: the LLM when one is configured, otherwise an
offline check that the two topics share at least two key terms, so that "Python the snake" and
"Python the language", which share only the word python, stay apart.

Unlike TRACE, a merge moves the newer topic's records (by id) into the older one, refreshes its
summary and times, re-hangs its children and leaves a tombstone; retrieval reads topics from the
tree as it is now, so a merged topic's lines stay findable. Trivial turns (under 20 words on both
sides) leave the topic structure only: the day logs and the search index keep every line.
"""

from __future__ import annotations

import time

import numpy as np

from ..format import tree as treefmt
from ..format.timeutil import now_utc, to_iso
from . import naming
from .assign import max_children
from .fanout import rebalance, tidy_groups
from .topicdata import RecordData, topic_vector
from ..results import ReorgResult  # noqa: F401  (re-exported)

TRIVIAL_WORDS = 20
# TRACE asked the LLM about every pair (O(n²) calls); past this many calls the offline veto decides.
MAX_LLM_VETOES = 200
# TRACE's rule alone (both sides under 20 words) would archive "Sarah is allergic to peanuts." /
# "Noted." — a short fact is not small talk. So the user's side must also carry almost no
# content words ("ok thanks", "hi!", "sounds good").
TRIVIAL_CONTENT_WORDS = 1
MIN_SHARED_TERMS = 2


def offline_veto(terms_a: set[str], terms_b: set[str]) -> tuple[bool, str]:
    """(related, reason): related when the topics share at least two key terms."""
    shared = sorted(terms_a & terms_b)
    if len(shared) >= MIN_SHARED_TERMS:
        return True, "shared key terms: " + ", ".join(shared[:5])
    if shared:
        return False, f"only one shared key term ({shared[0]}): same word, different subjects"
    return False, "no shared key terms"


def llm_veto(llm, a, b) -> tuple[bool, str] | None:
    """TRACE's relatedness question; None when the call fails or the reply has no usable verdict."""
    from ..adapters.llm import as_bool

    data = llm.json(
        [
            {
                "role": "system",
                "content": "You decide whether two conversation topics belong together.",
            },
            {
                "role": "user",
                "content": (
                    f"Topic A: {a.name}\nSummary: {a.summary[:200]}\n\nTopic B: {b.name}\nSummary: {b.summary[:200]}\n\n"
                    "They were pre-filtered by embedding similarity. Are they about the same subject, so that they "
                    "should be merged into one topic? Say no when the domains differ (e.g. a snake vs a programming "
                    'language). Reply with JSON: {"related": true|false, "reason": "<10 words"}'
                ),
            },
        ]
    )
    if data is None:
        return None
    related = as_bool(data.get("related"))
    if related is None:
        return None
    reason = data.get("reason")
    if not reason:
        return related, "LLM verdict"
    return related, naming.scrubbed([" ".join(naming.storable(str(reason)).split())[:120]])[0]


def _exchanges(tree, data: RecordData, tid: str) -> list[list[dict]]:
    out: list[list[dict]] = []
    for rid in tree.topics[tid].records:
        rec = data.record(rid)
        if rec is None:
            continue
        if rec.get("role") == "user" or not out:
            out.append([rec])
        else:
            out[-1].append(rec)
    return out


def _trivial(exchange: list[dict]) -> bool:
    users = [r for r in exchange if r.get("role") == "user"]
    others = [r for r in exchange if r.get("role") != "user"]
    if not users or not others:
        return False
    if any(len(r.get("text", "").split()) >= TRIVIAL_WORDS for r in users + others):
        return False
    return all(len(naming.words(r.get("text", ""))) <= TRIVIAL_CONTENT_WORDS for r in users)


def _absorb(tree, data: RecordData, older: str, newer: str, at: str) -> int:
    o, n = tree.topics[older], tree.topics[newer]
    moved = [r for r in n.records if r not in set(o.records)]
    o.records = sorted(o.records + moved, key=lambda r: (data.time(r), r))
    o.created = min(o.created, n.created)
    o.last_active = max(o.last_active, n.last_active)
    for kid in tree.children(newer):
        kid.parent = older
    del tree.topics[newer]
    tree.gone[newer] = {"into": older, "why": "merged", "at": at}
    return len(moved)


def _refresh(tree, data: RecordData, tids, llm) -> None:
    for tid in sorted(set(tids) & set(tree.topics)):
        t = tree.topics[tid]
        if not t.records:
            continue
        texts, roles = data.texts(t.records)
        summary = naming.llm_summary(llm, t.name, texts, roles) if llm is not None else None
        t.summary = summary or naming.offline_summary(texts, roles, data.rarity)


def reorganize(
    store,
    threshold: float = 0.55,
    prune_trivial: bool = False,
    dry_run: bool = False,
    offline: bool = False,
) -> ReorgResult:
    """Run the merge pass (and optionally trivial-turn archiving); one commit unless `dry_run`."""
    from ..adapters.llm import get_llm

    started = time.monotonic()
    llm = None if offline else get_llm(store.root)
    res = ReorgResult(
        threshold=threshold, veto="llm" if llm is not None else "offline", dry_run=dry_run
    )
    with store.transaction(res.message, allow_old_format=dry_run) as tx:
        store.index()
        tree = treefmt.read(store.root)
        data = RecordData(store)
        at = to_iso(now_utc())
        live = tree.live_path()
        frozen = sorted(
            (t for t in tree.topics.values() if t.id not in live and t.records),
            key=lambda t: (t.created, t.id),
        )
        res.candidates = len(frozen)
        cache: dict = {}
        vecs = [topic_vector(tree, data, t.id, cache) for t in frozen]
        ok = [i for i, v in enumerate(vecs) if v is not None]
        res.skipped += len(frozen) - len(ok)
        pairs = []
        if len(ok) >= 2:
            mat = np.stack([vecs[i] for i in ok])
            sims = mat @ mat.T
            xs, ys = np.nonzero(
                np.triu(sims >= threshold, k=1)
            )  # all pairs at once, not O(n²) Python
            pairs = [
                (float(sims[x, y]), frozen[ok[x]].id, frozen[ok[y]].id) for x, y in zip(xs, ys)
            ]
        pairs.sort(key=lambda p: (-p[0], p[1], p[2]))
        res.pairs = len(pairs)
        terms: dict[str, set[str]] = {}

        def term_set(tid):
            if tid not in terms:
                terms[tid] = naming.term_set(
                    data.texts(tree.topics[tid].records, limit=40)[0], 12, data.rarity
                )
            return terms[tid]

        changed: set[str] = set()
        for sim, a, b in pairs:
            if a not in tree.topics or b not in tree.topics:
                res.skipped += 1
                continue
            if a in tree.ancestry(b) or b in tree.ancestry(a):
                res.skipped += 1  # merging a topic into its own ancestor or descendant is no merge
                continue
            ta, tb = tree.topics[a], tree.topics[b]
            verdict, by = None, "offline"
            if llm is not None and llm.calls < MAX_LLM_VETOES:
                verdict = llm_veto(llm, ta, tb)
                by = "llm" if verdict is not None else "offline (llm failed)"
            if verdict is None:
                verdict = offline_veto(term_set(a), term_set(b))
            related, reason = verdict
            if not related:
                res.vetoed.append(
                    {
                        "a": a,
                        "b": b,
                        "a_name": ta.name,
                        "b_name": tb.name,
                        "similarity": round(sim, 4),
                        "by": by,
                        "reason": reason,
                    }
                )
                continue
            older, newer = sorted((ta, tb), key=lambda t: (t.created, t.id))
            entry = {
                "older": older.id,
                "newer": newer.id,
                "older_name": older.name,
                "newer_name": newer.name,
                "similarity": round(sim, 4),
                "by": by,
                "reason": reason,
            }
            entry["records"] = _absorb(tree, data, older.id, newer.id, at)
            terms[older.id] = term_set(older.id) | terms.pop(newer.id, set())
            changed.add(older.id)
            res.merges.append(entry)
        if prune_trivial:
            _prune(tree, data, live, res, at)
        _refresh(tree, data, changed, llm)
        res.dissolved = tidy_groups(tree, at)
        res.regrouped = rebalance(tree, data, max_children(store), llm)
        if llm is not None:
            res.llm_calls, res.llm_failures = llm.calls, llm.failures
        res.seconds = time.monotonic() - started
        if res.changed and not dry_run:
            tx.stage(treefmt.write(store.root, tree))
    res.commit = tx.commit
    return res


def _prune(tree, data: RecordData, live: set[str], res: ReorgResult, at: str) -> None:
    """Archive trivial exchanges of frozen leaf topics; a topic left empty is archived too."""
    cmap = tree.children_map()
    for tid in sorted(t for t in tree.topics if t not in live and not cmap.get(t)):
        t = tree.topics[tid]
        if not t.records:
            continue
        drop = [r["id"] for ex in _exchanges(tree, data, tid) if _trivial(ex) for r in ex]
        if not drop:
            continue
        gone = set(drop)
        t.records = [r for r in t.records if r not in gone]
        tree.archived = sorted(set(tree.archived) | gone)
        res.archived += drop
        if not t.records:
            del tree.topics[tid]
            tree.gone[tid] = {"into": None, "why": "archived", "at": at}
            res.emptied.append(tid)
