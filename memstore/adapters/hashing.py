"""A deterministic hashing embedder: no model, exact and offline, for tests and model-less machines."""

from __future__ import annotations

import hashlib

import numpy as np

from ..text import TOKEN as _TOKEN
from . import Embedder


class HashEmbedder(Embedder):
    """Feature hashing of lower-cased word unigrams and character trigrams into `dim` buckets.

    Similar texts share features, so search over it behaves sensibly, and the same text always
    gives the same bytes on every machine.
    """

    name = "hash"

    def __init__(self, dim: int = 384, **_ignored):
        self.dim = int(dim)
        self.model = f"memstore-hash-v1-{self.dim}"

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

    def embed_batch(self, texts, kind="passage"):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, weight in self._features(text):
                h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
                idx = int.from_bytes(h[:4], "little") % self.dim
                sign = 1.0 if h[4] & 1 else -1.0
                out[row, idx] += sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out

    def count_tokens(self, text: str) -> int:
        return max(1, len(_TOKEN.findall(text)))
