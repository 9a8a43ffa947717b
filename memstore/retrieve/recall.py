"""Recall: a question with a time phrase becomes a window, and the window's verbatim lines are ranked against the rest.

One entry point, `recall(store, question)`. The time phrase picks the window (timephrase.py); the
words that remain rank the lines inside it by the same hybrid relevance as `ct search` (literal
words and meaning), best first; with no words left, the whole window is listed in time order. A
window that holds lines never answers with nothing: when no line in it matches the words, its
lines still come back ranked by closeness to the question, labelled as matched by the window only,
followed by the nearest word matches outside it, labelled as such. The answer always says which of
these happened (its `level`) and flags hits that only resemble the question.
"""

from __future__ import annotations

import datetime as dt
import re

from ..format.timeutil import UTC, from_iso, now_utc, parse_ts, to_iso
from ..index import queries
from ..index.tokenize import query_terms
from ..text import ALNUM as _WORD
from ..text import STOP_WORDS
from .search import Filters, Hit, about_the_user, hydrate, search
from ..results import RecallHit, RecallResult  # noqa: F401  (re-exported)

# Levels: how the answer was found (the `level` of a RecallResult).
IN_WINDOW = "in_window"  # keyword matches inside the window
WHOLE_WINDOW = "whole_window"  # no keywords: every line of the window, in order
WINDOW_ONLY = (
    "window_only"  # the window holds lines but none matched the words: them, ranked by closeness
)
OUTSIDE_WINDOW = "outside_window"  # the window is empty: the nearest matches outside it
ALL_TIME = "all_time"  # no time phrase: ranked matches over all time
RECENT = "recent"  # neither a time phrase nor keywords: the latest lines
NOTHING = "nothing"  # nothing matched anywhere

# Cosine bands for hits found only by meaning. Above STRONG a line is kept as a match; between WEAK
# and STRONG it is kept but flagged low-confidence; below WEAK it is dropped, because a vector
# search always returns *something* and a window's nearest neighbour is not an answer.
STRONG = 0.5
WEAK = 0.3
WINDOW_LIMIT = 200  # lines listed for a whole window (at least k)
OUTSIDE_EXTRA = (
    3  # word matches from outside a window shown after its lines when none inside matched
)
TIME_ORDERED = (WHOLE_WINDOW, OUTSIDE_WINDOW, RECENT)

# Conversational filler that a question carries but a memory line need not contain.
FILLER = frozenset(
    """happened happen happening talk talked talking discuss discussed discussing discussion
    mention mentioned chat chatted conversation conversations remind recall remember anything something
    stuff things thing we'd we've i'd i've ok okay please hey again ask asked asking write wrote written
    type typed told""".split()
)
# Japanese question words and verbs of saying: a stem like 話 (話した) or 何 says nothing about the topic.
JA_FILLER = frozenset("何 誰 話 言 聞 思 私 僕 俺 君 どこ いつ どう なぜ".split())
# "what did I ask / say": the user's own lines are the likelier answer; "what did you suggest": the assistant's.
_USER_SPEECH = re.compile(
    r"\b(?:i|i've|i'd)\s+(?:ever\s+)?(?:ask|asked|say|said|tell|told|mention|mentioned|write|wrote|"
    r"type|typed|share|shared|want|wanted|need|needed)\b|私が|僕が",
    re.IGNORECASE,
)
_BOT_SPEECH = re.compile(
    r"\byou\s+(?:ever\s+)?(?:say|said|tell|told|answer|answered|suggest|suggested|reply|replied|"
    r"recommend|recommended|propose|proposed|write|wrote)\b|(?:assistant|bot)\s+(?:say|said)\b",
    re.IGNORECASE,
)
_ASKING = re.compile(r"\b(?:ask|asked|asking|question|questions)\b|聞い|質問", re.IGNORECASE)
_KANA = re.compile(r"[\u3040-\u309f]+")  # hiragana: Japanese particles and inflections
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")


def content_words(keywords: str) -> str:
    """The words worth searching for: no stop words, no conversational filler, no Japanese particles."""
    out: list[str] = []
    for w in _WORD.findall(keywords):
        if w.lower() in STOP_WORDS or w.lower() in FILLER:
            continue
        if _CJK.search(w) and _KANA.search(w):
            # 予算について話した → 予算: split at hiragana; keep runs of two or more characters, and
            # a single kanji followed by kana (the stem of a verb: 決めた → 決, which finds 決定).
            parts = []
            for m in re.finditer(r"[^\u3040-\u309f]+", w):
                p = m.group(0)
                if p in JA_FILLER or (
                    len(p) == 1 and not (m.end() < len(w) and _KANA.match(w[m.end()]))
                ):
                    continue
                parts.append(p)
            out += parts
        else:
            out.append(w)
    seen: set[str] = set()
    return " ".join(w for w in out if not (w.lower() in seen or seen.add(w.lower())))


def speaker_hint(question: str) -> str | None:
    """The role a question asks about: "what did I ask" → user, "what did you suggest" → assistant."""
    if _USER_SPEECH.search(question):
        return "user"
    if _BOT_SPEECH.search(question):
        return "assistant"
    return None


def _now(now) -> dt.datetime:
    return now_utc() if now is None else now.astimezone(UTC)


def recall(
    store,
    question: str,
    now=None,
    k: int = 10,
    around: int = 0,
    docs: bool = False,
    author: list[str] | None = None,
    update_index: bool = True,
) -> RecallResult:
    """Answer `question` with verbatim lines in time order; see the module docstring for the levels.

    `now` (datetime or ISO; naive means the store's timezone) anchors relative phrases, `k` caps the
    ranked hits, `around` adds that many neighbouring lines of the same session to each hit,
    `docs` lets document chunks into the answer, and `author` keeps only lines those writers put
    into memory (a name or an email, any case).
    """
    from ..errors import UsageError
    from .timephrase import parse_time_query

    if not question or not question.strip():
        raise UsageError(
            'recall needs a question, e.g. ct recall "what did we say yesterday about the budget"'
        )
    if isinstance(now, str):
        now = parse_ts(now, store.tz)
    elif isinstance(now, dt.datetime) and now.tzinfo is None:
        now = now.replace(
            tzinfo=store.tz
        )  # a naive time is on the store's wall clock, as everywhere
    ref = _now(now)
    tq = parse_time_query(question, ref, store.tz)
    words = content_words(tq.keywords)
    index = store.index(update=update_index)
    res = RecallResult(question, to_iso(ref), tq.window, words, tq.occurrence, NOTHING)
    base = Filters(exclude_types=[] if docs else ["doc"], author=list(author or []))
    ctx = _Ctx(store, index, k, docs, base, meaning=tq.keywords)
    speaker, asking = speaker_hint(question), bool(_ASKING.search(question))

    if tq.window is not None:
        w = tq.window
        since, until = w.start.timestamp(), w.end.timestamp()
        res.window_lines = ctx.count(since, until)
        inside = Filters(
            since=since, until=until, exclude_types=base.exclude_types, author=base.author
        )
        if w.start > ref:
            res.notes.append(
                "That window lies in the future; nothing can have been said in it yet."
            )
        elif res.window_lines == 0:
            res.notes.append(
                f"Nothing on record in {_describe(w, store.tz)} (the phrase was understood; the window is empty)."
            )
        if not words:
            res.level = WHOLE_WINDOW
            res.hits = ctx.listing(since, until, max(k, WINDOW_LIMIT))
            if res.window_lines and res.window_lines > len(res.hits):
                res.notes.append(
                    f"Showing the first {len(res.hits)} of {res.window_lines} lines in the window; "
                    'a narrower phrase ("yesterday evening") or keywords show fewer.'
                )
            if speaker and any(h.hit.role == speaker for h in res.hits):
                who = "your own lines" if speaker == "user" else "the assistant's lines"
                res.notes.append(
                    f"The question asks what {'you' if speaker == 'user' else 'the assistant'} "
                    f"{'asked' if asking else 'said'}: {who}{' that ask something' if asking else ''} "
                    "come first, each group in time order."
                )
        else:
            found = ctx.ranked(words, inside, pool_k=_pool(k, tq.occurrence))
            if found:
                res.level = IN_WINDOW
                res.hits = _choose(found, tq.occurrence, k, res.notes, store.tz)
                if not any("exact" in h.flags for h in res.hits):
                    res.notes.append(
                        f"No line in the window contains the words {words!r}; these lines match by meaning only."
                    )
            elif res.window_lines:
                res.level = WINDOW_ONLY
                res.hits = ctx.closest(words, inside, k, speaker)
                res.notes.append(
                    f"No line in {_describe(w, store.tz)} contains {words!r} or clearly means it: "
                    f"the window matched, the words did not. Its {res.window_lines} line(s) are "
                    "ranked by closeness to the question, best first."
                )
                outside = [
                    h
                    for h in ctx.ranked(words, base, pool_k=max(50, 5 * k))
                    if not (since <= from_iso(h.hit.ts).timestamp() < until) and "exact" in h.flags
                ]
                if outside:
                    outside.sort(key=lambda h: _distance(h, since, until))
                    for h in outside[:OUTSIDE_EXTRA]:
                        h.flags.append("outside_window")
                        res.hits.append(h)
                    res.notes.append(
                        f"After them, the {min(len(outside), OUTSIDE_EXTRA)} nearest lines OUTSIDE "
                        f"the window that contain {words!r}, labelled as such."
                    )
            else:
                outside = [
                    h
                    for h in ctx.ranked(words, base, pool_k=max(50, 5 * k))
                    if not (since <= from_iso(h.hit.ts).timestamp() < until)
                ]
                if outside:
                    res.level = OUTSIDE_WINDOW
                    outside.sort(
                        key=lambda h: ("low_confidence" in h.flags, _distance(h, since, until))
                    )
                    res.hits = (
                        outside[:k]
                        if tq.occurrence is None
                        else _choose(outside, tq.occurrence, k, res.notes, store.tz)
                    )
                    for h in res.hits:
                        h.flags.append("outside_window")
                    res.notes.append(
                        f"The {len(res.hits)} nearest matches OUTSIDE the window follow, labelled as such."
                    )
                else:
                    res.notes.append(f"Nothing matched {words!r} anywhere else either.")
    elif words:
        found = ctx.ranked(words, base, pool_k=_pool(k, tq.occurrence))
        if found:
            res.level = ALL_TIME
            res.hits = _choose(found, tq.occurrence, k, res.notes, store.tz)
        else:
            res.notes.append(
                f"Nothing on record matched {words!r}. Absence is reported as absence: "
                "try another phrasing or a time phrase."
            )
    else:
        res.level = RECENT
        res.hits = ctx.latest(k)
        res.notes.append("No time phrase and no keywords: showing the latest lines.")
    if not res.hits and res.level != NOTHING and res.level != WHOLE_WINDOW:
        res.level = NOTHING
    # Ranked answers come best first; listings, occurrences and far-off matches in time order.
    in_time_order = res.level in TIME_ORDERED or tq.occurrence in ("first", "last")
    if res.level == WHOLE_WINDOW and speaker:
        res.hits.sort(
            key=lambda h: (
                h.hit.role != speaker,
                asking and not _asks(h.hit.text),
                h.hit.ts,
                h.hit.rowid,
            )
        )
    elif in_time_order:
        res.hits.sort(key=lambda h: (h.hit.ts, h.hit.rowid))
    if around > 0 and res.hits:
        res.hits = ctx.with_context(res.hits, around, merge=in_time_order)
    if tq.occurrence == "then":
        res.notes.append(
            '"Back then" names no date here: matches are from all of the time in scope.'
        )
    return res


def _asks(text: str) -> bool:
    return "?" in text or "？" in text


def _pool(k: int, occurrence: str | None) -> int:
    # Which occurrence came first is a question about every match, not only the best k.
    return max(k, 200) if occurrence in ("first", "last") else k


def _describe(w, tz) -> str:
    a, b = w.start.astimezone(tz), w.end.astimezone(tz)
    end = b.strftime("%H:%M") if a.date() == b.date() else b.strftime("%Y-%m-%d %H:%M")
    return f"{w.phrase!r} ({a.strftime('%Y-%m-%d %H:%M')} to {end})"


def _distance(h: RecallHit, since: float, until: float) -> float:
    t = from_iso(h.hit.ts).timestamp()
    return since - t if t < since else t - until


def _choose(
    found: list[RecallHit], occurrence: str | None, k: int, notes: list[str], tz
) -> list[RecallHit]:
    """The best `k` hits, or for "the first/last time" the earliest/latest occurrence and its day."""
    if occurrence not in ("first", "last"):
        return found[:k]
    # The surest evidence decides which occurrence it was: all words > some words > meaning only.
    for tier in ("all_terms", "exact", None):
        pool = [h for h in found if tier is None or tier in h.flags]
        if pool:
            break
    pick = min if occurrence == "first" else max
    chosen = pick(pool, key=lambda h: (h.hit.ts, h.hit.rowid))
    day = from_iso(chosen.hit.ts).astimezone(tz).date()
    same = [
        h
        for h in pool
        if h.hit.session == chosen.hit.session and from_iso(h.hit.ts).astimezone(tz).date() == day
    ]
    same.sort(key=lambda h: (h.hit.ts, h.hit.rowid), reverse=occurrence == "last")
    others = len(pool) - len(same)
    notes.append(
        f"The {occurrence} time: {day.isoformat()}"
        + (f" ({others} matching lines on other days or sessions not shown)." if others else ".")
    )
    return same[:k]


class _Ctx:
    """What the steps of one recall share: the store, its index and the row filters.

    Rows listed from the index pass `base`; without `docs`, memstore's own supersession notes for
    re-ingested documents are left out too (`own_notes`): they are not conversation either."""

    def __init__(self, store, index, k: int, docs: bool, base: Filters, meaning: str = ""):
        self.store, self.index, self.k, self.docs, self.base = store, index, k, docs, base
        self.meaning = meaning
        self._qvec = None

    def qvec(self, words: str):
        """The query vector: the question without its time phrase, as said (a sentence embeds
        better than its bare content words), falling back to the words."""
        if self._qvec is None:
            self._qvec = self.store.embedder.embed_query(self.meaning.strip() or words)
        return self._qvec

    def about_user(self, words: str) -> bool:
        """Whether the question (not its bare content words, which lose "I" and "my") asks about the user's life."""
        return about_the_user(self.meaning.strip() or words)

    def _conversational(self, h: Hit) -> bool:
        return self.docs or not (h.type == "meta" and h.actor == "memstore")

    def count(self, since: float, until: float) -> int:
        return queries.count_in_window(self.index, self.base, since, until, own_notes=self.docs)

    def _hits(self, rowids: list[int]) -> list[RecallHit]:
        return [RecallHit(hydrate(self.store, self.index, rid, 0.0, {})) for rid in rowids]

    def listing(self, since: float, until: float, limit: int) -> list[RecallHit]:
        return self._hits(
            queries.rowids_in_window(
                self.index, self.base, since, until, limit, own_notes=self.docs
            )
        )

    def latest(self, n: int) -> list[RecallHit]:
        hits = self._hits(queries.latest_rowids(self.index, self.base, n, own_notes=self.docs))
        return hits[::-1]

    def ranked(self, words: str, filters: Filters, pool_k: int | None = None) -> list[RecallHit]:
        """Search hits judged by their evidence; weak meaning-only hits are dropped, the rest flagged."""
        hits = search(
            self.store,
            words,
            k=pool_k or self.k,
            mode="hybrid",
            filters=filters,
            qvec=self.qvec(words),
            about_user=self.about_user(words),
        )
        kept = []
        for h in hits:
            if not self._conversational(h):
                continue
            cos = h.parts.get("vector", {}).get("score")
            flags = []
            if "exact" in h.parts:
                flags.append("exact")
            if cos is not None:
                flags.append("vector")
            if "exact" not in h.parts:
                if cos is None or cos < WEAK:
                    continue
                if cos < STRONG:
                    flags.append("low_confidence")
            kept.append(RecallHit(h, flags))
        self._mark_all_terms(words, kept)
        return kept

    def closest(self, words: str, filters: Filters, k: int, speaker: str | None) -> list[RecallHit]:
        """The window's lines by hybrid relevance, none dropped: the answer when no line matched.

        With a speaker hint, that role's lines go first (stable, so relevance orders each group)."""
        hits = [
            h
            for h in search(
                self.store,
                words,
                k=max(k, 50),
                mode="hybrid",
                filters=filters,
                qvec=self.qvec(words),
                about_user=self.about_user(words),
            )
            if self._conversational(h)
        ]
        if speaker:
            hits.sort(key=lambda h: h.role != speaker)
        return [
            RecallHit(h, ["window_only"] + (["vector"] if "vector" in h.parts else []))
            for h in hits[:k]
        ]

    def _mark_all_terms(self, words: str, kept: list[RecallHit]) -> None:
        """Flag exact hits that contain every word (FTS AND), the surest evidence of a match."""
        terms = query_terms(words)
        exact = [h for h in kept if "exact" in h.flags]
        if not exact:
            return
        if len(terms) <= 1:
            for h in exact:
                h.flags.append("all_terms")
            return
        full = set(
            queries.fts_rowids(self.index, " AND ".join(terms), among=[h.hit.rowid for h in exact])
        )
        for h in exact:
            if h.hit.rowid in full:
                h.flags.append("all_terms")

    def with_context(self, hits: list[RecallHit], n: int, merge: bool) -> list[RecallHit]:
        """Each hit plus `n` lines before and after it in the same session (by time), once each.

        `merge`: one list in time order; otherwise each hit keeps its rank, its context around it."""
        seen = {h.hit.rowid for h in hits}
        groups: list[list[RecallHit]] = []
        for h in hits:
            group = [h]
            ts = from_iso(h.hit.ts).timestamp()
            near = queries.session_neighbours(
                self.index, self.base, h.hit.session, h.hit.rowid, ts, n, own_notes=self.docs
            )
            for rid in near:
                if rid not in seen:
                    seen.add(rid)
                    group.append(
                        RecallHit(hydrate(self.store, self.index, rid, 0.0, {}), ["context"])
                    )
            group.sort(key=lambda x: (x.hit.ts, x.hit.rowid))
            groups.append(group)
        out = [x for g in groups for x in g]
        if merge:
            out.sort(key=lambda x: (x.hit.ts, x.hit.rowid))
        return out
