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
_MISSING = object()  # (a text counted with no terms is kept as None)
STREAM_CHUNK = 500  # texts a child counting ahead sends at a time


class TermSets:
    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []
        self.counted: dict[str, tuple] = {}  # text -> (ids, first, score, capitalised, length)
        self.stream = None  # a forked child counting the texts ahead (see `beside`)
        self.waiting: set[str] = set()  # texts the stream will still send
        self.base = 0  # the vocabulary's size when the child was forked: its new ids start here
        self.theirs: list[int] = []  # the child's new word ids (from base on) -> ours
        self.sent = 0  # (in the child) the words it has sent
        self.jobs: list[list[str]] = []  # the texts the stream counts, a chunk at a time
        self.at = 0  # how many chunks were taken
        self.here = 0  # texts this process counted itself (tests)

    def beside(self, texts: list[str]) -> None:
        """Count `texts` (in the order they will be asked for) ahead, in a forked child
        (workers.Stream), while this process places the turns; `close` stops it."""
        from .. import workers

        todo = [t for t in dict.fromkeys(texts) if t not in self.counted]
        self.base = self.sent = len(self.words)
        self.jobs = [todo[i : i + STREAM_CHUNK] for i in range(0, len(todo), STREAM_CHUNK)]
        self.at = 0
        # (the child is forked inside Stream, before `stream` and `waiting` are set: its copy of
        # this object counts every text itself and never waits for a stream)
        stream = workers.Stream(self._counted_chunk, self.jobs)
        self.stream = stream
        self.waiting = set(todo) if stream.pid is not None else set()

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.stream, self.waiting, self.jobs = None, set(), []

    def _counted_chunk(self, texts: list[str]) -> list:
        """(In the child) the counts of these texts, as bytes, and the words first met in them."""
        got = [self._count(t) for t in texts]
        words, self.sent = self.words[self.sent :], len(self.words)
        kept = [c for c in got if c is not None]
        sizes = [len(c[0]) if c is not None else -1 for c in got]
        if not kept:
            return [words, sizes, [], b"", b"", b"", b""]
        return [
            words,
            sizes,
            [c[4] for c in kept],
            np.concatenate([c[0] for c in kept]).astype(np.int32).tobytes(),
            np.concatenate([c[1] for c in kept]).astype(np.int32).tobytes(),
            np.concatenate([c[2] for c in kept]).astype(np.float32).tobytes(),
            np.concatenate([c[3] for c in kept]).tobytes(),
        ]

    def _receive(self) -> bool:
        """Take in the stream's next answer; False when nothing more comes (what is left is
        counted here)."""
        got = self.stream.next() if self.stream is not None else None
        if got is None or self.at >= len(self.jobs):
            if self.stream is not None:
                self.stream.close()
            self.stream, self.waiting = None, set()
            return False
        chunk = self.jobs[self.at]
        self.at += 1
        words, sizes, lengths, ids, first, score, capital = got
        self.theirs += [self._id(w) for w in words]
        ids = np.frombuffer(ids, np.int32).astype(np.int64)
        mine = ids >= self.base
        if mine.any():
            ids[mine] = np.asarray(self.theirs, np.int64)[ids[mine] - self.base]
        ends = np.cumsum([n for n in sizes if n >= 0])[:-1]
        parts = zip(
            np.split(ids, ends),
            np.split(np.frombuffer(first, np.int32), ends),
            np.split(np.frombuffer(score, np.float32), ends),
            np.split(np.frombuffer(capital, bool), ends),
            lengths,
        )
        if len(self.counted) >= KEEP_TEXTS:
            self.counted.clear()
        for text, n in zip(chunk, sizes):
            self.waiting.discard(text)
            self.counted[text] = next(parts) if n >= 0 else None
        return True

    def _id(self, stem: str) -> int:
        got = self.vocab.get(stem)
        if got is None:
            got = self.vocab[stem] = len(self.words)
            self.words.append(stem)
        return got

    def _count(self, text: str) -> tuple:
        got = self.counted.get(text, _MISSING)
        if got is not _MISSING:
            return got
        # the child's counts when they are there; when they are not (the child is behind, its
        # core busy), this process counts the text itself rather than wait
        while text in self.waiting and self.stream.ready() and self._receive():
            if text in self.counted:
                return self.counted[text]
        if len(self.counted) >= KEEP_TEXTS:
            self.counted.clear()
        self.here += 1
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
