"""Topic names and summaries: offline by key-term extraction, by an LLM when one is configured.

Offline names are the topic's most characteristic content words; they are deterministic and cost
nothing, so the write path never waits for a model. An LLM name or summary is used only when the
reply parses into something name-like; anything else falls back to the offline text, so a failed
call can never become a stored name.
"""

from __future__ import annotations

import heapq
import re
from functools import lru_cache

from ..text import CONTENT_STOP_WORDS as STOPWORDS  # noqa: F401  (naming's name for them)
from ..text import content_words as words
from ..text import word_spans  # noqa: F401  (the spans of `words`)


def _stem(w: str) -> str:
    """A light plural fold so "cakes" and "cake" count as one term."""
    w = w.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


@lru_cache(maxsize=8192)
def _terms_of(text: str) -> tuple[tuple[str, str], ...]:
    """(folded term, surface form) per content word. Cached: placing a batch re-reads each topic's
    recent turns once per new turn, and the regex and stemming were most of that time."""
    return tuple(
        (_stem(w), w if not w.isupper() or len(w) <= 4 else w.lower()) for w in words(text)
    )


def key_terms(texts: list[str], k: int = 8, rarity=None) -> list[str]:
    """The `k` most characteristic terms: spread over many turns first, then frequency.

    `rarity(folded_terms) -> {term: weight}` (weights in (0, 1], from the store's index) scales
    each score down for words that occur everywhere in the store ("beginner", "advice"), so names
    and the reorganize veto rest on what sets a topic apart. Terms are returned in their most
    common surface form (so "Sarah" keeps its capital).
    """
    # Plain dicts, not Counters: this runs for every placed turn over its topic's recent turns,
    # and a Counter per term was most of a batch write's tree time.
    tf: dict[str, int] = {}
    df: dict[str, int] = {}
    forms: dict[str, dict[str, int]] = {}
    first: dict[str, int] = {}
    proper: set[str] = set()
    pos = 0
    for text in texts:
        seen = set()
        for s, form in _terms_of(text):
            n = tf.get(s)
            if n is None:
                tf[s] = 1
                forms[s] = {form: 1}
                first[s] = pos
            else:
                tf[s] = n + 1
                f = forms[s]
                f[form] = f.get(form, 0) + 1
            if form[:1].isupper():
                proper.add(s)
            pos += 1
            if s not in seen:
                seen.add(s)
                df[s] = df.get(s, 0) + 1

    base = {s: df[s] * 2 + tf[s] + (1.5 if s in proper else 0) for s in tf}
    # nsmallest(n, ..., key) is sorted(...)[:n], without sorting every term of a long topic.
    ranked = heapq.nsmallest(max(4 * k, 24), tf, key=lambda s: (-base[s], first[s], s))
    if rarity is not None and ranked:
        weight = rarity(ranked)
        ranked = sorted(ranked, key=lambda s: (-base[s] * weight.get(s, 1.0), first[s], s))
    # The most common surface form, the first seen on a tie (what Counter.most_common(1) gives).
    return [max(forms[s].items(), key=lambda kv: kv[1])[0] for s in ranked[:k]]


def term_set(texts: list[str], k: int = 12, rarity=None) -> set[str]:
    """Folded key terms, for comparing two topics (the offline reorganize veto)."""
    return {_stem(t) for t in key_terms(texts, k, rarity)}


# A name or summary needs a text's gist, not all of it: a 50 MB pasted log must not cost minutes.
TEXT_CHARS = 20_000


def scrubbed(texts: list[str]) -> list[str]:
    """Names and summaries are committed derived text: built from texts with their secrets replaced."""
    from ..secrets.policy import scrub

    return [scrub(t[:TEXT_CHARS]) for t in texts]


def offline_name(texts: list[str], rarity=None) -> str:
    texts = scrubbed(texts)
    terms = key_terms(texts, 3, rarity)
    if not terms:
        return "Untitled topic"
    name = ", ".join(terms)
    return name[:1].upper() + name[1:]


def offline_summary(texts: list[str], roles: list[str] | None = None, rarity=None) -> str:
    """ "N turns about a, b, c, d, e; opens with: <the first sentence someone asked>" (≤ 220 chars)."""
    texts = scrubbed(texts)
    terms = key_terms(texts, 6, rarity)
    n = len(texts)
    head = f"{n} turn{'s' if n != 1 else ''} about {', '.join(terms)}" if terms else f"{n} turns"
    opener = ""
    for i, text in enumerate(texts):
        if roles and roles[i] != "user":
            continue
        flat = " ".join(text.split())
        if len(words(flat)) >= 2:
            opener = re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]
            break
    if opener:
        if len(opener) > 110:
            opener = opener[:109].rstrip() + "…"
        return f"{head}; opens with: {opener}"
    return head


# ----- LLM naming (used only when configured; every failure returns None) ---------------------


def clean_name(reply, max_words: int = 6) -> str | None:
    """A usable topic name from an LLM reply, or None when it does not look like one."""
    if not isinstance(reply, str):
        return None
    text = reply.strip().splitlines()[0] if reply.strip() else ""
    text = re.sub(r"^(topic( name)?|name)\s*[:\-]\s*", "", text, flags=re.I).strip(" \"'`*#.")
    if not text or len(text) > 80 or len(text.split()) > max_words:
        return None
    if not re.search(r"\w", text) or text.lower() in {
        "error",
        "none",
        "null",
        "n/a",
        "unknown",
        "topic",
    }:
        return None
    return scrubbed([text])[0]


def clean_summary(reply) -> str | None:
    if not isinstance(reply, str):
        return None
    text = " ".join(reply.split()).strip(" \"'`")
    text = re.sub(r"^summary\s*:\s*", "", text, flags=re.I)
    if len(text) < 8 or text.lower().startswith(("error", "i'm sorry", "i cannot", "as an ai")):
        return None
    return scrubbed([text])[0][:400]


def excerpt(texts: list[str], roles: list[str], limit: int = 1800) -> str:
    """The lines an LLM is shown to name or summarise a topic, scrubbed of secrets like the result."""
    lines, used = [], 0
    for role, text in zip(roles, scrubbed(texts)):
        line = f"- {role}: {' '.join(text.split())[:300]}"
        if used + len(line) > limit:
            break
        lines.append(line)
        used += len(line)
    return "\n".join(lines)


def llm_name(llm, texts: list[str], roles: list[str], parent: str | None = None) -> str | None:
    ctx = f'It is a sub-topic of "{parent}".\n' if parent else ""
    reply = llm.chat(
        [
            {
                "role": "system",
                "content": "You name conversation topics. Reply with the name only.",
            },
            {
                "role": "user",
                "content": f"{ctx}Give a concise topic name (2-5 words) for this conversation "
                f"segment:\n{excerpt(texts, roles)}",
            },
        ],
        temperature=0.3,
        max_tokens=30,
    )
    return clean_name(reply)


def llm_summary(llm, name: str, texts: list[str], roles: list[str]) -> str | None:
    reply = llm.chat(
        [
            {
                "role": "system",
                "content": "You summarise conversation segments in 1-2 plain sentences.",
            },
            {
                "role": "user",
                "content": f'Summarise this conversation segment about "{name}" in 1-2 '
                f"sentences:\n{excerpt(texts, roles)}",
            },
        ],
        temperature=0.3,
        max_tokens=120,
    )
    return clean_summary(reply)
