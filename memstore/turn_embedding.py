"""What vector a record gets: its text embedded whole, or a user turn as the mean of its sentences.

A user's turn often carries several statements, and a later question asks about one of them ("I
got a stand mixer last week" inside four sentences about a party). Embedded whole, the turn's
vector is pulled toward the rest, and MiniLM reads only its first 256 tokens. So a user turn of two
or more sentences (of SENTENCE_MIN_WORDS words or more) is stored as the word-count-weighted mean of
its sentences' vectors, made unit length: every statement counts by its length, none is cut off.
On the LongMemEval_S dev questions this moved turn recall_any@10 from 0.944 to 0.970 and session
recall_all@5 from 0.913 to 0.931, and with hybrid search's weight on cosine moved to 0.8 to match,
to 0.978 and 0.952 (docs/quality.md). Assistant replies, documents and one-sentence
turns are embedded whole, as before; so are turns in scripts without spaces between words (CJK),
whose sentences have no countable words here.
"""

from __future__ import annotations

import re

import numpy as np

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
SENTENCE_MIN_WORDS = 3
# At most this many sentences, from the start, are averaged: a pasted log of hundreds of sentences
# would otherwise cost hundreds of model rows, where the whole turn costs one (272 of the 49,504
# distinct LongMemEval dev user turns have more, 7 gold turns among them; docs/quality.md).
SENTENCE_MAX = 16
BATCH = 512  # records per embedding call (and per progress step)
TWO_CORES_FROM = 8  # batches from which an in-process embedder uses a second core


def sentences(record: dict, text: str) -> list[str]:
    """The sentences a record's vector is averaged over; [] when it is embedded whole."""
    if record.get("role") != "user" or record.get("type", "text") != "text":
        return []
    found = [
        s
        for s in (p.strip() for p in SENTENCE_END.split(text))
        if len(s.split()) >= SENTENCE_MIN_WORDS
    ]
    return found[:SENTENCE_MAX] if len(found) >= 2 else []


def record_vectors(embedder, records: list[dict], texts: list[str], progress=None) -> np.ndarray:
    """One unit vector per record, from its embedding input `texts[i]` (see the module docstring).

    Every piece goes through the content-hash embedding cache in one call per BATCH records. An
    embedder that pools topic placement's content vectors from its own forward pass (MiniLM) is
    given a split turn's content vector as the same weighted mean of its sentences' content vectors
    when it just ran them, so placement runs no second pass and the whole turn is not embedded for
    it (with every sentence cached, placement runs the turn itself, as for any cached record).
    """
    from .adapters.cache import embed_cached

    remember = getattr(embedder, "remember_content", None)
    recall = getattr(embedder, "remembered_content", None)
    out = np.zeros((len(records), embedder.dim), np.float32)

    def batch(start: int, progress=None) -> np.ndarray:
        part = range(start, min(start + BATCH, len(records)))
        rows = out[start : part.stop]
        split = {i: sentences(records[i], texts[i]) for i in part}
        pieces = [p for i in part for p in (split[i] or [texts[i]])]
        vecs = dict(zip(pieces, embed_cached(embedder, pieces, kind="passage"))) if pieces else {}
        for i in part:
            if not split[i]:
                rows[i - start] = vecs[texts[i]]
                continue
            weights = [len(s.split()) for s in split[i]]
            rows[i - start] = weighted_mean([vecs[s] for s in split[i]], weights)
            pooled = (
                recall(split[i]) if recall is not None else None
            )  # from the pass just run, if it ran
            if pooled is not None:
                kept = [(v, w) for v, w in zip(pooled, weights) if v is not None]
                remember(texts[i], weighted_mean(*zip(*kept)) if kept else None)
        if progress:
            progress(len(part))
        return rows

    starts = list(range(0, len(records), BATCH))
    if not getattr(embedder, "in_process", False) or len(starts) < TWO_CORES_FROM:
        for start in starts:
            batch(start, progress)
        return out
    # An embedder computed by this process's own Python (the hash embedder) embeds the second
    # half of a big write's records in a forked child, while this process embeds the first.
    from . import workers

    half = len(starts) // 2
    ticked = [0]  # records whose progress this process showed (a child's count stays in the child)

    def one(start: int) -> bytes:
        rows = batch(start)  # (written into `out`: the child's copy of it, in the child)
        if workers.in_child():
            return rows.tobytes()
        ticked[0] += len(rows)
        if progress:
            progress(len(rows))
        return b""  # (in place already)

    got, _ = workers.split_map(one, starts, min_items=TWO_CORES_FROM, at=half)
    for start, raw in zip(starts, got):
        if raw:  # the child's rows
            rows = np.frombuffer(raw, np.float32).reshape(-1, embedder.dim)
            out[start : start + len(rows)] = rows
    if progress and ticked[0] < len(records):
        progress(len(records) - ticked[0])
    return out


def weighted_mean(vectors, weights) -> np.ndarray:
    """The unit-length weighted mean of `vectors` (the first vector if they cancel out)."""
    mean = (np.stack(vectors) * np.asarray(weights, np.float32)[:, None]).sum(axis=0)
    norm = float(np.linalg.norm(mean))
    return (mean / norm).astype(np.float32) if norm > 0 else np.asarray(vectors[0], np.float32)
