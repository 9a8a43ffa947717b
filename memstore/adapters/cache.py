"""A persistent embedding cache, (model, dim, kind, keyed hash of the text) -> float32 vector, in SQLite.

The key is an HMAC-SHA256 of the text under a random secret kept in the cache itself, never the
text's plain sha256: that is the hash a tombstone (forgotten.jsonl) publishes, so a plain-sha256 key
would let anyone holding a copy of this disk and the store's tombstones find a forgotten text's
vector. Entries of older memstores (table `vectors`, keyed by plain sha256) move to the new key the
first time their text is looked up, and `forget` drops them by the tombstone's hash.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from ..sqlitedb import sqlite3
import threading
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    model  TEXT    NOT NULL,
    dim    INTEGER NOT NULL,
    kind   TEXT    NOT NULL,
    key    BLOB    NOT NULL,
    vector BLOB    NOT NULL,
    PRIMARY KEY (model, dim, kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS secret (id INTEGER PRIMARY KEY CHECK (id = 1), value BLOB NOT NULL);
"""
LEGACY = "vectors"  # memstore before the keyed hash: (model, dim, kind, sha256 of the text, vector)
WAL_LIMIT = 4 << 20  # bytes of the WAL kept after a checkpoint (journal_size_limit)
UNCACHED = {"hash"}  # embedders that are cheaper to recompute than to look up
_CHUNK = 500  # keys per SELECT ... IN (...), under SQLite's oldest limit of 999 parameters
_EMBED_CHUNK = 1024  # texts embedded (and saved) at a time, so an interrupted run keeps its work
_SCAN = 4096  # rows read at a time when dropping by vector


def default_path() -> Path:
    """$MEMSTORE_EMBED_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/memstore/embeddings.sqlite."""
    if os.environ.get("MEMSTORE_EMBED_CACHE"):
        return Path(os.environ["MEMSTORE_EMBED_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memstore" / "embeddings.sqlite"


def _sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """Vectors already computed, shared by every store and process of this user.

    WAL mode lets readers run while another process writes; writers wait up to `timeout` seconds.
    Two processes that compute the same vector both insert it, and the second insert is ignored.
    Freed pages are zeroed (secure_delete), so a dropped entry leaves no copy in the file.
    """

    def __init__(self, path: str | Path | None = None, timeout: float = 30.0):
        self.path = Path(path) if path else default_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # one connection, shared by this process's threads
        self._db = sqlite3.connect(
            self.path, timeout=timeout, check_same_thread=False, isolation_level=None
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # a lost last write only means recomputing it
        self._db.execute("PRAGMA secure_delete=ON")
        self._db.execute(f"PRAGMA journal_size_limit={WAL_LIMIT}")
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO secret VALUES (1, ?)", (os.urandom(32),))
        self._secret = bytes(
            self._db.execute("SELECT value FROM secret WHERE id = 1").fetchone()[0]
        )
        self._legacy = self._has_legacy()

    def _has_legacy(self) -> bool:
        return (
            self._db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (LEGACY,)).fetchone()
            is not None
        )

    def key(self, text: str) -> bytes:
        """The entry key of a text: HMAC-SHA256 under this cache's secret (not the tombstone's hash)."""
        return hmac.new(
            self._secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256
        ).digest()

    def get_many(self, model: str, dim: int, kind: str, texts: list[str]) -> dict[str, np.ndarray]:
        """{text: vector} for the texts the cache holds."""
        keyed = {self.key(t): t for t in texts}
        found = {}
        with self._lock:
            for key, blob in self._select("entries", "key", model, dim, kind, list(keyed)):
                if len(blob) == 4 * dim:  # anything else is damage: treat it as a miss
                    found[keyed[bytes(key)]] = np.frombuffer(blob, dtype="<f4")
            if self._legacy:
                self._migrate(model, dim, kind, [t for t in texts if t not in found], found)
        return found

    def _select(self, table: str, column: str, model: str, dim: int, kind: str, keys: list[bytes]):
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT {column}, vector FROM {table} WHERE model=? AND dim=? AND kind=? AND {column} IN ({marks})"
            yield from self._db.execute(sql, (model, dim, kind, *chunk))

    def _migrate(self, model: str, dim: int, kind: str, texts: list[str], found: dict) -> None:
        """Entries an older memstore keyed by plain sha256: moved to the keyed hash as they are used."""
        by_sha = {_sha256(t): t for t in texts}
        moved = [
            (bytes(sha), blob)
            for sha, blob in self._select(LEGACY, "sha256", model, dim, kind, list(by_sha))
            if len(blob) == 4 * dim
        ]
        if moved:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sha, blob in moved:
                    text = by_sha[sha]
                    found[text] = np.frombuffer(blob, dtype="<f4")
                    self._db.execute(
                        "INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?)",
                        (model, dim, kind, self.key(text), blob),
                    )
                    self._db.execute(f"DELETE FROM {LEGACY} WHERE sha256 = ?", (sha,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        if self._db.execute(f"SELECT 1 FROM {LEGACY} LIMIT 1").fetchone() is None:
            self._db.execute(f"DROP TABLE {LEGACY}")
            self._legacy = False

    def put_many(
        self, model: str, dim: int, kind: str, items: list[tuple[str, np.ndarray]]
    ) -> None:
        rows = [
            (model, dim, kind, self.key(text), np.asarray(vec, dtype="<f4").tobytes())
            for text, vec in items
        ]
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany("INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?)", rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def forget(self, texts=(), hashes=(), vectors=()) -> int:
        """Drop every entry of these texts (any model and kind), of these sha256 hex digests (an
        older memstore's keys: a tombstone's `hash`), and whose vector is within 1e-4 cosine of one
        of `vectors` (a document chunk is embedded with its neighbours' text, so its input is not
        its text). Then the WAL is emptied, so no copy stays in the cache's files. Returns the count."""
        keys = [self.key(t) for t in texts]
        shas = [_sha256(t) for t in texts] + [bytes.fromhex(h) for h in hashes if _is_hex64(h)]
        n = 0
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                n += self._delete_keys("entries", "key", keys)
                if self._legacy:
                    n += self._delete_keys(LEGACY, "sha256", shas)
                for vec in vectors:
                    n += self._delete_near(np.asarray(vec, dtype=np.float32))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return n

    def _delete_keys(self, table: str, column: str, keys: list[bytes]) -> int:
        n = 0
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            cur = self._db.execute(
                f"DELETE FROM {table} WHERE {column} IN ({','.join('?' * len(chunk))})", chunk
            )
            n += cur.rowcount
        return n

    def _delete_near(self, vec: np.ndarray) -> int:
        norm = float(np.linalg.norm(vec))
        if not norm:
            return 0
        unit, doomed = vec / norm, []
        for table, column in [("entries", "key"), *([(LEGACY, "sha256")] if self._legacy else [])]:
            last = None
            while True:
                rows = self._db.execute(
                    f"SELECT model, dim, kind, {column}, vector FROM {table} WHERE dim = ?"
                    + (f" AND (model, dim, kind, {column}) > (?, ?, ?, ?)" if last else "")
                    + f" ORDER BY model, dim, kind, {column} LIMIT {_SCAN}",
                    (len(vec), *(last or ())),
                ).fetchall()
                if not rows:
                    break
                last = rows[-1][:4]
                for model, dim, kind, key, blob in rows:
                    if len(blob) == 4 * len(vec):
                        other = np.frombuffer(blob, dtype="<f4")
                        if float(other @ unit) >= (1 - 1e-4) * (
                            float(np.linalg.norm(other)) or 1.0
                        ):
                            doomed.append((table, column, model, dim, kind, key))
        for table, column, model, dim, kind, key in doomed:
            self._db.execute(
                f"DELETE FROM {table} WHERE model=? AND dim=? AND kind=? AND {column}=?",
                (model, dim, kind, key),
            )
        return len(doomed)

    def __len__(self) -> int:
        with self._lock:
            n = self._db.execute("SELECT count(*) FROM entries").fetchone()[0]
            return n + (
                self._db.execute(f"SELECT count(*) FROM {LEGACY}").fetchone()[0]
                if self._legacy
                else 0
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _is_hex64(value) -> bool:
    return (
        isinstance(value, str)
        and len(value) == 64
        and all(c in "0123456789abcdef" for c in value.lower())
    )


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


def forget_in_cache(path, texts=(), hashes=(), vectors=()) -> str | None:
    """EmbeddingCache(path).forget(...); the error, in words, when the cache cannot be opened or written."""
    try:
        with EmbeddingCache(path) as cache:
            cache.forget(texts, hashes, vectors)
    except (OSError, sqlite3.Error) as exc:
        return str(exc)
    return None


def _worth_caching(embedder) -> bool:
    return getattr(embedder, "cacheable", embedder.name not in UNCACHED)


def embed_cached(
    embedder, texts, kind: str = "passage", cache: EmbeddingCache | None = None
) -> np.ndarray:
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
    hits = {}
    if cache is not None:
        try:
            hits = cache.get_many(embedder.model, dim, kind, distinct)
        except sqlite3.Error as e:  # the cache is an optimisation: unreadable means all misses
            log.warning("could not read embeddings from %s: %s", cache.path, e)
    misses = [text for text in distinct if text not in hits]
    for text, vec in hits.items():
        out[where[text]] = vec
    for start in range(0, len(misses), _EMBED_CHUNK):
        chunk = misses[start : start + _EMBED_CHUNK]
        vecs = np.asarray(embedder.embed_batch(chunk, kind=kind), dtype=np.float32)
        if vecs.shape != (len(chunk), dim):
            raise ValueError(
                f"embedder {embedder.name} returned shape {vecs.shape}, expected {(len(chunk), dim)}"
            )
        for text, vec in zip(chunk, vecs):
            out[where[text]] = vec
        if cache is not None:
            try:
                cache.put_many(embedder.model, dim, kind, list(zip(chunk, vecs)))
            except sqlite3.Error as e:  # a cache that cannot be written must not fail the embedding
                log.warning("could not save embeddings to %s: %s", cache.path, e)
    return out


CONTENT = "content"  # the kind of a text's content-word vector (MiniLM's `content_vectors`)


def content_cached(embedder, texts, cache: EmbeddingCache | None = None) -> list:
    """embedder.content_vectors(texts) (a vector per text, or None where no content word is in
    reach), kept in the cache as kind "content" like the passage vectors: an import whose vectors
    come from the cache (or are given) would otherwise run the model over every user turn again
    for these alone. None is not kept (recomputed: a text without a content word is short)."""
    texts = list(texts)
    distinct = list(dict.fromkeys(texts))
    if cache is None and _worth_caching(embedder):
        cache = default_cache()
    found: dict = {}
    if cache is not None and distinct:
        try:
            found = cache.get_many(embedder.model, embedder.dim, CONTENT, distinct)
        except sqlite3.Error as e:
            log.warning("could not read embeddings from %s: %s", cache.path, e)
    misses = [t for t in distinct if t not in found]
    for start in range(0, len(misses), _EMBED_CHUNK):
        chunk = misses[start : start + _EMBED_CHUNK]
        got = list(embedder.content_vectors(chunk))
        found.update(zip(chunk, got))
        keep = [(t, v) for t, v in zip(chunk, got) if v is not None]
        if cache is not None and keep:
            try:
                cache.put_many(embedder.model, embedder.dim, CONTENT, keep)
            except sqlite3.Error as e:
                log.warning("could not save embeddings to %s: %s", cache.path, e)
    return [found.get(t) for t in texts]
