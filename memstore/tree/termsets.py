"""Key-term sets of many small windows of the same texts, as one big write asks for them.

Placement compares a turn's key terms with those of a topic's latest records (naming.term_set),
for every turn that does not plainly continue or leave its topic. A window moves by a record each
time its topic gains one, so the same texts are ranked again and again: counting their words anew
each time (Counter over a few thousand words) was a quarter of a 100,000-turn import.

Here each text is counted once, into arrays over one vocabulary (its distinct terms, where each
first occurs, how often), and a window's ranking is a few array operations over the concatenation.
The ranking is naming.term_set's own: a term scores 2 per text holding it plus 1 per occurrence
(1.5 more when any occurrence is written capitalised); the best `k` by score, then by where the
term first occurs in the window (positions are distinct, so no further tie-break is needed).
"""

from __future__ import annotations

import numpy as np

from . import naming

KEEP_TEXTS = 100_000  # texts whose counts are kept (a window's records are its topic's latest)


class TermSets:
    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []
        self.counted: dict[str, tuple] = {}  # text -> (ids, first, score, capitalised, length)

    def _id(self, stem: str) -> int:
        got = self.vocab.get(stem)
        if got is None:
            got = self.vocab[stem] = len(self.words)
            self.words.append(stem)
        return got

    def _count(self, text: str) -> tuple:
        got = self.counted.get(text)
        if got is not None:
            return got
        if len(self.counted) >= KEEP_TEXTS:
            self.counted.clear()
        terms = naming._terms_of(text)
        if not terms:
            got = self.counted[text] = None
            return got
        stems, _forms, caps = zip(*terms)
        vocab = self.vocab
        ids = np.fromiter(
            (vocab[s] if s in vocab else self._id(s) for s in stems), np.int64, len(stems)
        )
        uniq, first, counts = np.unique(ids, return_index=True, return_counts=True)
        capital = np.zeros(len(uniq), bool)
        if any(caps):
            capital[np.searchsorted(uniq, ids[np.fromiter(caps, bool, len(caps))])] = True
        got = self.counted[text] = (uniq, first, 2.0 + counts, capital, len(stems))
        return got

    def top(self, texts: list[str], k: int) -> set[str]:
        """naming.term_set(texts, k)."""
        parts = [c for c in map(self._count, texts) if c is not None]
        if not parts:
            return set()
        if len(parts) == 1:
            ids, first, score, capital, _n = parts[0]
            score = score + 1.5 * capital
        else:
            offsets = np.cumsum([0] + [p[4] for p in parts[:-1]])
            every = np.concatenate([p[0] for p in parts])
            ids, where, inverse = np.unique(every, return_index=True, return_inverse=True)
            score = np.bincount(inverse, weights=np.concatenate([p[2] for p in parts]))
            capital = np.zeros(len(ids), bool)
            capital[inverse[np.concatenate([p[3] for p in parts])]] = True
            score += 1.5 * capital
            first = np.concatenate([p[1] + off for p, off in zip(parts, offsets)])[where]
        if len(ids) > k:
            floor = np.partition(score, len(ids) - k)[len(ids) - k]
            pool = np.flatnonzero(score >= floor)
            if len(pool) > k:  # ties at the floor: the earlier first occurrence wins
                pool = pool[np.lexsort((first[pool], -score[pool]))[:k]]
            ids = ids[pool]
        words = self.words
        return {words[i] for i in ids.tolist()}
