"""A persistent embedding cache, (model, dim, kind, sha256 of the text) -> float32 vector, in SQLite."""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model  TEXT    NOT NULL,
    dim    INTEGER NOT NULL,
    kind   TEXT    NOT NULL,
    sha256 BLOB    NOT NULL,
    vector BLOB    NOT NULL,
    PRIMARY KEY (model, dim, kind, sha256)
) WITHOUT ROWID
"""
UNCACHED = {"hash"}  # embedders that are cheaper to recompute than to look up
_CHUNK = 500  # keys per SELECT ... IN (...), under SQLite's oldest limit of 999 parameters
_EMBED_CHUNK = 1024  # texts embedded (and saved) at a time, so an interrupted run keeps its work


def default_path() -> Path:
    """$MEMSTORE_EMBED_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/memstore/embeddings.sqlite."""
    if os.environ.get("MEMSTORE_EMBED_CACHE"):
        return Path(os.environ["MEMSTORE_EMBED_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memstore" / "embeddings.sqlite"


class EmbeddingCache:
    """Vectors already computed, shared by every store and process of this user.

    WAL mode lets readers run while another process writes; writers wait up to `timeout` seconds.
    Two processes that compute the same vector both insert it, and the second insert is ignored.
    """

    def __init__(self, path: str | Path | None = None, timeout: float = 30.0):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # one connection, shared by this process's threads
        self._db = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a lost last write only means recomputing it
        self._db.execute(_SCHEMA)

    def get_many(self, model: str, dim: int, kind: str, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found = {}
        with self._lock:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                sql = f"SELECT sha256, vector FROM vectors WHERE model=? AND dim=? AND kind=? AND sha256 IN ({marks})"
                rows = self._db.execute(sql, (model, dim, kind, *chunk))
                for key, blob in rows:
                    if len(blob) == 4 * dim:  # anything else is damage: treat it as a miss
                        found[bytes(key)] = np.frombuffer(blob, dtype="<f4")
        return found

    def put_many(self, model: str, dim: int, kind: str, items: list[tuple[bytes, np.ndarray]]) -> None:
        rows = [(model, dim, kind, key, np.asarray(vec, dtype="<f4").tobytes()) for key, vec in items]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_default: EmbeddingCache | None = None
_default_lock = threading.Lock()


def default_cache() -> EmbeddingCache | None:
    """The process-wide cache at default_path(), or None if it cannot be opened (it is optional)."""
    global _default
    with _default_lock:
        if _default is None or _default.path != default_path():
            try:
                _default = EmbeddingCache()
            except (OSError, sqlite3.Error) as e:
                log.warning("embedding cache unavailable (%s); embedding without it", e)
                return None
        return _default


def _worth_caching(embedder) -> bool:
    return getattr(embedder, "cacheable", embedder.name not in UNCACHED)


def embed_cached(embedder, texts, kind: str = "passage", cache: EmbeddingCache | None = None) -> np.ndarray:
    """embedder.embed_batch(texts, kind), computing only texts neither cached nor repeated earlier."""
    texts = list(texts)
    dim = embedder.dim
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    # Identical texts are embedded once; `where` lists the rows each distinct text fills.
    where: dict[str, list[int]] = {}
    for row, text in enumerate(texts):
        where.setdefault(text, []).append(row)
    distinct = list(where)
    if cache is None and _worth_caching(embedder):
        cache = default_cache()
    keys = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in distinct]
    hits = {}
    if cache is not None:
        try:
            hits = cache.get_many(embedder.model, dim, kind, keys)
        except sqlite3.Error as e:  # the cache is an optimisation: unreadable means all misses
            log.warning("could not read embeddings from %s: %s", cache.path, e)
    misses = [i for i, key in enumerate(keys) if key not in hits]
    for i, key in enumerate(keys):
        if key in hits:
            out[where[distinct[i]]] = hits[key]
    for start in range(0, len(misses), _EMBED_CHUNK):
        chunk = misses[start : start + _EMBED_CHUNK]
        vecs = np.asarray(embedder.embed_batch([distinct[i] for i in chunk], kind=kind), dtype=np.float32)
        if vecs.shape != (len(chunk), dim):
            raise ValueError(f"embedder {embedder.name} returned shape {vecs.shape}, expected {(len(chunk), dim)}")
        for i, vec in zip(chunk, vecs):
            out[where[distinct[i]]] = vec
        if cache is not None:
            try:
                cache.put_many(embedder.model, dim, kind, [(keys[i], vec) for i, vec in zip(chunk, vecs)])
            except sqlite3.Error as e:  # a cache that cannot be written must not fail the embedding
                log.warning("could not save embeddings to %s: %s", cache.path, e)
    return out
