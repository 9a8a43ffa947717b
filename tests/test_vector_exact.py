"""The int8 matrix and exact search: results and scores equal a float32 scan of the pack vectors."""

from __future__ import annotations

import numpy as np
import pytest

from memstore.format import pack as packfmt
from memstore.format.timeutil import from_iso
from memstore.bench.index_size import pack_matrix
from memstore.index import ann, exact
from memstore.index import vectors as vecfiles
from memstore.retrieve.search import Filters, search, vector_candidates


def write_vectors(store, vecs: np.ndarray, day: int = 1, start: int = 0, texts=None):
    """One turn per vector (given, not embedded), a minute apart on 2026-03-<day>."""
    recs = []
    for i in range(len(vecs)):
        n = start + i
        recs.append(
            store.normalize(
                {
                    "ts": f"2026-03-{day:02d}T{(n // 60) % 24:02d}:{n % 60:02d}:00Z",
                    "role": "user",
                    "text": texts[i] if texts else f"turn number {n} of the vector test",
                    "session": "s1",
                    "actor": "me",
                }
            )
        )
    given = {id(r): np.asarray(v, np.float32) for r, v in zip(recs, vecs)}
    store.write(recs, f"Add {len(recs)} turns", given_vectors=given)


def brute_force(store, index, q: np.ndarray, k: int, since=None) -> list[tuple[str, float]]:
    """(record id, cosine) of the k best rows by a float32 scan of every vector the packs hold."""
    rows, x = pack_matrix(store, index, since)
    scores = (x @ np.asarray(q, np.float64)).astype(np.float32)
    order = np.lexsort(([r[1] for r in rows], -scores))[:k]
    return [(rows[i][0], float(scores[i])) for i in order]


def ids_before(index, until: float) -> set[str]:
    return {r for (r,) in index.conn.execute("SELECT id FROM records WHERE ts < ?", (until,))}


def ids_of(index, hits) -> list[tuple[str, float]]:
    return [(index.record_at(r)["id"], s) for r, s in hits]


def unit(x):
    x = np.asarray(x, np.float32)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def test_the_matrix_is_int8_codes_with_scales_and_errors(store):
    rng = np.random.default_rng(1)
    write_vectors(store, unit(rng.standard_normal((300, 384))))
    index = store.index()
    gen = int(index._meta(index.conn, "gen", "0"))
    names = {p.name for p in store.meta_dir.iterdir()}
    assert f"vectors-{gen}.i8" in names and f"scales-{gen}.f32" in names
    assert not any(n.endswith(".f32") and n.startswith("vectors-") for n in names)
    assert (store.meta_dir / f"vectors-{gen}.i8").stat().st_size == 300 * 384
    assert (store.meta_dir / f"errors-{gen}.f32").stat().st_size == 300 * 4
    vecs, _ = index.matrix()
    x = exact.rows(index, range(300))[0]
    err = np.linalg.norm(x.astype(np.float64) - vecs[:].astype(np.float64), axis=1)
    assert np.all(err <= np.asarray(vecs.errors, np.float64) * (1 + 1e-5))  # r bounds ||x - x_hat||
    assert np.all(np.asarray(vecs.errors) < 0.05)


@pytest.mark.parametrize("seed", [2, 3])
def test_vector_search_equals_a_float32_scan_of_the_pack_vectors(store, seed):
    rng = np.random.default_rng(seed)
    write_vectors(store, unit(rng.standard_normal((400, 384))))
    write_vectors(store, unit(rng.standard_normal((200, 384))), day=2)
    index = store.index()
    for _ in range(5):
        q = unit(rng.standard_normal(384))
        for k in (1, 10, 50):
            got = ids_of(index, vector_candidates(index, q, Filters(), k))
            assert got == brute_force(store, index, q, k)
    since = from_iso("2026-03-02T00:00:00Z").timestamp()
    got = ids_of(index, vector_candidates(index, q, Filters(since=since), 10))
    assert got == brute_force(store, index, q, 10, since=since)
    assert index.problems() == []


def near_ties(rng, n: int, dim: int = 384) -> np.ndarray:
    """n vectors around one direction, apart by far less than an int8 step: their codes tie, so
    only the exact vectors can order them; a few have a dimension far past the first write's
    range (clipped: a large error)."""
    base = unit(rng.standard_normal(dim))
    out = base + 2e-5 * rng.standard_normal((n, dim)).astype(np.float32)
    out[:5, 0] += 0.9
    return unit(out)


def test_near_ties_and_clipped_rows_rank_as_the_float32_scan(store):
    rng = np.random.default_rng(4)
    write_vectors(store, unit(rng.standard_normal((300, 384))))  # fixes the scales
    tied = near_ties(rng, 400)
    write_vectors(store, tied, day=2)
    index = store.index()
    vecs, _ = index.matrix()
    assert float(np.max(vecs.errors)) > 0.3  # clipped rows: their error says so
    for q in (tied[7], tied[0], unit(tied[3] + 0.01 * rng.standard_normal(384))):
        for k in (5, 50):
            got = ids_of(index, vector_candidates(index, q, Filters(), k))
            assert got == brute_force(store, index, q, k)


@pytest.mark.parametrize("method", ["fp16", "int8"])
def test_faiss_stages_bound_what_they_leave_out(store, monkeypatch, method):
    pytest.importorskip("faiss")
    monkeypatch.setattr(ann, "FP16_MIN_ROWS", 10)
    monkeypatch.setattr(ann, "CHUNK_ROWS", 128)
    rng = np.random.default_rng(5)
    write_vectors(store, unit(rng.standard_normal((300, 384))))
    tied = near_ties(rng, 300)
    write_vectors(store, tied, day=2)
    index = store.index()
    for q in (tied[11], unit(rng.standard_normal(384))):
        got = ids_of(index, vector_candidates(index, q, Filters(), 20, method=method))
        assert got == brute_force(store, index, q, 20)


def test_hidden_rows_stay_out_and_hybrid_uses_exact_cosines(store):
    rng = np.random.default_rng(6)
    vecs = unit(rng.standard_normal((120, 384)))
    write_vectors(store, vecs)
    index = store.index()
    q = vecs[3]
    top = ids_of(index, vector_candidates(index, q, Filters(), 5))
    assert top[0][0] == brute_force(store, index, q, 1)[0][0]
    hits = search(store, "turn number 3", k=5, mode="hybrid", qvec=q)
    x = exact.rows(
        index,
        [
            index.conn.execute(
                "SELECT vrow FROM records WHERE rowid = ?", (hits[0].rowid,)
            ).fetchone()[0]
        ],
    )[0][0]
    assert hits[0].parts["vector"]["score"] == round(
        float((x.astype(np.float64) @ q.astype(np.float64)).astype(np.float32)), 6
    )


def pack_of(store) -> list:
    return [p for d in packfmt.all_pack_days(store.root).values() for p in packfmt.pack_files(d)]


def test_a_vanished_pack_is_a_problem_not_a_crash(store):
    rng = np.random.default_rng(7)
    write_vectors(store, unit(rng.standard_normal((50, 384))))
    index = store.index()
    q = unit(rng.standard_normal(384))
    want = ids_of(index, vector_candidates(index, q, Filters(), 5))
    for p in pack_of(store):
        p.unlink()
    index.__dict__.pop("_exact_reader", None)
    got = ids_of(index, vector_candidates(index, q, Filters(), 5))
    assert len(got) == 5 and {i for i, _ in got} & {i for i, _ in want}
    assert any("no such pack" in p for p in index.problems())


def test_a_damaged_pack_item_is_a_problem_not_a_crash(store):
    rng = np.random.default_rng(8)
    write_vectors(store, unit(rng.standard_normal((50, 384))))
    index = store.index()
    (path,) = pack_of(store)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    q = unit(rng.standard_normal(384))
    index.__dict__.pop("_exact_reader", None)
    for v in range(50):
        exact.rows(index, [v])
    got = vector_candidates(index, q, Filters(), 50)
    assert len(got) == 50
    assert any("does not open" in p for p in index.problems())


def _closed_index_of(store, seed: int, n: int):
    """(a query, its top 10 ids, the generation) of n random vectors written and indexed; the
    index closed, so a test can damage its files."""
    rng = np.random.default_rng(seed)
    write_vectors(store, unit(rng.standard_normal((n, 384))))
    index = store.index()
    q = unit(rng.standard_normal(384))
    want = ids_of(index, vector_candidates(index, q, Filters(), 10))
    gen = int(index._meta(index.conn, "gen", "0"))
    index.close()
    return q, want, gen


@pytest.mark.parametrize(
    "damage", ["nan scale", "short scales", "short errors", "codes cut", "where cut"]
)
def test_damaged_or_planted_vector_files_are_rebuilt(store, damage):
    from memstore.index.build import Index

    q, want, gen = _closed_index_of(store, seed=9, n=80)
    meta = store.meta_dir
    if damage == "nan scale":
        raw = bytearray(vecfiles.scales_path(meta, gen).read_bytes())
        raw[8:12] = np.float32(np.nan).tobytes()
        vecfiles.scales_path(meta, gen).write_bytes(bytes(raw))
    elif damage == "short scales":
        vecfiles.scales_path(meta, gen).write_bytes(b"\x00" * 12)
    elif damage == "short errors":
        vecfiles.errors_path(meta, gen).write_bytes(b"\x00" * 12)
    elif damage == "where cut":
        path = vecfiles.where_path(meta, gen)
        path.write_bytes(path.read_bytes()[: -vecfiles.WHERE_ROW.size])
    else:
        path = vecfiles.matrix_path(meta, gen)
        path.write_bytes(path.read_bytes()[:-400])
    fresh = Index(store)
    fresh.conn  # noqa: B018 (opening it finds the damage)
    assert fresh.dropped and "rebuilding" in (fresh.note or "")
    fresh.update()
    assert ids_of(fresh, vector_candidates(fresh, q, Filters(), 10)) == want


def test_an_index_of_the_previous_schema_is_rebuilt(store):
    from memstore.index.build import Index

    write_vectors(store, unit(np.random.default_rng(10).standard_normal((20, 384))))
    index = store.index()
    with index.conn:
        index.conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")
    index.close()
    (store.meta_dir / "vectors-7.f32").write_bytes(b"\0" * 20 * 384 * 4)  # schema 4's matrix
    fresh = Index(store)
    fresh.conn  # noqa: B018
    assert fresh.dropped and not (store.meta_dir / "vectors-7.f32").exists()
    fresh.update()
    assert len(fresh.matrix()[0]) == 20


def test_the_reader_keeps_a_bounded_number_of_packs_open(store, monkeypatch):
    """A long-lived reader of a store of many days closes the least recently used pack file."""
    monkeypatch.setattr(exact, "OPEN_PACKS_MAX", 2)
    rng = np.random.default_rng(11)
    for day in (1, 2, 3, 4):
        write_vectors(store, unit(rng.standard_normal((5, 384))), day=day, start=10 * day)
    index = store.index()
    x, problems = exact.rows(index, range(20))
    assert problems == [] and x.shape == (20, 384)
    reader = exact.reader(index)
    assert len(reader._fds) == 2
    again, _ = exact.rows(index, [0, 19, 5, 12])
    assert np.array_equal(again, x[[0, 19, 5, 12]])


def test_the_index_keeps_upper_bounds_of_code_norms_and_errors(store):
    """meta's code_norm_max and error_max are never below a row's (appends raise them, a back-dated
    write that renumbers keeps them, a rebuild makes them anew): a faiss stage's bound uses them."""

    def check(index, equal=False):
        vecs, _ = index.matrix()
        norms = np.sqrt((np.asarray(vecs.codes, np.float64) ** 2).sum(axis=1))
        cmax = float(index._meta(index.conn, "code_norm_max"))
        emax = float(index._meta(index.conn, "error_max"))
        assert cmax >= norms.max() and emax >= float(np.max(vecs.errors))
        if equal:
            assert cmax == pytest.approx(norms.max()) and emax == float(np.max(vecs.errors))
        assert vecs.code_norm_max() == cmax and vecs.err_max() == emax

    rng = np.random.default_rng(12)
    write_vectors(store, unit(rng.standard_normal((300, 384))), day=2)
    check(store.index(), equal=True)
    big = unit(rng.standard_normal((3, 384)))
    big[:, :4] += 2.0  # past the scales: clipped, a larger error
    write_vectors(store, unit(big), day=3)
    check(store.index())
    write_vectors(store, unit(rng.standard_normal((4, 384))), day=1, start=900)  # back-dated
    check(store.index())
    index = store.index()
    index.update(rebuild=True)
    check(index, equal=True)


def test_format_1_segments_and_format_2_clear_packs_give_their_exact_vectors(tmp_path):
    """A format-1 record's location is its segment; a format-2 pack item (in the clear) is found
    by the pack's name, offset and length: both read back the vector as stored."""
    import json

    from test_packs import git
    from test_packs import format1_store

    from memstore.format import log as logfmt
    from memstore.format import record as recordfmt
    from memstore.format.segment import DT_JSON, Header, encode_vector
    from memstore.format.timeutil import zone
    from memstore.store import Store

    st = Store.open(format1_store(tmp_path / "one"))
    index = st.index()
    got, problems = exact.rows(index, range(3))
    texts = [
        index.record_at(r)["text"]
        for (r,) in index.conn.execute("SELECT rowid FROM records ORDER BY vrow")
    ]
    assert problems == [] and np.array_equal(got, st.embedder.embed_batch(texts))

    from conftest import make_store

    st = make_store(tmp_path / "two")
    rng = np.random.default_rng(13)
    vecs = unit(rng.standard_normal((3, 384)))
    recs, segs, rows = [], [], []
    for k in range(3):
        rec = recordfmt.normalize(
            {"ts": f"2026-11-30T0{k}:00:00Z", "role": "user", "text": f"clear {k}"}, zone("UTC")
        )
        rec["hash"] = recordfmt.text_hash(rec["text"])
        dtype, body, scale = encode_vector(vecs[k], "float32")
        segs.append(Header(-1, -1, len(body), dtype, 384, scale, 0).pack() + body)
        rows.append([rec["id"], packfmt.hash16(rec["hash"]), k + 1])
        recs.append(rec)
    manifest = json.dumps({"pack": 2, "day": "2026-11-30", "dim": 384, "records": rows}).encode()
    data = Header(-1, -1, len(manifest), DT_JSON, 0, 1.0, 0).pack() + manifest + b"".join(segs)
    folder = packfmt.day_dir(st.root, "2026-11-30")
    folder.mkdir(parents=True)
    (folder / packfmt.pack_name(data)).write_bytes(data)
    logfmt.append(logfmt.day_path(st.root, "2026-11-30"), recs, fsync=False)
    git(st.root, "add", "-A")
    git(st.root, "commit", "-qm", "a format-2 pack")
    index = st.index()
    assert index.problems() == []
    order = [r["id"] for r in recs]
    vrows = dict(index.conn.execute("SELECT id, vrow FROM records"))
    got, problems = exact.rows(index, [vrows[i] for i in order])
    assert problems == [] and np.array_equal(got, vecs)
    assert all(len(loc) == 16 for (loc,) in index.conn.execute("SELECT vkey FROM records"))


@pytest.mark.parametrize(
    "plant", ["zero errors", "negative error", "code -128", "codes swapped", "where swapped"]
)
def test_fsck_holds_the_matrix_against_the_packs(store, plant):
    """Files of the right size with values this code never writes (or that do not belong to the
    rows' vectors) are damage for `ct fsck`, and `ct index -B` rebuilds them."""
    from conftest import ct

    from memstore.index.build import check

    q, want, gen = _closed_index_of(store, seed=14, n=100)
    assert check(store) is None
    meta = store.meta_dir
    errs = np.fromfile(vecfiles.errors_path(meta, gen), "<f4")
    codes = np.fromfile(vecfiles.matrix_path(meta, gen), np.int8).reshape(100, 384)
    if plant == "zero errors":
        errs[:] = 0
    elif plant == "negative error":
        errs[3] = -1
    elif plant == "code -128":
        codes[5, 7] = -128
    elif plant == "where swapped":  # each row then names another record (and its vector)
        size = vecfiles.WHERE_ROW.size
        raw = bytearray(vecfiles.where_path(meta, gen).read_bytes())
        raw[:size], raw[99 * size : 100 * size] = raw[99 * size : 100 * size], raw[:size]
        vecfiles.where_path(meta, gen).write_bytes(bytes(raw))
    else:
        codes[[0, 99]] = codes[[99, 0]]
    errs.tofile(vecfiles.errors_path(meta, gen))
    codes.tofile(vecfiles.matrix_path(meta, gen))
    assert check(store) is not None
    proc = ct("-C", store.root, "fsck", check=False)
    assert proc.returncode == 1 and "DAMAGE" in proc.stdout + proc.stderr
    ct("-C", store.root, "index", "-B")
    assert check(store) is None
    fresh = store.index()
    assert ids_of(fresh, vector_candidates(fresh, q, Filters(), 10)) == want


def test_the_index_size_bench_reports_bytes_speed_and_recall(store, capsys):
    from memstore.bench import index_size

    write_vectors(store, unit(np.random.default_rng(15).standard_normal((60, 384))))
    store.index()
    index_size.main([str(store.root), "--recall", "--queries", "4", "--repeats", "1"])
    out = capsys.readouterr().out
    assert f"vectors-{store.index()._meta(store.index().conn, 'gen')}.i8" in out
    assert "B a record (60 records)" in out and "warm hybrid Store.search" in out
    assert "recall@10 against a float32 scan of the 60 pack vectors: 1.000" in out
    assert "identical top 10 (ids and scores): 4/4" in out


def test_windows_tails_and_hidden_rows_equal_the_float32_scan(store):
    """Back-dated rows (the matrix's unsorted tail), superseded records (hidden) and time windows
    that cut through both: the hits are still those of a float32 scan over the allowed rows."""
    rng = np.random.default_rng(16)
    base = unit(rng.standard_normal(384))
    near = lambda n: unit(base + 0.35 * rng.standard_normal((n, 384)))  # noqa: E731
    write_vectors(store, near(200), day=5)
    write_vectors(store, near(60), day=3, start=300)  # before every indexed row: the tail
    index = store.index()
    assert index.sorted_rows() < len(index.matrix()[0])
    old = [r for (r,) in index.conn.execute("SELECT id FROM records ORDER BY ts LIMIT 12")]
    recs = [store.normalize({"ts": "2026-03-06T10:00:00Z", "role": "user",
                             "text": "a correction", "supersedes": old})]  # fmt: skip
    store.write(recs, "Supersede", given_vectors={id(recs[0]): base})
    index = store.index()
    assert index.conn.execute("SELECT COUNT(*) FROM records WHERE hidden != 0").fetchone()[0] > 0
    day = lambda d, h=0: from_iso(f"2026-03-{d:02d}T{h:02d}:00:00Z").timestamp()  # noqa: E731
    for since, until in ((None, None), (day(3, 0), day(5, 2)), (day(3, 0), day(3, 0) + 1800)):
        for q in (base, unit(rng.standard_normal(384))):
            got = ids_of(index, vector_candidates(index, q, Filters(since=since, until=until), 15))
            want = brute_force(store, index, q, 10**6, since=since)
            want = [w for w in want if until is None or w[0] in ids_before(index, until)][:15]
            assert got == want


def test_reading_rows_asks_the_kernel_for_every_uncached_vector_before_the_first_read(
    store, monkeypatch
):
    """Candidates' vectors are read from packs that may have left the page cache: `exact.rows`
    first reads what the page cache holds without waiting, then advises the kernel of every other
    row's bytes (one posix_fadvise WILLNEED each, at the item's offset and length), so the reads
    wait for the slowest, not for each in turn."""
    import os

    rng = np.random.default_rng(21)
    write_vectors(store, unit(rng.standard_normal((30, 384))), day=1)
    write_vectors(store, unit(rng.standard_normal((30, 384))), day=2, start=30)
    index = store.index()
    rows = np.array([0, 7, 29, 31, 45, 59])
    where = exact.locations(index, rows.tolist())
    before = exact.rows(index, rows)[0]
    events = []
    real_pread = os.pread
    monkeypatch.setattr(
        os, "posix_fadvise", lambda fd, off, n, how: events.append(("advise", off, n, how))
    )
    monkeypatch.setattr(
        os, "pread", lambda fd, n, off: events.append(("read", off, n)) or real_pread(fd, n, off)
    )

    def cold(fd, buffers, off, flags):  # as the kernel answers for bytes it does not hold
        events.append(("try", off))
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(exact, "_NOWAIT", cold)
    got, problems = exact.rows(index, rows)
    assert problems == []
    wanted = sorted(exact._SEALED.unpack(loc)[2:] for _day, loc in where.values())
    packs = [(i, e) for i, e in enumerate(events) if e[0] != "read" or tuple(e[1:]) in wanted]
    kinds = [e[0] for _, e in packs]  # (the where file's own reads left out)
    assert kinds == ["try"] * len(rows) + ["advise"] * len(rows) + ["read"] * len(rows), kinds
    advised = [e[1:3] for e in events if e[0] == "advise"]
    assert sorted(advised) == wanted
    assert all(e[3] == os.POSIX_FADV_WILLNEED for e in events if e[0] == "advise")
    assert np.array_equal(got, before)  # the same vectors either way


def test_vectors_the_page_cache_holds_are_read_without_a_hint_or_a_wait(store, monkeypatch):
    """A warm store pays no read-ahead hint per vector: rows whose bytes are cached are read with
    a read that may not wait (RWF_NOWAIT), and nothing is advised."""
    import os

    if exact._NOWAIT is None:
        pytest.skip("this kernel or Python has no RWF_NOWAIT reads")
    rng = np.random.default_rng(22)
    x = unit(rng.standard_normal((40, 384)))
    write_vectors(store, x, day=1)
    index = store.index()
    rows = np.array([1, 5, 17, 39])
    exact.rows(index, rows)  # their pages are in the cache now
    advised = []
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: advised.append(a))
    got, problems = exact.rows(index, rows)
    assert problems == [] and advised == []
    assert np.array_equal(got, x[rows])


def test_a_candidates_record_and_location_come_from_the_where_file_without_sql(store):
    """exact.locations answers from the matrix's where-<gen>.bin (rowid, day, location), with no
    query on records (a query per row was most of the store's IVF call at 1M); what it answers is
    what index.db holds, and a row that file does not know is asked of index.db."""
    from conftest import write_turns

    write_turns(
        store, [(f"2026-11-01T00:{k:02d}:00Z", "user", f"turn {k}", "s", None) for k in range(5)]
    )
    write_turns(store, [("2026-11-02T00:00:00Z", "user", "next day", "s", None)])
    index = store.index()
    sql = {
        v: (rowid, day, loc)
        for v, rowid, day, loc in index.conn.execute(
            "SELECT vrow, rowid, day, vkey FROM records WHERE vrow >= 0"
        )
    }
    assert sorted(sql) == list(range(6))
    seen = []
    index.conn.set_trace_callback(seen.append)
    rowids = {}
    got = exact.locations(index, list(range(6)), rowids)
    index.conn.set_trace_callback(None)
    assert not [q for q in seen if "records" in q], seen
    assert {v: (rowids[v], *got[v]) for v in got} == sql
    # a row written without locations (unknown there) is asked of index.db, with the same answer
    matrix, _ = index.matrix()
    gen = index._matrix[0][0]
    path = vecfiles.where_path(index.meta_dir, gen)
    raw = bytearray(path.read_bytes())
    size = vecfiles.WHERE_ROW.size
    raw[3 * size : 4 * size] = vecfiles.WHERE_ROW.pack(0, b"\0" * 10, vecfiles.ASK_INDEX, b"")
    path.write_bytes(bytes(raw))
    index.close()
    index = store.index(update=False)
    rowids = {}
    got = exact.locations(index, list(range(6)), rowids)
    assert {v: (rowids[v], *got[v]) for v in got} == sql


def test_a_file_system_without_nowait_reads_still_reads_every_vector(store, monkeypatch):
    """Where a read that may not wait is refused outright (EOPNOTSUPP), every row is read the
    waiting way, advised first, with the same vectors and no problem (not by the general path,
    which is for rows that do not open)."""
    import errno
    import os

    rng = np.random.default_rng(23)
    x = unit(rng.standard_normal((20, 384)))
    write_vectors(store, x, day=1)
    index = store.index()
    rows = np.array([0, 3, 19])

    def refused(fd, buffers, off, flags):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    advised = []
    monkeypatch.setattr(exact, "_NOWAIT", refused)
    monkeypatch.setattr(os, "posix_fadvise", lambda *a: advised.append(a))
    monkeypatch.setattr(exact.Reader, "vector", lambda *a: pytest.fail("the general path"))
    got, problems = exact.rows(index, rows)
    assert problems == [] and len(advised) == 3
    assert np.array_equal(got, x[rows])
