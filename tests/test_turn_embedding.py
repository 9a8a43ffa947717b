"""What vector a record gets (memstore/turn_embedding.py): a user turn of several sentences is the
word-count-weighted mean of its sentences' vectors; everything else is embedded whole."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import needs_minilm_weights, write_turns

LONG = (
    "We had the whole family over for the spring party on Saturday. "
    "My aunt brought her famous lemon cake and everyone loved it. "
    "By the way, I finally bought a stand mixer for the kitchen."
)


def stored_vector(store, text: str) -> np.ndarray:
    """The vector the index holds for the record with this text (read from the day's pack)."""
    index = store.index()
    hit = next(h for h in store.search(text, k=50, mode="exact") if h.text == text)
    vrow = dict(index.conn.execute("SELECT rowid, vrow FROM records"))[hit.rowid]
    from memstore.index import exact

    return exact.rows(index, [vrow])[0][0]


def whole(store, text: str) -> np.ndarray:
    return store.embedder.embed_batch([text], kind="passage")[0]


def test_sentences_of_a_user_turn():
    from memstore.turn_embedding import sentences

    assert sentences({"role": "user", "type": "text"}, LONG) == [
        "We had the whole family over for the spring party on Saturday.",
        "My aunt brought her famous lemon cake and everyone loved it.",
        "By the way, I finally bought a stand mixer for the kitchen.",
    ]
    assert (
        sentences({"role": "assistant", "type": "text"}, LONG) == []
    )  # replies are embedded whole
    assert sentences({"role": "user", "type": "doc"}, LONG) == []
    assert sentences({"role": "user"}, "One sentence only, however long it is.") == []
    assert (
        sentences({"role": "user"}, "Ok. Thanks a lot for the help today!") == []
    )  # "Ok." is too short to count
    assert (
        sentences({"role": "user"}, "我们明天去北京大学参观。然后去吃饭。") == []
    )  # no spaces: embedded whole
    from memstore.turn_embedding import SENTENCE_MAX

    paste = " ".join(f"Line {i} of the pasted log says something." for i in range(200))
    assert sentences({"role": "user"}, paste) == [
        f"Line {i} of the pasted log says something." for i in range(SENTENCE_MAX)
    ]


def test_a_multi_sentence_user_turn_is_the_weighted_mean_of_its_sentences(store):
    from memstore.turn_embedding import sentences

    write_turns(
        store,
        [
            ("2026-03-01T09:00:00Z", "user", LONG, "s1", "ana"),
            (
                "2026-03-01T09:01:00Z",
                "assistant",
                "Congratulations on the stand mixer! It makes bread easy.",
                "s1",
                "bot",
            ),
        ],
    )
    parts = sentences({"role": "user"}, LONG)
    vecs = store.embedder.embed_batch(parts, kind="passage")
    weights = np.array([len(p.split()) for p in parts], np.float32)
    mean = (vecs * weights[:, None]).sum(axis=0)
    expected = mean / np.linalg.norm(mean)
    got = stored_vector(store, LONG)
    assert np.allclose(got, expected, atol=1e-6)
    assert not np.array_equal(got, whole(store, LONG))  # (the hashing embedder is nearly additive)
    reply = "Congratulations on the stand mixer! It makes bread easy."
    assert np.allclose(stored_vector(store, reply), whole(store, reply), atol=1e-6)


def test_reembed_gives_a_turn_the_vector_the_write_gave_it(store):
    write_turns(store, [("2026-03-01T09:00:00Z", "user", LONG, "s1", "ana")])
    before = stored_vector(store, LONG)
    store.reembed()
    assert np.allclose(stored_vector(store, LONG), before, atol=1e-6)


@pytest.mark.parametrize("n", [1, 600])
def test_batches_and_progress_count_records(store, n):
    """The pieces of a split turn are embedded beside the whole texts; progress counts records."""
    from memstore.turn_embedding import record_vectors

    recs = [{"role": "user", "type": "text"}] * n
    texts = [f"{LONG} Record {i} has its own words." for i in range(n)]
    seen = []
    out = record_vectors(store.embedder, recs, texts, progress=seen.append)
    assert out.shape == (n, store.embedder.dim) and sum(seen) == n
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


@pytest.mark.model
@needs_minilm_weights
def test_a_split_turns_content_vector_is_pooled_from_its_sentences(tmp_path, monkeypatch):
    """MiniLM's topic-placement content vector of a split turn is the weighted mean of its
    sentences' content vectors from the same pass: the whole turn is not run for it."""
    from memstore.adapters import get_embedder
    from memstore.turn_embedding import record_vectors, sentences, weighted_mean

    monkeypatch.setenv("MEMSTORE_EMBED_CACHE", str(tmp_path / "cache.sqlite"))
    emb = get_embedder("minilm")
    rec = {"role": "user", "type": "text"}
    runs = []
    real = emb._forward
    emb._forward = lambda texts, *a, **kw: runs.append(list(texts)) or real(texts, *a, **kw)
    record_vectors(emb, [rec], [LONG])
    parts = sentences(rec, LONG)
    assert runs == [parts]  # the sentences, once; never the whole turn
    pooled = emb.remembered_content([LONG])
    assert pooled is not None
    expected = weighted_mean(emb.remembered_content(parts), [len(p.split()) for p in parts])
    assert np.allclose(pooled[0], expected, atol=1e-6)
    assert emb.content_vectors([LONG])[0] is pooled[0] and len(runs) == 1  # placement runs nothing
