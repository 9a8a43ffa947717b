"""Answers before their questions: a hit that only asks something ranks below the reply that answered it.

A question asked before is worded like the query that asks it again, so it wins the ranking while
saying nothing ("What did we decide about the grocery budget again?" above the decision). When a
ranked hit is a turn that only asks — every sentence of it a question, short — and the next turn of
its conversation, from the other side, answers it, the answer takes the question's place and score
and the question follows right after it (the pair is one exchange: `parts["answers"]` and
`parts["answered_by"]` link them). An answer ranked lower takes the question's slot instead, the
question shown under it (`parts["question"]`: its id, time, role and text), so no other hit is
pushed out and the answer still ranks above its question. A turn that states something and then
asks keeps its place: what it states may be the memory sought. The reply must pass the search's
own filters.
"""

from __future__ import annotations

import re

from ..format.record import CONVERSATION_TYPES
from ..index import queries
from ..results import Filters

# Longer turns carry context of their own (what the user did, had, planned) even when they end in a
# question, so only short ones count as bare questions.
QUESTION_MAX_CHARS = 240
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_ASKS = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|did|do|does|is|are|was|were|can|could|"
    r"should|would|will|shall|have|has|any)\b",
    re.IGNORECASE,
)
# Trailing decoration after the question mark: quotes, brackets, emoji, spaces.
_TAIL = re.compile(r"[\s\"'”’)\]»\U0001F300-\U0001FAFF]+$")


def is_question(text: str) -> bool:
    """Whether a turn only asks: short, with every sentence a question (ending in '?', or a
    one-sentence turn opening with a question word)."""
    text = _TAIL.sub("", (text or "").strip())
    if not text or len(text) > QUESTION_MAX_CHARS:
        return False
    sentences = [s.strip() for s in _SENTENCE.findall(text) if s.strip(" .!?")]
    if not sentences:
        return False
    if all(s.endswith("?") for s in sentences):
        return True
    return len(sentences) == 1 and bool(_ASKS.match(sentences[0]))


def answer_of(index, rowid: int, rec: dict, filters: Filters) -> int | None:
    """The row answering the question at `rowid`: the next turn of its conversation, when the other
    side spoke it, it passes `filters`, and it is not itself a bare question."""
    session = rec.get("session")
    if session is None:
        return None
    following = queries.next_in_session(index, session, rowid)
    if following is None:
        return None
    nxt_rowid, role, rtype = following
    if role == rec.get("role") or rtype not in CONVERSATION_TYPES:
        return None
    if not queries.passes(index, nxt_rowid, filters):
        return None
    if is_question(index.record_at(nxt_rowid).get("text", "")):
        return None
    return nxt_rowid


EXCHANGE_CHARS = 1000  # of the turn shown with its hit; the record itself holds it all


def _exchange(rec: dict) -> dict:
    """A turn as it comes with a hit: enough to read, and its id to open it whole."""
    text = str(rec.get("text") or "")
    cut = text if len(text) <= EXCHANGE_CHARS else text[: EXCHANGE_CHARS - 1] + "…"
    return {"id": str(rec["id"]), "ts": rec.get("ts"), "role": rec.get("role"), "text": cut}


def answers_first(
    index, ranked: list[tuple[int, float, dict]], k: int, filters: Filters
) -> list[tuple[int, float, dict]]:
    """`ranked` (rowid, score, parts), best first, with the answer of each bare question among the
    first `k` ranked above it (see the module docstring).

    An answer among the first `k` moves into its question's place, the question right after it
    (`parts["answers"]` / `parts["answered_by"]`). An answer ranked below `k`, or not ranked at
    all, takes the question's slot as the hit, with the question shown under it
    (`parts["question"]`: its id, time, role and text): the pair is one exchange, and bringing the
    answer in as a hit beside its question would push out the `k`-th hit, which may be the one
    sought (on LongMemEval that cost a preference question its evidence). So the first `k` stay
    `k` hits and every other hit keeps its place. Rows after the first `k` keep their order, less
    any answer moved up."""
    head = ranked[:k]
    in_head = {r for r, _, _ in head}
    parts_of = {r: p for r, _, p in ranked}
    out, placed = [], set()
    for rowid, score, parts in head:
        if rowid in placed:
            continue
        rec = index.record_at(rowid)
        answer = None
        if rec.get("type") in CONVERSATION_TYPES and is_question(rec.get("text", "")):
            answer = answer_of(index, rowid, rec, filters)
        if answer is None or answer in placed:
            out.append((rowid, score, parts))
            placed.add(rowid)
            continue
        question = str(rec["id"])
        if answer in in_head:
            out.append((answer, score, {**parts_of[answer], "answers": question}))
            out.append((rowid, score, {**parts, "answered_by": queries.id_of(index, answer)}))
        else:
            exchange = {"answers": question, "question": _exchange(rec)}
            out.append((answer, score, {**parts_of.get(answer, {}), **exchange}))
        placed.update((answer, rowid))
    return out + [t for t in ranked[k:] if t[0] not in placed]
