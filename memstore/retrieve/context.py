"""Context synthesis: markers, multi-path topic context, verbatim recalled lines and recent turns, in a budget.

TRACE's prompt synthesiser had no budget and dumped the ancestry of up to 50 hits. Here every
piece is a candidate with a priority, pieces are taken best-first while they fit, and the final
text is counted again with the store's own tokenizer, so `--budget N` is a guarantee, not a hint.
Recalled lines are shown oldest first, so a later correction ("actually, Sarah can eat nuts now")
reads as what it is: the newer fact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..format import tree as treefmt
from ..format.timeutil import from_iso
from ..index import queries
from ..tree.topicdata import WORD_WEIGHT, RecordData, normalise, thresholds
from ..results import Context  # noqa: F401  (re-exported)

MAX_PATHS = 3
PATH_CANDIDATES = 50


@dataclass
class Piece:
    section: str  # markers | topics | recall | recent
    priority: float  # lower is taken first
    order: float  # position inside its section
    text: str
    data: dict
    tokens: int = 0


HEADERS = {
    "markers": "## Where we are (open markers)",
    "topics": "## Related topics (best-matching paths through the topic tree)",
    "recall": "## Recalled lines (verbatim, oldest first; later lines are newer facts)",
    "recent": "## Recent turns",
}
SECTION_ORDER = ("markers", "topics", "recall", "recent")


def _line(ts: str, role: str, text: str, tz) -> str:
    when = from_iso(ts).astimezone(tz).strftime("%Y-%m-%d %H:%M")
    return f"[{when}] {role}: {' '.join(text.split())}"


def query_terms(query: str) -> list[str]:
    from ..text import content_words as words

    seen: list[str] = []
    for w in words(query):
        w = w.lower().removesuffix("'s").removesuffix("’s")
        if w not in seen:
            seen.append(w)
    return seen


def lexical_topics(store, tree, terms: list[str]) -> dict[str, set[str]]:
    """topic id -> the query terms some record of it contains (FTS, porter-stemmed, one term at a time)."""
    index = store.index(update=False)
    topic_of = tree.topic_of()
    out: dict[str, set[str]] = {}
    for term in terms:
        for rid in queries.visible_ids_matching(index, '"' + term.replace('"', "") + '"', 2000):
            tid = topic_of.get(rid)
            if tid is not None:
                out.setdefault(tid, set()).add(term)
    return out


def score_topics(
    store, tree, data: RecordData, qvec: np.ndarray, query: str = "", min_meaning: float = -1.0
) -> list[tuple[float, str]]:
    """(score, topic id), best first, for topics that share a content word with the query or whose
    meaning score reaches `min_meaning`.

    Meaning: the best single record's cosine and the topic centroid's. Words: the share of the
    query's content words that occur in the topic. Both matter: a cosine alone ranks a topic that
    shares filler words with the query as high as one that shares the names in it.
    """
    rows = data.rows()
    vecs = data.matrix()
    archived = set(tree.archived)
    terms = query_terms(query)
    lex = lexical_topics(store, tree, terms) if terms else {}
    out = []
    for t in tree.topics.values():
        vrows = [
            rows[r][1]
            for r in t.records
            if r in rows and rows[r][1] is not None and rows[r][1] >= 0 and r not in archived
        ]
        if not vrows:
            continue
        sub = np.asarray(vecs[np.asarray(vrows, dtype=np.int64)], np.float32)
        sims = sub @ qvec
        centroid = normalise(sub.mean(axis=0))
        meaning = 0.6 * float(sims.max()) + 0.4 * float(centroid @ qvec)
        words = len(lex.get(t.id, ())) / len(terms) if terms else 0.0
        if not words and meaning < min_meaning:
            continue
        out.append((0.5 * meaning + 0.5 * words, t.id))
    out.sort(key=lambda p: (-p[0], p[1]))
    return out


def topic_pieces(store, tree, data, qvec, th, query) -> list[Piece]:
    scored = score_topics(store, tree, data, qvec, query, th["topic"])[:PATH_CANDIDATES]
    chosen: list[tuple[float, list[str]]] = []
    covered: set[str] = set()
    for s, tid in scored:
        if tid in covered:
            continue
        path = tree.ancestry(tid)
        chosen.append((s, path))
        covered.update(path)
        if len(chosen) >= MAX_PATHS:
            break
    pieces, detailed = [], set()
    # Groups made only to bound fan-out carry no meaning of their own: the paths show real topics.
    chosen = [(s, [p for p in path if tree.topics[p].records] or path[-1:]) for s, path in chosen]
    for i, (s, path) in enumerate(chosen, 1):
        names = " → ".join(tree.topics[p].name for p in path)
        info = {
            "score": round(s, 4),
            "path": [
                {"id": p, "name": tree.topics[p].name, "summary": tree.topics[p].summary}
                for p in path
            ],
        }
        pieces.append(Piece("topics", 1 + i / 10, i, f"{i}. {names} (match {s:.2f})", info))
    # Ancestry detail for the chosen paths only (TRACE printed every node of 50 paths).
    for i, (s, path) in enumerate(chosen, 1):
        for depth, p in enumerate(reversed(path)):
            if p in detailed or not tree.topics[p].summary:
                continue
            detailed.add(p)
            t = tree.topics[p]
            pieces.append(
                Piece(
                    "topics",
                    3 + i / 10 + depth / 100,
                    i + 0.5 + depth / 100,
                    f"   • {t.name}: {t.summary}",
                    {"detail": p},
                )
            )
    return pieces


def _fold(w: str) -> str:
    from ..tree.naming import _stem

    return _stem(w)


def recall_pieces(store, query: str, qvec, tree, th, k: int, data: RecordData) -> list[Piece]:
    from .search import Filters, search

    hits = search(
        store, query, k=k * 3, mode="hybrid", filters=Filters(exclude_types=["meta"]), qvec=qvec
    )
    archived = set(tree.archived)
    terms = {_fold(t) for t in query_terms(query)}
    # Relevance is judged on the query's content words alone: "should I …" in the query must not
    # pull in every line that also says "should I".
    content = " ".join(query_terms(query))
    cvec = np.asarray(store.embedder.embed_query(content), np.float32) if content else qvec
    keep = []
    for h in hits:
        if h.id in archived:
            continue
        # FTS matches any word, even "s" from "what's": only shared content words count. An
        # answer that took its question's slot is as relevant as the better of the two.
        asked = h.parts.get("question")
        pair = [(h.id, h.text)] + (
            [(asked.get("id"), str(asked.get("text") or ""))] if isinstance(asked, dict) else []
        )
        best = 0.0
        for rid, text in pair:
            shared = len(terms & {_fold(w) for w in query_terms(text)})
            vec = data.vector(rid)
            cos = float(vec @ cvec) if vec is not None else 0.0
            best = max(best, cos + WORD_WEIGHT * min(shared, 2))
        if best < th["recall"]:
            continue
        keep.append(h)
        if len(keep) >= k:
            break
    topic_of = tree.topic_of()
    pieces = []
    for rank, h in enumerate(keep):
        ts = from_iso(h.ts).timestamp()
        data = h.to_json()
        data["topic"] = topic_of.get(h.id)
        who = h.role
        if h.type == "doc" and isinstance(h.source, dict) and h.source.get("path"):
            who = f"document {h.source['path']}"  # a chunk is known by its file, not by a speaker
        pieces.append(Piece("recall", 2 + rank / 100, ts, _line(h.ts, who, h.text, store.tz), data))
        asked = h.parts.get("question")
        if isinstance(asked, dict) and asked.get("id") not in archived:
            # an answer that took its question's slot brings the question along: one exchange,
            # the question first in time, kept or cut right after its answer
            q = {**asked, "topic": topic_of.get(asked.get("id"))}
            line = _line(asked["ts"], asked.get("role") or "", asked["text"], store.tz)
            pieces.append(
                Piece("recall", 2 + rank / 100 + 0.005, from_iso(asked["ts"]).timestamp(), line, q)
            )
    return pieces


def marker_and_recent_pieces(store, recent: int) -> list[Piece]:
    pieces = []
    try:
        from .where import where
    except ImportError:  # markers are optional in older checkouts
        where = None
    w = None
    if where is not None:
        try:
            w = where(store, markers=5, lines=recent)
        except (
            Exception
        ):  # markers are an optional section: a broken markers.jsonl must not cost the context
            w = None
    if w is not None:
        for i, m in enumerate(w.markers):
            when = from_iso(m.ts).astimezone(store.tz).strftime("%Y-%m-%d")
            pieces.append(
                Piece("markers", 0 + i / 100, i, f"- {m.text} (open since {when})", m.to_json())
            )
        lines = w.lines
    else:
        index = store.index(update=False)
        rows = queries.latest_conversation_rowids(index, recent)
        lines = [index.record_at(r) for r in reversed(rows)]
    n = len(lines)
    for i, rec in enumerate(lines):
        pieces.append(
            Piece(
                "recent",
                4 + (n - i) / 100,
                i,
                _line(rec["ts"], rec.get("role", "user"), rec["text"], store.tz),
                {k: rec.get(k) for k in ("id", "ts", "role", "text", "session")},
            )
        )
    return pieces


def _fit(text: str, room: int, count) -> str | None:
    """The longest prefix of `text` (cut at a word, marked with …) that counts ≤ `room` tokens."""
    if room <= 2:
        return None
    words = text.split(" ")
    lo, hi = 1, len(words)
    best = None
    while lo <= hi:
        mid = (lo + hi) // 2
        cand = " ".join(words[:mid]) + " …"
        if count(cand) <= room:
            best, lo = cand, mid + 1
        else:
            hi = mid - 1
    return best


def render(pieces: list[Piece]) -> str:
    out = []
    for sec in SECTION_ORDER:
        part = sorted((p for p in pieces if p.section == sec), key=lambda p: p.order)
        if part:
            out.append(HEADERS[sec])
            out += [p.text for p in part]
    return "\n".join(out)


def pack(pieces: list[Piece], budget: int | None, count) -> tuple[list[Piece], int]:
    """Take pieces best-first while the rendered text stays within `budget` tokens."""
    if budget is None:
        return pieces, 0
    header_cost = {sec: count(h) for sec, h in HEADERS.items()}
    chosen: list[Piece] = []
    used, dropped = 0, 0
    for p in sorted(pieces, key=lambda p: p.priority):
        p.tokens = count(p.text)
        extra = p.tokens + (
            0 if any(c.section == p.section for c in chosen) else header_cost[p.section]
        )
        if (
            used + extra > budget
            and p.section == "recall"
            and not any(c.section == "recall" for c in chosen)
        ):
            # The best recalled line matters most: cut it to fit rather than drop it.
            cut = _fit(p.text, budget - used - header_cost["recall"], count)
            if cut:
                p.text, p.tokens = cut, count(cut)
                p.data["cut"] = True
                extra = p.tokens + header_cost["recall"]
        if used + extra <= budget:
            chosen.append(p)
            used += extra
        else:
            dropped += 1
    # Token counts of parts need not add up exactly for every tokenizer: check the real thing.
    while chosen and count(render(chosen)) > budget:
        chosen.remove(max(chosen, key=lambda p: p.priority))
        dropped += 1
    return chosen, dropped


def build_context(
    store, query: str, budget: int | None = None, k: int = 8, recent: int = 6
) -> Context:
    """The context for `query` (the index is brought up to date first)."""
    from ..forget.leftovers import without_stale_summaries

    store.index()
    tree = without_stale_summaries(store, treefmt.read(store.root))
    th = thresholds(store)
    qvec = np.asarray(store.embedder.embed_query(query), np.float32)
    data = RecordData(store)
    pieces = marker_and_recent_pieces(store, max(0, recent))
    pieces += topic_pieces(store, tree, data, qvec, th, query)
    pieces += recall_pieces(store, query, qvec, tree, th, k, data)
    count = store.embedder.count_tokens
    chosen, dropped = pack(pieces, budget, count)
    ctx = Context(query=query, budget=budget, dropped=dropped)
    ctx.text = render(chosen)
    ctx.tokens = count(ctx.text) if ctx.text else 0
    for p in sorted(chosen, key=lambda p: (SECTION_ORDER.index(p.section), p.order)):
        if p.section == "topics" and "detail" in p.data:
            continue
        ctx.sections[p.section].append(p.data)
    return ctx
