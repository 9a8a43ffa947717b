"""The chunked faiss scans (float16 and int8) and the shared work list of a hybrid search."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from conftest import assert_same_ranking, scan_turns, write_turns

from memstore.index import ann
from memstore.retrieve.search import Filters, hybrid_candidates, vector_candidates

pytest.importorskip("faiss")


@pytest.fixture
def filled(store, monkeypatch):
    monkeypatch.setattr(ann, "FP16_MIN_ROWS", 10)  # the faiss paths from tiny stores on
    monkeypatch.setattr(ann, "INT8_MIN_ROWS", 10)  # "auto" is the int8 scan here
    monkeypatch.setattr(ann, "CHUNK_ROWS", 64)  # several chunks, the last one partial
    rows = scan_turns()
    write_turns(store, rows)
    store.index()
    return store


@pytest.mark.parametrize("method", ["auto", "int8", "fp16"])
def test_chunked_scans_equal_the_exact_scan(filled, method, monkeypatch):
    from memstore.format.timeutil import from_iso

    monkeypatch.setattr(ann, "SPLIT_ROWS", 20)  # chunks shared by two threads
    index = filled.index(update=False)
    window = Filters(
        since=from_iso("2026-01-02T05:00:00Z").timestamp(),
        until=from_iso("2026-01-05T00:00:00Z").timestamp(),
    )
    for query, filters in (
        ("budget review", Filters()),
        ("garden recipe note", window),
        ("flight", window),
    ):
        q = filled.embedder.embed_query(query)
        assert_same_ranking(
            vector_candidates(index, q, filters, 20, method=method),
            vector_candidates(index, q, filters, 20, method="exact"),
        )
    suffix = ".f16" if method == "fp16" else ".q8"
    names = [p.name for p in filled.meta_dir.iterdir()]
    assert any(n.endswith(suffix + ".tail") for n in names)  # the sidecar is kept in .memstore/
    assert any(n.endswith(suffix + ".2") for n in names)  # with its full chunks (64 rows each)


def test_hybrid_shares_the_scan_and_keeps_both_lists(filled, monkeypatch):
    import memstore.retrieve.search as search

    index = filled.index(update=False)
    q = filled.embedder.embed_query("hotel deadline")
    want_exact, want_vec = hybrid_candidates(
        index, "hotel deadline", q, Filters(), 15, method="exact"
    )
    seen = []
    real = ann.Work.run_beside

    def spy(self, fn):
        seen.append(len(self.tasks))
        return real(self, fn)

    monkeypatch.setattr(ann.Work, "run_beside", spy)
    monkeypatch.setattr(search, "THREAD_MIN_ROWS", 20)  # the thread split from tiny stores on
    for method in ("int8", "fp16"):
        exact, vec = hybrid_candidates(index, "hotel deadline", q, Filters(), 15, method=method)
        assert exact == want_exact
        assert_same_ranking(vec, want_vec)
    assert seen == [4, 4]  # 240 rows in chunks of 64: four tasks shared by the two threads


def test_int8_sidecar_reloads_and_extends(filled):
    from memstore.index.build import Index

    index = filled.index(update=False)
    q = filled.embedder.embed_query("hotel deadline")
    before = vector_candidates(index, q, Filters(), 10, method="int8")
    gen = int(index._meta(index.conn, "gen", "0"))
    path = ann.int8_path(index.meta_dir, gen)
    vecs, _ = index.matrix()
    dim = vecs.shape[1]
    # 240 rows in chunks of 64: three full chunks in files of their own, 48 rows in the tail,
    # whose header holds its first row, the width and the scales.
    for k in range(3):
        chunk = index.meta_dir / f"vectors-{gen}.q8.{k}"
        assert (
            chunk.stat().st_size
            == len(ann.faiss_header(ann.Int8Scan.qtype, dim, dim, 64)) + 64 * dim
        )
    assert not (index.meta_dir / f"vectors-{gen}.q8.3").exists()
    assert path.stat().st_size == len(ann.TAIL_MAGIC) + 16 + 4 * dim + 48 * dim
    fresh = Index(filled)  # another process: chunks mapped, the tail read back
    assert vector_candidates(fresh, q, Filters(), 10, method="int8") == before
    scan = ann.scanner_for(fresh, "int8")
    assert scan.full == 192 and [ix.ntotal for ix in scan.chunks] == [64, 64, 64, 48]
    write_turns(
        filled, [("2026-01-09T10:00:00Z", "user", "hotel deadline hotel deadline", "s1", "me")]
    )
    index = filled.index()
    top = vector_candidates(index, q, Filters(), 1, method="int8")
    assert top == vector_candidates(index, q, Filters(), 1, method="exact")
    assert index.record_at(top[0][0])["text"] == "hotel deadline hotel deadline"


def test_a_full_chunk_goes_to_its_own_file_and_a_new_process_maps_it(filled):
    """Filling the tail's chunk writes the chunk file and starts an empty tail; a new process maps
    the chunk files (the codes are not copied into its memory) and reads the tail."""
    from memstore.index.build import Index

    write_turns(
        filled,
        [
            (f"2026-01-09T10:{i:02d}:00Z", "user", f"garden flight note extra {i}", "s2", "me")
            for i in range(16)
        ],
    )  # 256 rows: exactly four chunks
    index = filled.index()
    q = filled.embedder.embed_query("garden flight")
    want = vector_candidates(index, q, Filters(), 10, method="exact")
    assert_same_ranking(vector_candidates(index, q, Filters(), 10, method="int8"), want)
    gen = int(index._meta(index.conn, "gen", "0"))
    assert (index.meta_dir / f"vectors-{gen}.q8.3").exists()
    assert ann.int8_path(index.meta_dir, gen).stat().st_size == len(ann.TAIL_MAGIC) + 16 + 4 * 384
    fresh = Index(filled)
    assert_same_ranking(vector_candidates(fresh, q, Filters(), 10, method="int8"), want)
    scan = ann.scanner_for(fresh, "int8")
    assert scan.full == 256 and all(ix.ntotal == 64 for ix in scan.chunks)
    import faiss

    if hasattr(faiss, "IO_FLAG_MMAP_IFC"):  # mapped, not owned: no private copy of the codes
        assert all(not ix.codes.is_owned for ix in scan.chunks)


@pytest.mark.parametrize(
    "damage",
    ["chunk header", "chunk cut", "chunk gone", "tail magic", "tail scales", "old format"],
)
def test_a_damaged_or_planted_scan_copy_is_rebuilt_not_trusted(filled, damage):
    """.memstore/ may come from someone else's copy: a chunk or tail file that is not exactly what
    this code writes is never handed to faiss as it is; the copy is rebuilt from the matrix."""
    from memstore.index.build import Index

    index = filled.index(update=False)
    q = filled.embedder.embed_query("budget review")
    want = vector_candidates(index, q, Filters(), 10, method="exact")
    vector_candidates(index, q, Filters(), 10, method="int8")
    gen = int(index._meta(index.conn, "gen", "0"))
    chunk, tail = index.meta_dir / f"vectors-{gen}.q8.1", ann.int8_path(index.meta_dir, gen)
    if damage == "chunk header":
        raw = bytearray(chunk.read_bytes())
        raw[4:8] = (1 << 30).to_bytes(4, "little")  # a planted width
        chunk.write_bytes(bytes(raw))
    elif damage == "chunk cut":
        chunk.write_bytes(chunk.read_bytes()[:-100])
    elif damage == "chunk gone":
        chunk.unlink()
    elif damage == "tail magic":
        tail.write_bytes(b"x" * 8 + tail.read_bytes()[8:])
    elif damage == "tail scales":
        raw = bytearray(tail.read_bytes())
        raw[24:28] = np.float32(np.nan).tobytes()
        tail.write_bytes(bytes(raw))
    else:  # what memstore wrote before chunk files, under the tail's name: scales, then codes
        chunk.unlink()
        tail.write_bytes(np.ones(384, np.float32).tobytes() + bytes(240 * 384))
        (index.meta_dir / f"vectors-{gen}.q8").write_bytes(tail.read_bytes())
    fresh = Index(filled)
    assert_same_ranking(vector_candidates(fresh, q, Filters(), 10, method="int8"), want)
    scan = ann.scanner_for(fresh, "int8")
    assert scan.full == 192 and scan.rows == 240
    assert tail.read_bytes().startswith(ann.TAIL_MAGIC)
    assert not (index.meta_dir / f"vectors-{gen}.q8").exists()  # an older memstore's copy: gone


def test_int8_codes_and_query_scale():
    """Each dimension is scaled to ±127 by its largest |value|; the query is scaled back per
    dimension, so the integer dot product ranks rows as the float one does."""
    rng = np.random.default_rng(3)
    m = rng.standard_normal((500, 32)).astype(np.float32)
    m[:, 5] *= 0.01  # a dimension with a small range keeps its resolution
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    from memstore.index import vectors

    scan = ann.Int8Scan.__new__(ann.Int8Scan)
    scan.dim = 32
    scan.scale = vectors.make_scales(m)
    codes = scan._encode(m).reshape(500, 32).astype(np.int16) - 128
    assert codes.min() >= -127 and codes.max() <= 127 and np.abs(codes).max(axis=0).min() == 127
    q = m[7] + 0.05 * rng.standard_normal(32).astype(np.float32)
    approx = codes @ scan.query(q)[0]
    assert set(np.argsort(-approx)[:5]) >= set(np.argsort(-(m @ q))[:3])


def test_work_runs_each_task_once_and_raises_in_the_caller():
    calls = []
    lock = threading.Lock()

    def task(i):
        def run():
            with lock:
                calls.append(i)
            return i * i

        return run

    work = ann.Work([task(i) for i in range(40)])
    assert work.run_beside(lambda: "fts") == "fts"
    assert sorted(calls) == list(range(40)) and work.results() == [i * i for i in range(40)]

    def boom():
        raise ValueError("scan failed")

    work = ann.Work([boom, task(1)])
    work.run_beside(lambda: None)
    with pytest.raises(ValueError, match="scan failed"):
        work.results()


def test_best_keeps_the_highest_scores_of_all_parts():
    parts = [
        (np.array([0.1, 0.9]), np.array([3, 4])),
        None,
        (np.array([0.5, 0.7, 0.2]), np.array([10, 11, 12])),
    ]
    assert sorted(ann.best(parts, 3).tolist()) == [4, 10, 11]
    assert sorted(ann.best(parts, 10).tolist()) == [3, 4, 10, 11, 12]
    assert ann.best([], 5).size == 0


def test_old_generation_sidecars_are_removed(tmp_path):
    from memstore.index import vectors

    names = ("vectors-1.i8", "vectors-2.i8", "vectors-1.f16", "vectors-2.f16", "vectors-1.i8.0")
    for name in (*names, "vectors-2.i8.0", "ivf-1.faiss", "times-1.f64", "tree-cache.json"):
        (tmp_path / name).write_bytes(b"x")
    vectors.remove_generations(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "tree-cache.json",
        "vectors-2.f16",
        "vectors-2.i8",
        "vectors-2.i8.0",
    ]


def test_growing_into_the_int8_scan_drops_the_float16_copy(filled):
    """A store that grows past INT8_MIN_ROWS scans int8 codes; its float16 copy (768 MB at 1M rows)
    is deleted rather than left unused in .memstore/ until the next index generation."""
    index = filled.index(update=False)
    q = filled.embedder.embed_query("hotel deadline")
    gen = int(index._meta(index.conn, "gen", "0"))
    fp16 = vector_candidates(index, q, Filters(), 10, method="fp16")
    assert ann.fp16_path(index.meta_dir, gen).exists()
    assert vector_candidates(index, q, Filters(), 10, method="int8")[0] == fp16[0]
    assert (
        not ann.fp16_path(index.meta_dir, gen).exists()
        and ann.int8_path(index.meta_dir, gen).exists()
    )


def test_building_the_copy_waits_for_another_process_building_it(filled):
    """Making or extending a scan copy writes files that another process may be writing too: it
    takes the scan lock, so a process finds the lock held, waits, and then reads chunk files and
    a tail that agree with the matrix."""
    import os
    import subprocess
    import sys
    import time

    from memstore.index.build import Index
    from memstore.locking import file_lock

    index = filled.index(update=False)
    gen = int(index._meta(index.conn, "gen", "0"))
    for p in index.meta_dir.glob(f"vectors-{gen}.q8*"):
        p.unlink()
    script = (
        "import sys\n"
        "from memstore.index import ann\n"
        "ann.FP16_MIN_ROWS = ann.INT8_MIN_ROWS = 10; ann.CHUNK_ROWS = 64\n"
        "from memstore.store import Store\n"
        "st = Store.open(sys.argv[1], search_parents=False)\n"
        "ix = st.index(update=False)\n"
        "print('ready', flush=True)\n"
        "ann.scanner_for(ix, 'int8')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with file_lock(index.meta_dir / ann.SCAN_LOCK):  # another process is building it
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(filled.root)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.5)
        assert proc.poll() is None  # waiting for the lock
        assert not list(index.meta_dir.glob(f"vectors-{gen}.q8*"))  # and has written nothing
    assert proc.wait(timeout=120) == 0
    fresh = Index(filled)
    scan = ann.scanner_for(fresh, "int8")
    assert scan.full == 192 and scan.rows == 240
    vecs, _ = fresh.matrix()
    import faiss

    codes = np.concatenate([faiss.vector_to_array(ix.codes) for ix in scan.chunks])
    assert np.array_equal(codes, scan._encode(np.asarray(vecs, np.float32)))
