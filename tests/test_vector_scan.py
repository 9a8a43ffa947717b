"""The faiss candidate stages of the vector scan (float16 and IVF) against the exact numpy scan."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_same_ranking, scan_turns, write_turns

from memstore.index import ann
from memstore.retrieve.search import Filters, vector_candidates

pytest.importorskip("faiss")


@pytest.fixture
def filled(store, monkeypatch):
    monkeypatch.setattr(ann, "FP16_MIN_ROWS", 10)  # the faiss path from tiny stores on
    rows = scan_turns()
    write_turns(store, rows)
    store.index()
    return store


def test_fp16_scan_equals_the_exact_scan(filled):
    index = filled.index(update=False)
    for query in ("budget review", "garden recipe note", "flight"):
        q = filled.embedder.embed_query(query)
        exact = vector_candidates(index, q, Filters(), 20, method="exact")
        fast = vector_candidates(index, q, Filters(), 20, method="auto")
        assert_same_ranking(fast, exact)
    assert any(
        p.name.endswith(".f16.tail") for p in filled.meta_dir.iterdir()
    )  # the sidecar is kept in .memstore/


def test_fp16_scan_in_two_halves_equals_the_exact_scan(filled, monkeypatch):
    from memstore.format.timeutil import from_iso

    monkeypatch.setattr(ann, "SPLIT_ROWS", 20)  # two threads, each over half the range
    index = filled.index(update=False)
    window = Filters(since=from_iso("2026-01-02T00:00:00Z").timestamp())
    for query, filters in (("budget review", Filters()), ("garden recipe note", window)):
        q = filled.embedder.embed_query(query)
        assert_same_ranking(
            vector_candidates(index, q, filters, 20, method="auto"),
            vector_candidates(index, q, filters, 20, method="exact"),
        )


def test_time_slice_and_appended_rows_reach_the_fp16_scan(filled):
    from memstore.format.timeutil import from_iso

    index = filled.index(update=False)
    q = filled.embedder.embed_query("hotel deadline")
    window = Filters(
        since=from_iso("2026-01-03T00:00:00Z").timestamp(),
        until=from_iso("2026-01-05T00:00:00Z").timestamp(),
    )
    exact = vector_candidates(index, q, window, 15, method="exact")
    assert_same_ranking(vector_candidates(index, q, window, 15, method="auto"), exact)
    write_turns(
        filled, [("2026-01-09T10:00:00Z", "user", "hotel deadline hotel deadline", "s1", "me")]
    )
    index = filled.index()
    top = vector_candidates(index, q, Filters(), 1, method="auto")
    assert top == vector_candidates(index, q, Filters(), 1, method="exact")
    assert index.record_at(top[0][0])["text"] == "hotel deadline hotel deadline"


def test_ivf_finds_the_exact_neighbours_on_a_small_store(filled, monkeypatch):
    """An IVF index asked for by name is used from IVF_MIN_ROWS rows on (below FP16_MIN_ROWS,
    where the other faiss scans start); below it the scan is exact and no IVF file is made."""
    index = filled.index(update=False)
    q = filled.embedder.embed_query("budget")
    monkeypatch.setattr(ann, "FP16_MIN_ROWS", 1000)
    monkeypatch.setattr(ann, "IVF_MIN_ROWS", 241)
    exact = vector_candidates(index, q, Filters(), 10, method="exact")
    assert vector_candidates(index, q, Filters(), 10, method="ivf") == exact
    assert not any(p.suffix == ".faiss" for p in filled.meta_dir.iterdir())
    monkeypatch.setattr(ann, "IVF_MIN_ROWS", 240)
    hits = 0
    for query in ("budget", "trip hotel", "review schedule", "invoice garden"):
        q = filled.embedder.embed_query(query)
        exact = {r for r, _ in vector_candidates(index, q, Filters(), 10, method="exact")}
        approx = vector_candidates(index, q, Filters(), 10, method="ivf")
        hits += len(exact & {r for r, _ in approx})
    assert hits >= 36  # recall@10 >= 0.9 at this size (few cells, all probed)
    assert any(p.suffix == ".faiss" for p in filled.meta_dir.iterdir())


def test_take_rows_reads_the_file_and_equals_indexing_the_map(tmp_path):
    """A few rows are read with pread (no page-cache folios mapped into the process); the values
    are the map's, a row past the end is an error, a slice or many rows index the map."""
    from memstore.index import vectors

    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 16)).astype(np.float32)
    scale = vectors.make_scales(x)
    m, errs = vectors.quantize(x, scale)
    vectors.write_scales(tmp_path, 1, scale)
    vectors.write_rows(tmp_path, 1, 0, m, errs, np.arange(300, dtype=np.float64))
    vec, _ = vectors.open_matrix(tmp_path, 1, 300, 16)
    vec = vec.codes
    rows = np.array([0, 7, 8, 150, 299])
    assert np.array_equal(vectors.take_rows(vec, rows), m[rows])
    assert np.array_equal(vectors.take_rows(vec[100:], np.array([1, 2])), m[[101, 102]])
    assert vectors.take_rows(vec, np.zeros(0, np.int64)).shape == (0, 16)
    with pytest.raises(IndexError):
        vectors.take_rows(vec, np.array([300]))
    with open(vectors.matrix_path(tmp_path, 1), "r+b") as f:
        f.truncate(299 * 16 + 10)  # the file cut under a map that was opened before
    with pytest.raises(IndexError, match="cut short"):
        vectors.take_rows(vec, np.array([299]))


def test_ivf_nprobe_setting_is_the_cells_a_query_scans(filled, monkeypatch):
    """`[settings] ivf_nprobe` sets how many cells an IVF query scans (default ann.IVF_NPROBE):
    one cell finds fewer of the exact neighbours than all of them."""
    monkeypatch.setattr(ann, "IVF_MIN_ROWS", 10)
    index = filled.index(update=False)
    queries = ("budget", "trip hotel", "review schedule", "invoice garden", "flight note")

    def recall(nprobe):
        filled.config.settings["ivf_nprobe"] = nprobe
        hits = 0
        for query in queries:
            q = filled.embedder.embed_query(query)
            exact = {r for r, _ in vector_candidates(index, q, Filters(), 10, method="exact")}
            approx = vector_candidates(index, q, Filters(), 10, method="ivf")
            hits += len(exact & {r for r, _ in approx})
        assert ann.scanner_for(index, "ivf").nprobe == nprobe
        return hits

    assert recall(1) < recall(ann.IVF_NPROBE) == recall(65536)  # every cell
