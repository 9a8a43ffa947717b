"""What the web page reads: search hits, days, a day's lines, the topic tree, history and one commit's
reorganization, each built from the public `Store` verbs and masked for secrets before it leaves.

Every function takes the store and a dict of checked parameters and returns a JSON-able dict.
"""

from __future__ import annotations

import re

from ...errors import UsageError
from .mask import mask, mask_fields

RECORD_FIELDS = ("id", "ts", "day", "role", "actor", "type", "session", "model", "text", "author")
HISTORY_MAX = 500
_REV = re.compile(r"[0-9a-fA-F]{4,40}|HEAD(?:[~^]\d{0,4})*")


def record_view(rec: dict, titles: dict | None = None) -> dict:
    """The fields of a record the page shows, its text and names masked; `session_title` is its
    conversation's title from `titles` (Store.session_titles), None when there is none."""
    out = {k: rec.get(k) for k in RECORD_FIELDS}
    src = rec.get("source")
    if isinstance(src, dict):
        out["source"] = {k: src.get(k) for k in ("path", "chunk") if k in src}
    elif isinstance(src, str):
        out["source"] = src
    out["session_title"] = (titles or {}).get(rec.get("session"))
    return mask_fields(out)


def private(st, p) -> dict:
    """Every private record this user reads, for review before `Share` (ct share -n): its text
    and names masked, and the kinds of secret the scanner flags in it."""
    plan = st.share((), dry_run=True)
    return {
        "records": [
            {
                **mask_fields({k: r.get(k) for k in ("id", "ts", "day", "role", "actor", "text")}),
                "secrets": [f["kind"] for f in r["secrets"]],
            }
            for r in plan.records
        ]
    }


def _titles(st, records) -> dict[str, str]:
    return st.session_titles([r.get("session") for r in records])


def overview(st, p) -> dict:
    """What the page needs first: the store's name and totals, current records per day, every marker."""
    counts = st.days()
    return {
        "store": st.root.name,
        "timezone": st.config.timezone,
        "today": _today(st),
        "records": sum(d["records"] for d in counts),
        "day_count": len(counts),
        "first_day": counts[0]["day"] if counts else None,
        "last_day": counts[-1]["day"] if counts else None,
        "days": counts,
        "markers": [_marker_view(m, st.tz) for m in st.markers()],
    }


def _today(st) -> str:
    """Today on the store's clock, the day the page opens on."""
    import datetime as dt

    return dt.datetime.now(st.tz).strftime("%Y-%m-%d")


def search(st, p) -> dict:
    """Ranked hits with their dates, scores and score parts (`ct search --explain`)."""
    hits = st.search(
        p["query"],
        k=p["k"],
        mode=p["mode"],
        since=p["since"] or None,
        until=p["until"] or None,
        role=p["role"] or None,
        session=p["session"] or None,
        now=p["now"] or None,
    )
    out = []
    titles = _titles(st, [h.record for h in hits])
    for h in hits:
        j = h.to_json(explain=True)
        view = record_view({**j, "day": h.day}, titles)
        parts = dict(j.get("parts", {}))
        if isinstance(parts.get("question"), dict):  # the question shown under its answer
            parts["question"] = {**parts["question"], "text": mask(parts["question"]["text"])}
        view.update(score=j["score"], parts=parts)
        out.append(view)
    return {"query": mask(p["query"]), "mode": p["mode"], "hits": out}


def _marker_view(m, tz) -> dict:
    from ...format.timeutil import from_iso

    j = m.to_json()
    j["day"] = from_iso(m.ts).astimezone(tz).strftime("%Y-%m-%d")
    if m.closed_at:
        j["closed_day"] = from_iso(m.closed_at).astimezone(tz).strftime("%Y-%m-%d")
    return mask_fields(j)


def day(st, p) -> dict:
    """One day's lines verbatim in time order, with the markers opened or closed that day on top."""
    d = p["day"]
    recs = st.day(d)
    marks = [
        m
        for m in (_marker_view(m, st.tz) for m in st.markers())
        if d in (m["day"], m.get("closed_day"))
    ]
    titles = _titles(st, recs)
    return {"day": d, "records": [record_view(r, titles) for r in recs], "markers": marks}


def _flat(tree) -> list[dict]:
    """Topics in display order, each with its parent, depth, own record count and the count of
    records under it (its own and every sub-topic's: a group of topics shows what it holds)."""
    from ...tree.render import subtree_counts

    under = subtree_counts(tree)
    return [
        mask_fields(
            {
                "id": t.id,
                "name": t.name,
                "summary": t.summary,
                "parent": t.parent,
                "depth": depth,
                "records": len(t.records),
                "under": under[t.id],
                "created": t.created,
                "last_active": t.last_active,
                "current": t.id == tree.current,
            }
        )
        for depth, t in tree.walk()
    ]


def tree(st, p) -> dict:
    """The topic tree, and the topics that left it (merged, archived, regrouped) with where they went."""
    t = st.tree()
    unnamed = any(
        not g.get("name") for g in t.gone.values()
    )  # format 1 kept no names in its tombstones
    names = {
        **(_gone_names(st, t) if unnamed else {}),
        **{tid: g["name"] for tid, g in t.gone.items() if g.get("name")},
    }
    gone = []
    for tid, g in sorted(t.gone.items(), key=lambda kv: (kv[1].get("at") or "", kv[0])):
        into = t.resolve(g.get("into")) if g.get("into") else None
        gone.append(
            mask_fields(
                {
                    "id": tid,
                    "name": names.get(tid),
                    "why": g.get("why"),
                    "at": g.get("at"),
                    "into": g.get("into"),
                    "now_in": into,
                    "into_name": t.topics[into].name if into in t.topics else None,
                }
            )
        )
    return {
        "topics": _flat(t),
        "current": t.current,
        "archived_records": len(t.archived),
        "gone": gone,
    }


def _gone_names(st, t) -> dict[str, str]:
    """Names of topics that left the tree, read from tree.json just before the commit that removed them.

    A tombstone records when the topic left; the first commit at or after that time removed it, so
    its parent commit still holds the topic. Only those few versions of the tree are read.
    """
    commits = [c for c in st.history(max_count=HISTORY_MAX) if c["counts"]["tree"]]
    if not commits:
        return {}
    from ...format.timeutil import from_iso

    want: dict[str, list[str]] = {}
    for tid, g in t.gone.items():
        at = g.get("at")
        try:
            when = from_iso(at) if at else None
        except ValueError:
            when = None
        later = [
            c for c in commits if when is None or from_iso(c["date"]) >= when.replace(microsecond=0)
        ]
        if later:
            want.setdefault(later[-1]["sha"], []).append(
                tid
            )  # history is newest first: the last is the earliest
    names: dict[str, str] = {}
    for sha, tids in want.items():
        try:
            old = st.tree(f"{sha}^")
        except UsageError:
            continue
        names.update({tid: old.topics[tid].name for tid in tids if tid in old.topics})
    return names


def topic(st, p) -> dict:
    """One topic's records (a page of them, in time order), or where a merged or archived topic went."""
    t = st.tree()
    tid = p["id"]
    if tid not in t.topics:
        g = t.gone.get(tid)
        if g is None:
            raise UsageError(f"no topic {tid!r} in the topic tree")
        into = t.resolve(g.get("into")) if g.get("into") else None
        return {
            "id": tid,
            "gone": g.get("why"),
            "now_in": into,
            "into_name": mask(t.topics[into].name) if into in t.topics else None,
            "records": [],
            "total": 0,
        }
    top = t.topics[tid]
    every = top.records
    if p.get("under"):  # the topic's own records and every sub-topic's, in time order
        under = [r for d in [tid, *sorted(t.descendants(tid))] for r in t.topics[d].records]
        every = [r["id"] for r in st.records(under)]
    ids = every[p["offset"] : p["offset"] + p["limit"]]
    recs = st.records(ids)
    titles = _titles(st, recs)
    return {
        **mask_fields({"id": tid, "name": top.name, "summary": top.summary}),
        "total": len(every),
        "offset": p["offset"],
        "records": [record_view(r, titles) for r in recs],
    }


def history(st, p) -> dict:
    """The store's git log as memory history, newest first."""
    out = []
    for c in st.history(max_count=min(p["n"], HISTORY_MAX)):
        v = mask_fields(c)
        v["reorganize"] = c["subject"].startswith("Reorganize")
        out.append(v)
    return {"commits": out}


def commit(st, p) -> dict:
    """One commit's topic changes (the analysis of `ct diff REV^ REV`) and the tree before and after it."""
    rev = p["rev"]
    if not _REV.fullmatch(rev):
        raise UsageError(
            f"a revision is a commit id (4 to 40 hex digits) or HEAD, HEAD~N, not {rev!r}"
        )
    st.tree(rev)  # UsageError names a bad revision
    d = st.diff(f"{rev}^", rev)  # the first commit's parent is the empty tree
    before, after = d.old_tree, d.new_tree
    sha = st.commit_id(rev)  # HEAD and HEAD~N as well as an id or its prefix
    info = next((c for c in st.history(max_count=HISTORY_MAX) if c["sha"] == sha), None)
    return {
        "rev": rev,
        "commit": mask_fields(info) if info else None,
        "diff": {
            k: (
                [mask_fields(x) for x in v]
                if isinstance(v, list) and v and isinstance(v[0], dict)
                else v
            )
            for k, v in d.to_json().items()
        },
        "lines": [mask(x) for x in d.lines()],
        "empty": d.empty,
        "before": _flat(before),
        "after": _flat(after),
    }
