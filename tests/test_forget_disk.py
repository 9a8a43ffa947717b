"""Forgotten means gone from this machine too (issue 26, A11): after `ct forget` no byte of
`.memstore/` (index.db, its WAL, FTS5 segments, vector matrices, rolled-back copies) nor of the
user's embedding cache holds the text or its vector, and the cache is not keyed by the sha256 a
tombstone publishes."""

from __future__ import annotations

import json
from memstore.sqlitedb import CONTENTLESS_DELETE, sqlite3

import numpy as np
import pytest

from conftest import ct, ct_process, make_store
from disk_scan import copies
from memstore.adapters.hashing import HashEmbedder

TEXT = "The zanzibar vault code is quokka seven seven three one"
WORDS = ("zanzibar", "quokka")
TURN = "I keep the spare key under the flowerpot by the marmalade door. Nobody else knows where it is. Please remember it."


class CachedHash(HashEmbedder):
    """The hashing embedder, through the embedding cache like a model would be (a plugin)."""

    name = "hash-cached"
    cacheable = True

    def __init__(self, dim: int = 384, **_ignored):
        super().__init__(dim)
        self.model = f"{self.name}-{self.dim}"

    @classmethod
    def describe(cls, dim: int = 384, **_ignored) -> dict:
        return {"name": cls.name, "model": f"{cls.name}-{int(dim)}", "dim": int(dim)}


@pytest.fixture
def cached(monkeypatch, tmp_path):
    """The cached hashing embedder, with an embedding cache of this test's own (the worker's
    shared one holds other tests' vectors, which these tests count)."""
    from memstore import adapters

    monkeypatch.setitem(adapters.EMBEDDERS, "hash-cached", "test_forget_disk:CachedHash")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "own-cache"))
    monkeypatch.setenv("MEMSTORE_EMBED_CACHE", str(tmp_path / "own-cache" / "embeddings.sqlite"))


def vector(text: str) -> np.ndarray:
    return HashEmbedder().embed_batch([text])[0]


def stored_vector(root, text: str) -> np.ndarray:
    """The vector the store holds for the record with this text (read through its index)."""
    from memstore.store import Store

    index = Store(root).index()
    (vrow,) = index.conn.execute(
        "SELECT vrow FROM records WHERE rowid IN (SELECT rowid FROM fts WHERE fts MATCH ?)",
        (f'"{text.split()[1]}"',),
    ).fetchone()
    from memstore.index import exact

    vec = exact.rows(index, [vrow])[0][0]
    index.close()
    return vec


def cache_vectors(path) -> list[np.ndarray]:
    db = sqlite3.connect(path)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        table = "entries" if "entries" in tables else "vectors"  # an older memstore's
        return [
            np.frombuffer(b, "<f4").copy() for (b,) in db.execute(f"SELECT vector FROM {table}")
        ]
    finally:
        db.close()


def filler(root, n=12):
    for i in range(n):
        ct(
            "-C",
            root,
            "add",
            "--role",
            "assistant",
            "--ts",
            f"2026-03-0{1 + i % 3}T1{i % 10}:00:00Z",
            f"note {i} on apples",
        )


def test_a_forget_leaves_no_copy_of_the_text_or_its_vector_in_dot_memstore(tmp_path):
    root = make_store(tmp_path / "s").root
    filler(root)
    ct_process("-C", root, "add", "--role", "assistant", "--ts", "2026-03-02T12:00:00Z", TEXT)
    assert "quokka" in ct_process("-C", root, "search", "zanzibar quokka").stdout
    vec = stored_vector(root, TEXT)
    assert float(vec @ vector(TEXT)) > 0.999
    found = copies([root / ".memstore"], TEXT, WORDS, [vec])
    # indexed: the scan sees the words (the full-text index, the tree's cache) and the vector;
    # the full-text index keeps the text itself only where SQLite cannot delete from a table
    # without it (memstore/sqlitedb.py)
    assert len(found) >= (3 if CONTENTLESS_DELETE else 4), found
    assert any("index.db: word" in f for f in found)
    assert not CONTENTLESS_DELETE or not any("index.db: text" in f for f in found), found
    rid = json.loads(ct("-C", root, "forget", "--match", "zanzibar quokka", "-n", "--json").stdout)[
        "forgotten"
    ][0]
    ct_process(
        "-C", root, "forget", rid
    )  # a real process: it leaves through os._exit, no close-time checkpoint
    assert copies([root / ".memstore"], TEXT, WORDS, [vec]) == []
    assert "note 3 on apples" in ct("-C", root, "search", "note 3 apples").stdout


def test_the_index_wal_is_emptied_after_every_write(tmp_path):
    """A `ct` process leaves through os._exit, so SQLite's checkpoint at close never ran: the WAL
    kept every page ever written (it grew to the database's size)."""
    root = make_store(tmp_path / "s").root
    for i in range(3):
        ct_process("-C", root, "add", f"a note number {i} about pears")
        wal = root / ".memstore" / "index.db-wal"
        assert not wal.exists() or wal.stat().st_size == 0, wal.stat().st_size


def test_rolled_back_copies_of_a_forgotten_text_go_with_it(tmp_path):
    root = make_store(tmp_path / "s").root
    ct("-C", root, "add", "--ts", "2026-03-02T09:00:00Z", "a committed note about plums")
    line = {
        "ts": "2026-03-02T10:00:00.000000Z",
        "role": "assistant",
        "type": "text",
        "text": TEXT,
        "id": "u1",
    }
    with open(root / "log/2026/2026-03-02.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")  # a write killed before its commit, rolled back below
    ct("-C", root, "fsck", "--repair")
    saved = root / ".memstore" / "rolled-back"
    assert any(TEXT.encode() in p.read_bytes() for p in saved.rglob("*") if p.is_file())
    ct(
        "-C", root, "add", "--role", "assistant", "--ts", "2026-03-02T10:00:00Z", TEXT
    )  # written again
    ct("-C", root, "forget", "--match", "zanzibar quokka")
    assert copies([root / ".memstore"], TEXT, WORDS) == []


def test_the_embedding_cache_drops_a_forgotten_text_and_is_not_keyed_by_the_tombstone_hash(
    tmp_path, cached
):
    from memstore.adapters.cache import default_path

    cache_dir = default_path().parent
    root = make_store(tmp_path / "s", embedder="hash-cached").root
    ct("-C", root, "add", "--role", "assistant", "a note about the weather in spring")
    kept = cache_vectors(default_path())
    ct("-C", root, "add", "--role", "assistant", TEXT)
    ct(
        "-C", root, "add", "--role", "user", TURN
    )  # three sentences: the cache holds each one's vector
    vecs = [
        v
        for v in cache_vectors(default_path())
        if not any(v.tobytes() == k.tobytes() for k in kept)
    ]
    assert len(kept) == 1 and len(vecs) == 4
    # the cache holds the vectors, but under a keyed hash: never the sha256 a tombstone publishes
    assert copies([cache_dir], TEXT, vectors=vecs) and not copies([cache_dir], TEXT, key_hash=True)
    ct("-C", root, "forget", "--match", "zanzibar quokka")
    ct("-C", root, "forget", "--match", "flowerpot marmalade")
    for text in (TEXT, TURN):
        assert copies([cache_dir, root / ".memstore"], text, vectors=vecs, key_hash=True) == []
    assert [v.tobytes() for v in cache_vectors(default_path())] == [kept[0].tobytes()], (
        "other entries stay"
    )


def test_an_older_cache_keyed_by_sha256_moves_to_the_keyed_hash_and_forgets_by_tombstone(tmp_path):
    import hashlib

    from memstore.adapters.cache import EmbeddingCache, embed_cached

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE vectors (model TEXT NOT NULL, dim INTEGER NOT NULL, kind TEXT NOT NULL, sha256 BLOB NOT NULL,"
        " vector BLOB NOT NULL, PRIMARY KEY (model, dim, kind, sha256)) WITHOUT ROWID"
    )
    for t in ("kept text", TEXT):
        db.execute(
            "INSERT INTO vectors VALUES (?, ?, ?, ?, ?)",
            (
                "hash-cached-384",
                384,
                "passage",
                hashlib.sha256(t.encode()).digest(),
                vector(t).tobytes(),
            ),
        )
    db.commit()
    db.close()
    emb = CachedHash()
    with EmbeddingCache(path) as cache:
        assert len(cache) == 2
        calls = []
        emb.embed_batch = lambda texts, kind="passage": (
            calls.append(texts) or HashEmbedder().embed_batch(texts)
        )
        got = embed_cached(emb, ["kept text"], cache=cache)
        assert calls == [] and got[0].tobytes() == vector("kept text").tobytes(), (
            "an old entry is still a hit"
        )
        assert (
            cache.forget(hashes=[hashlib.sha256(TEXT.encode()).hexdigest()]) == 1
        )  # a tombstone's hash
        assert len(cache) == 1
    assert copies([tmp_path], TEXT, vectors=[vector(TEXT)], key_hash=True) == []
    assert copies([tmp_path], "kept text", key_hash=True) == [], "moved to the keyed hash"


class CachedPooled(CachedHash):
    """A cached embedder that pools its own content-word vectors, as MiniLM does."""

    name = "hash-pooled"

    def content_vectors(self, texts):
        from memstore.tree import naming

        words = [" ".join(naming.words(t)) for t in texts]
        vecs = self.embed_batch([w or "-" for w in words], kind="query")
        return [v if w else None for v, w in zip(vecs, words)]


def test_a_forgotten_turns_content_vector_leaves_the_embedding_cache_too(
    tmp_path, cached, monkeypatch
):
    """Placement keeps each user turn's content-word vector in the cache (kind "content"), so an
    import of cached vectors runs no model for them; a forget drops it with the passage vectors."""
    from memstore import adapters
    from memstore.adapters.cache import CONTENT, default_path

    monkeypatch.setitem(adapters.EMBEDDERS, "hash-pooled", "test_forget_disk:CachedPooled")
    root = make_store(tmp_path / "s", embedder="hash-pooled").root
    ct("-C", root, "add", "--role", "user", "what grows well on a north facing balcony")
    ct("-C", root, "add", "--role", "user", TURN)
    db = sqlite3.connect(default_path())
    kinds = lambda: sorted(k for (k,) in db.execute("SELECT kind FROM entries"))  # noqa: E731
    assert kinds().count(CONTENT) == 2
    ct("-C", root, "forget", "--match", "flowerpot marmalade")
    assert kinds().count(CONTENT) == 1  # the balcony turn's
    content = [v for v in cache_vectors(default_path())]
    gone = CachedPooled().content_vectors([TURN])[0]
    assert not any(float(v @ gone) > 0.9999 for v in content)
    db.close()
