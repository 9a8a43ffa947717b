"""Topic placement's content vectors come from the write's own MiniLM forward pass, not a second one."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import needs_minilm_weights

from memstore.tree import naming

WORDY = [
    "How do I fix the bike tire that keeps going flat?",
    "Sarah's peanut-butter cake — café résumé, naïve ‘quotes’ and rock-'n'-roll.",
    "ok thanks",
    "",
    "What's the CAPITAL of Mongolia, and its population in 2020?",
    "the " * 400 + "budget",  # the one content word lies past the 256 tokens the model reads
    "don't do it, it's fine",
]


def test_word_spans_are_the_content_words():
    for text in WORDY:
        assert [text[s:e] for s, e in naming.word_spans(text)] == naming.words(text)


@pytest.mark.model
@needs_minilm_weights
@pytest.mark.parametrize("runtime", ["onnx", "numpy"])
def test_content_vectors_come_with_the_passage_embedding(runtime):
    from memstore.adapters.minilm import MiniLMEmbedder

    if runtime == "onnx":
        pytest.importorskip("onnxruntime")
    emb = MiniLMEmbedder(runtime=runtime)
    fresh = emb.content_vectors(WORDY)  # nothing embedded yet: one forward pass of its own
    passages = emb.embed_batch(WORDY)
    # pooling the content words changes nothing in the record's vector
    assert np.array_equal(passages, emb.embed_batch(WORDY, kind="query"))
    calls = []
    real = emb._forward
    emb._forward = lambda *a, **kw: calls.append(a) or real(*a, **kw)
    remembered = emb.content_vectors(WORDY)
    assert calls == []  # every text was just embedded as a passage
    for a, b, text in zip(fresh, remembered, WORDY):
        has_words = bool(naming.words(text)) and text != WORDY[5]
        assert (a is not None) == (b is not None) == has_words, text
        if a is not None:
            assert float(np.abs(a - b).max()) < 1e-6 and abs(float(np.linalg.norm(a)) - 1) < 1e-5
            assert (
                float(a @ passages[WORDY.index(text)]) < 0.9999
            )  # a vector of its own, not the passage's


@pytest.mark.model
@needs_minilm_weights
def test_content_vectors_agree_across_runtimes():
    pytest.importorskip("onnxruntime")
    from memstore.adapters.minilm import MiniLMEmbedder

    a = MiniLMEmbedder(runtime="onnx").content_vectors(WORDY)
    b = MiniLMEmbedder(runtime="numpy").content_vectors(WORDY)
    assert [x is None for x in a] == [x is None for x in b]
    assert max(float(np.abs(x - y).max()) for x, y in zip(a, b) if x is not None) < 1e-5


@needs_minilm_weights
def test_the_graph_file_is_keyed_by_its_version(tmp_path, monkeypatch):
    """A graph cached by older code (without the content_mask input) is never loaded by this code."""
    from memstore.adapters import minilm, minilm_graph

    weights = minilm.model_dir() / "model.safetensors"
    now = minilm_graph.graph_path(weights)
    monkeypatch.setattr(minilm_graph, "GRAPH_VERSION", minilm_graph.GRAPH_VERSION - 1)
    assert minilm_graph.graph_path(weights) != now


@pytest.mark.model
@needs_minilm_weights
def test_a_minilm_write_runs_one_forward_pass(tmp_path, monkeypatch):
    """Placing the turns in the tree reuses the content vectors of the write's own embedding pass;
    when the embedding cache had the records' vectors it has their content vectors too: no pass at
    all (an import of cached vectors ran the model over every user turn again for these)."""
    from conftest import make_store
    from memstore.format import tree as treefmt
    from tree_scenarios import BIKE, SARAH_ALLERGY, WEATHER, converse

    from memstore.turn_embedding import sentences

    monkeypatch.setenv(
        "MEMSTORE_EMBED_CACHE", str(tmp_path / "embeddings.sqlite")
    )  # cold: nothing cached
    turns = [SARAH_ALLERGY, *WEATHER, *BIKE]
    split = [len(sentences({"role": "user"}, user)) for user, _ in turns]  # a user turn's sentences
    assert any(split)
    cold = 10 - sum(1 for n in split if n) + sum(split)  # a split turn is run as its sentences only
    shapes = []
    for name, expected in (("cold", [cold]), ("cached", [])):
        st = make_store(tmp_path / name, embedder="minilm")
        emb = st.embedder
        calls = []
        real = emb._forward
        emb._forward = lambda texts, *a, real=real, calls=calls, **kw: (
            calls.append(len(texts)) or real(texts, *a, **kw)
        )
        ids = converse(st, turns)
        assert (
            calls == expected
        )  # cold: the ten records (a split turn as its sentences) once, no second pass
        owner = treefmt.read(st.root).topic_of()
        assert (
            owner[ids[1][0]] == owner[ids[2][0]] != owner[ids[0][0]]
        )  # the umbrella follow-up continues
        assert (
            owner[ids[3][0]] == owner[ids[4][0]] != owner[ids[2][0]]
        )  # the bike pair shares its own topic
        shapes.append([[ids.index(p) for p in ids if owner[p[0]] == owner[q[0]]] for q in ids])
    assert shapes[0] == shapes[1]
