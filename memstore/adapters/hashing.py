"""A deterministic hashing embedder: no model, exact and offline, for tests and model-less machines."""

from __future__ import annotations

import hashlib

import numpy as np

from ..text import TOKEN as _TOKEN
from . import Embedder


WORD_CACHE = 200_000  # distinct words whose hashed features an embedder keeps


class HashEmbedder(Embedder):
    """Feature hashing of lower-cased word unigrams and character trigrams into `dim` buckets.

    Similar texts share features, so search over it behaves sensibly, and the same text always
    gives the same bytes on every machine.
    """

    name = "hash"

    def __init__(self, dim: int = 384, **_ignored):
        self.dim = int(dim)
        self.model = f"memstore-hash-v1-{self.dim}"
        self._words: dict[str, tuple[list[int], list[float]]] = {}

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

    def _word(self, w: str) -> tuple[list[int], list[float]]:
        """A word's buckets and signed weights (its unigram and its trigrams), hashed once per
        embedder: an import's words repeat, and hashing each feature again was most of its time."""
        hit = self._words.get(w)
        if hit is None:
            if len(self._words) >= WORD_CACHE:
                self._words.clear()
            idx, val = [], []
            padded = f"#{w}#"
            feats = [("w:" + w, 1.0)] + [
                ("c:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)
            ]
            for feat, weight in feats:
                h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                idx.append(int.from_bytes(h[:4], "little") % self.dim)
                val.append(weight if h[4] & 1 else -weight)
            hit = self._words[w] = (idx, val)
        return hit

    def embed_batch(self, texts, kind="passage"):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        word = self._word
        for row, text in enumerate(texts):
            idx: list[int] = []
            val: list[float] = []
            for w in _TOKEN.findall(text.lower()):
                i, v = word(w)
                idx += i
                val += v
            if not idx:
                continue
            # Every weight is ±1 or ±0.5, so any order of summing gives the same exact float32
            # values as adding feature by feature did (the sums stay far below 2**24).
            out[row] = np.bincount(idx, weights=val, minlength=self.dim)
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out

    def count_tokens(self, text: str) -> int:
        return max(1, len(_TOKEN.findall(text)))
