"""An embedding cache keyed by (model, kind, sha256 of the exact input), so nothing is embedded twice."""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import numpy as np

# Embedders this cheap are faster to recompute than to look up.
UNCACHED = {"hash"}


def default_path() -> Path:
    env = os.environ.get("MEMSTORE_EMBED_CACHE")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "memstore" / "embeddings.sqlite"


class EmbeddingCache:
    def __init__(self, path: Path | None = None):
        self.path = Path(path or default_path())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB)")

    @staticmethod
    def key(model: str, kind: str, text: str) -> str:
        return hashlib.sha256(f"{model}\x1f{kind}\x1f{text}".encode("utf-8")).hexdigest()

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            rows = self.conn.execute(f"SELECT key, vec FROM emb WHERE key IN ({','.join('?' * len(part))})", part)
            found.update(rows)
        return found

    def put_many(self, items: list[tuple[str, bytes]]) -> None:
        with self.conn:
            self.conn.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", items)


_default: EmbeddingCache | None = None


def embed_cached(embedder, texts: list[str], kind: str = "passage", cache: EmbeddingCache | None = None) -> np.ndarray:
    """Rows for `texts` in order; only texts never seen before (by this model) are embedded."""
    global _default
    if not texts:
        return np.zeros((0, embedder.dim), np.float32)
    if embedder.name in UNCACHED:
        return np.asarray(embedder.embed_batch(list(texts), kind=kind), np.float32)
    if cache is None:
        if _default is None or _default.path != default_path():
            _default = EmbeddingCache()
        cache = _default
    keys = [EmbeddingCache.key(embedder.model, kind, t) for t in texts]
    found = cache.get_many(list(dict.fromkeys(keys)))
    missing: dict[str, str] = {}
    for k, t in zip(keys, texts):
        if k not in found and k not in missing:
            missing[k] = t
    if missing:
        vecs = np.asarray(embedder.embed_batch(list(missing.values()), kind=kind), np.float32)
        new = [(k, v.astype("<f4").tobytes()) for k, v in zip(missing, vecs)]
        cache.put_many(new)
        found.update(new)
    return np.stack([np.frombuffer(found[k], dtype="<f4") for k in keys]).astype(np.float32)
