"""The approximate (IVF) vector path: cells over the int8 codes, and candidates settled by exact
scores with as few exact vectors read as their bounds allow (index/ann.py `Ivf`, `settle`)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import scan_turns, write_turns

from memstore.index import ann, exact
from memstore.index import vectors as vecfiles
from memstore.retrieve.search import Filters, vector_candidates

faiss = pytest.importorskip("faiss")


def clustered(n: int, dim: int = 32, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, dim)).astype(np.float32)
    x = centres[rng.integers(0, 20, n)] + 0.4 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def built(tmp_path):
    x = clustered(3000)
    matrix = ann.as_matrix(x)
    return x, matrix, ann.Ivf.build(tmp_path, 1, matrix, threads=1)


def test_ivf_cells_hold_the_matrix_int8_codes(built, tmp_path):
    """Every row sits in one cell with its own int8 codes (a quarter of float32's bytes)."""
    x, matrix, ivf = built
    ix = ivf.index
    assert ix.sq.qtype == faiss.ScalarQuantizer.QT_8bit_direct_signed and not ix.by_residual
    assert ix.ntotal == 3000 and ix.nlist == ann.ivf_cells(3000)
    ix.make_direct_map()
    for row in (0, 1, 1499, 2999):
        assert np.array_equal(ix.reconstruct(row), matrix.codes[row].astype(np.float32))
    assert ann.ivf_path(tmp_path, 1).stat().st_size < 3000 * 32 * 2  # not float16 (or float32)


def test_ivf_search_bounds_every_candidate_exact_cosine(built):
    """The bound `Ivf.search` returns is never below the row's exact cosine, and lies close above."""
    x, matrix, ivf = built
    rng = np.random.default_rng(9)
    for q in clustered(20, seed=4):
        q = q * np.float32(rng.uniform(0.5, 2.0))  # any norm
        rows, bounds = ivf.search(matrix, q, 10, 0, 3000, nprobe=8)
        assert rows.size == 40 and len(set(rows.tolist())) == 40
        cos = x[rows].astype(np.float64) @ q.astype(np.float64)
        assert np.all(bounds + matrix.slack(q) >= cos)
        assert np.all(bounds - cos < 0.1 * np.linalg.norm(q))
        tight = ann.int8_bounds(matrix, q, rows)
        assert np.all(tight + matrix.slack(q) >= cos) and np.all(tight <= bounds + 1e-6)


def test_ivf_search_keeps_to_the_row_range(built):
    x, matrix, ivf = built
    q = clustered(1, seed=5)[0]
    rows, _ = ivf.search(matrix, q, 10, 1000, 2000, nprobe=ivf.index.nlist)
    assert rows.size == 40 and rows.min() >= 1000 and rows.max() < 2000
    assert set(ivf.candidates(q, 10, 1000, 2000, nprobe=ivf.index.nlist).tolist()) == set(
        rows.tolist()
    )


def test_settle_equals_reading_every_candidate_and_reads_fewer(built):
    """`settle` gives the exact top k of the candidates (the same rows and scores as reading all
    of their vectors), reading fewer of them."""
    x, matrix, ivf = built
    read_rows = []

    def read(rows):
        read_rows.extend(rows.tolist())
        return x[rows]

    total = 0
    for q in clustered(30, seed=6):
        rows, bounds = ivf.search(matrix, q, 10, 0, 3000, nprobe=8)
        read_rows.clear()
        got, scores = ann.settle(
            q, rows, bounds, 10, matrix.slack(q), lambda r: ann.int8_bounds(matrix, q, r), read
        )
        s = (x[rows].astype(np.float64) @ q.astype(np.float64)).astype(np.float32)
        want = np.lexsort((rows, -s))[:10]
        assert got.tolist() == rows[want].tolist()
        assert np.allclose(scores, s[want], atol=1e-6)
        assert len(read_rows) == len(set(read_rows))  # none read twice
        total += len(read_rows)
    assert total < 30 * 40 * 0.75


def test_settle_reads_every_candidate_when_the_bounds_cannot_tell(built):
    """Bounds that rule nothing out: every candidate is read, and the answer is still exact."""
    x, matrix, _ = built
    q = clustered(1, seed=7)[0]
    rows = np.arange(100, 140, dtype=np.int64)
    n_read = []

    def read(r):
        n_read.append(len(r))
        return x[r]

    got, _ = ann.settle(
        q, rows, np.full(40, 9.0, np.float32), 10, 0.0, lambda r: np.full(len(r), 9.0), read
    )
    s = x[rows] @ q
    assert got.tolist() == rows[np.lexsort((rows, -s))[:10]].tolist()
    assert sum(n_read) == 40


def test_ivf_load_rebuilds_what_is_not_an_int8_ivf(built, tmp_path):
    """A file at the IVF's path that `build` did not write for this matrix (a float16 IVF of an
    older memstore, another width, not faiss at all) loads as None, so the index is rebuilt;
    `build` removes the float16 file an older memstore kept."""
    x, matrix, ivf = built
    assert ann.Ivf.load(tmp_path, 1, matrix) is not None
    old = faiss.IndexIVFScalarQuantizer(
        faiss.IndexFlatIP(32), 32, 4, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
    )
    old.train(x[:400])
    old.add(x[:400])
    faiss.write_index(old, str(ann.ivf_path(tmp_path, 1)))
    assert ann.Ivf.load(tmp_path, 1, matrix) is None
    ann.ivf_path(tmp_path, 1).write_bytes(b"not an index")
    assert ann.Ivf.load(tmp_path, 1, matrix) is None
    (tmp_path / "ivf-2.faiss").write_bytes(b"float16 cells")
    ann.Ivf.build(tmp_path, 2, matrix, threads=1)
    assert not (tmp_path / "ivf-2.faiss").exists() and ann.ivf_path(tmp_path, 2).exists()


def test_ivf_loads_memory_mapped(built, tmp_path):
    """A loaded IVF maps the file (its codes stay in the page cache, not the process's heap)."""
    x, matrix, _ = built
    if getattr(faiss, "IO_FLAG_MMAP_IFC", None) is None:
        pytest.skip("this faiss maps no index files")
    ivf = ann.Ivf.load(tmp_path, 1, matrix)
    assert ivf.mapped
    q = clustered(1, seed=8)[0]
    rows, bounds = ivf.search(matrix, q, 10, 0, 3000, nprobe=8)
    assert rows.size == 40 and np.all(bounds + matrix.slack(q) >= x[rows] @ q)


def test_ivf_extend_adds_rows_to_the_cells_of_their_decoded_rows(tmp_path):
    x = clustered(2000)
    matrix = ann.as_matrix(x)
    first = vecfiles.Matrix(matrix.codes[:1500], matrix.scale, matrix.errors[:1500])
    ann.Ivf.build(tmp_path, 1, first, threads=1)
    ivf = ann.Ivf.load(tmp_path, 1, first)  # memory-mapped where faiss can: extended all the same
    ivf.extend(tmp_path, matrix)
    assert ivf.rows == 2000
    again = ann.Ivf.load(tmp_path, 1, matrix)
    assert again.rows == 2000
    q = x[1800]
    rows, _ = again.search(matrix, q, 1, 0, 2000, nprobe=4)
    assert 1800 in rows.tolist()


@pytest.fixture
def filled(store, monkeypatch):
    monkeypatch.setattr(ann, "IVF_MIN_ROWS", 10)
    write_turns(store, scan_turns())
    store.index()
    return store


def test_store_ivf_search_reads_fewer_vectors_than_its_candidates(filled, monkeypatch):
    """The store's IVF call (every cell probed: its candidates hold the exact top 10) returns the
    exact scan's hits and scores, reading fewer sealed vectors than the 40 candidates."""
    filled.config.settings["ivf_nprobe"] = 65536
    index = filled.index(update=False)
    reads = []
    real = exact.rows

    def counted(ix, vrows, rowids=None, matrix=None):
        reads.append(len(vrows))
        return real(ix, vrows, rowids, matrix)

    monkeypatch.setattr(exact, "rows", counted)
    total = 0
    for query in ("budget", "trip hotel", "review schedule", "invoice garden", "flight note"):
        q = filled.embedder.embed_query(query)
        want = vector_candidates(index, q, Filters(), 10, method="exact")
        reads.clear()
        got = vector_candidates(index, q, Filters(), 10, method="ivf")
        assert [r for r, _ in got] == [r for r, _ in want]
        assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
        assert 10 <= sum(reads) < 32  # the proof the exact scan runs read 32 at least
        total += sum(reads)
    assert total < 5 * 25  # 89 measured


def test_store_ivf_search_with_a_time_window_its_unsorted_tail_and_hidden_rows(filled):
    """The rows of a time window, those appended out of time order (the unsorted tail) and the
    rows the index hides reach the IVF path as they reach the exact scan."""
    from memstore.format.timeutil import from_iso

    filled.config.settings["ivf_nprobe"] = 65536
    write_turns(filled, [("2026-01-04T10:00:00Z", "user", "budget review budget", "s2", "me")])
    index = filled.index()
    assert index.sorted_rows() < index.matrix()[0].shape[0]  # the new row is the tail
    window = Filters(since=from_iso("2026-01-03T00:00:00Z").timestamp())
    q = filled.embedder.embed_query("budget review")
    want = vector_candidates(index, q, window, 10, method="exact")
    got = vector_candidates(index, q, window, 10, method="ivf")
    assert [r for r, _ in got] == [r for r, _ in want]
    assert index.record_at(got[0][0])["text"] == "budget review budget"
    with index.conn:
        index.conn.execute("UPDATE records SET hidden = 1 WHERE rowid = ?", (got[0][0],))
    want = vector_candidates(index, q, window, 10, method="exact")
    got = vector_candidates(index, q, window, 10, method="ivf")
    assert [r for r, _ in got] == [r for r, _ in want]
    assert want[0][0] != index.conn.execute("SELECT max(rowid) FROM records").fetchone()[0]
