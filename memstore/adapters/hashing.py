"""A deterministic hashing embedder: no model, exact and offline, for tests and model-less machines."""

from __future__ import annotations

import hashlib
from itertools import chain

import numpy as np

from ..text import TOKEN as _TOKEN
from ..text import tokens
from . import Embedder


WORD_CACHE = 200_000  # distinct words whose hashed features an embedder keeps
BATCH = 2_048  # texts embedded at a time (see embed_batch)


class _WordTable(dict):
    """word -> its number in the embedder's table; a word not there yet is hashed into it."""

    def __init__(self, add):
        super().__init__()
        self.add = add

    def __missing__(self, word: str) -> int:
        return self.add(word)


class HashEmbedder(Embedder):
    """Feature hashing of lower-cased word unigrams and character trigrams into `dim` buckets.

    Similar texts share features, so search over it behaves sensibly, and the same text always
    gives the same bytes on every machine.
    """

    name = "hash"
    in_process = True  # (numpy on one thread, and never kept in the embedding cache)

    def __init__(self, dim: int = 384, **_ignored):
        self.dim = int(dim)
        self.model = f"memstore-hash-v1-{self.dim}"
        self._forget_words()

    @classmethod
    def describe(cls, dim: int = 384, **_ignored) -> dict:
        return {"name": "hash", "model": f"memstore-hash-v1-{int(dim)}", "dim": int(dim)}

    def _features(self, text: str):
        words = _TOKEN.findall(text.lower())
        for w in words:
            yield "w:" + w, 1.0
            padded = f"#{w}#"
            for i in range(len(padded) - 2):
                yield "c:" + padded[i : i + 3], 0.5

    def _word(self, w: str) -> int:
        """A word's number in the embedder's table of hashed features (its unigram and its
        trigrams: buckets and signed weights), hashed once per embedder: an import's words repeat,
        and hashing each feature again was most of its time."""
        idx, val = self._idx, self._val
        self._start.append(len(idx))
        padded = f"#{w}#"
        feats = [("w:" + w, 1.0)] + [
            ("c:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)
        ]
        hashed = self._hashed
        for feat, weight in feats:
            hit = hashed.get(feat)
            if hit is None:  # a trigram is shared by many words: hashed once
                h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                hit = hashed[feat] = (int.from_bytes(h[:4], "little") % self.dim, h[4] & 1)
            idx.append(hit[0])
            val.append(weight if hit[1] else -weight)
        self._count.append(len(feats))
        n = self._words[w] = len(self._words)
        return n

    def _forget_words(self) -> None:
        self._words: dict[str, int] = _WordTable(self._word)
        self._start: list[int] = []  # per word: where its features begin in _idx/_val
        self._count: list[int] = []  # per word: how many it has
        self._idx: list[int] = []
        self._val: list[float] = []
        self._hashed: dict[str, tuple[int, int]] = {}  # feature -> (bucket, sign bit)
        self._np: tuple | None = None  # the four lists as arrays, as far as _arrays made them

    def _arrays(self) -> tuple:
        """The word table as numpy arrays (start, count, bucket, weight), extended by the words
        added since the last batch (not converted whole again per batch)."""
        lists = (self._start, self._count, self._idx, self._val)
        have = self._np
        if have is None or any(a.size > len(b) for a, b in zip(have, lists)):
            have = tuple(np.zeros(0, t) for t in (np.int64, np.int64, np.int64, np.float64))
        if any(a.size < len(b) for a, b in zip(have, lists)):
            have = tuple(
                np.concatenate([a, np.asarray(b[a.size :], a.dtype)]) for a, b in zip(have, lists)
            )
        self._np = have
        return have

    def embed_batch(self, texts, kind="passage"):
        """The batch's words are looked up in one pass and their features summed with one bincount
        over (row, bucket) pairs: no Python work per word occurrence, only per new word. A big
        batch goes BATCH texts at a time (the same rows): one bincount over an import's 50,000
        turns worked through arrays of hundreds of megabytes, 1.5x slower than in slices."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for at in range(0, len(texts), BATCH):
            self._embed_into(texts[at : at + BATCH], out[at : at + BATCH])
        return out

    def _embed_into(self, texts, out: np.ndarray) -> None:
        if not len(texts):
            return
        words = [tokens(text.lower()) for text in texts]
        if len(self._words) > WORD_CACHE:
            self._forget_words()  # (a batch's own words are always kept, however many)
        per_text = np.fromiter(map(len, words), np.int64, count=len(words))
        # (a word met for the first time is hashed as it is looked up: _WordTable)
        occ = np.fromiter(
            map(self._words.__getitem__, chain.from_iterable(words)),
            np.int64,
            count=int(per_text.sum()),
        )
        arrays = self._arrays()
        if occ.size:
            start, count = arrays[0][occ], arrays[1][occ]
            # every feature of every occurrence: its place in _idx/_val, and its row
            ends = np.cumsum(count)
            at = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(start - (ends - count), count)
            rows = np.repeat(np.repeat(np.arange(len(texts), dtype=np.int64), per_text), count)
            idx, val = arrays[2][at], arrays[3][at]
            # Every weight is ±1 or ±0.5, so any order of summing gives the same exact values as
            # adding feature by feature did (the sums stay far below 2**24).
            sums = np.bincount(rows * self.dim + idx, weights=val, minlength=len(texts) * self.dim)
            out[:] = sums.reshape(len(texts), self.dim)
        # each row over its norm, np.linalg.norm's sqrt(v.dot(v)) (np.vecdot runs v.dot(v)'s
        # loop): the bits a call per row gave, without its ~4 us (a row of no words stays 0)
        norms = np.sqrt(np.vecdot(out, out))
        norms[~(norms > 0)] = 1.0
        out /= norms[:, None]

    def count_tokens(self, text: str) -> int:
        return max(1, len(tokens(text)))
