"""The index reads a day's pack vectors in one pass (index/build.py `_pack_vectors`): every record
still gets the vector of the first pack (by name) that holds it, bit for bit, and every damaged,
missing or foreign vector the same problem, in line order, that a record-by-record lookup gave."""

from __future__ import annotations

import contextlib
import datetime as dt
import json

import numpy as np
import pytest

from conftest import make_store, write_turns

DAY = "2026-11-30"
DIM = 384
# A pack that another must sort after is drawn below LOW, so that one's draw (of a random nonce)
# finds a name above it within a few tries: an unbounded first draw near "ff…" left 500 tries too
# few about once in 170 runs.
LOW = "8"
PACKS = f"packs/2026/{DAY}"


def _records(store, n):
    from memstore.format import record as recordfmt
    from memstore.format import seal

    out = []
    for k in range(n):
        rec = store.normalize(
            {"ts": f"{DAY}T{k // 60:02d}:{k % 60:02d}:07Z", "role": "user", "text": f"note {k}"}
        )
        rec["hash"] = recordfmt.text_hash(rec["text"])
        rec["vkey"] = seal.record_key(rec["id"], rec["text"])
        out.append(rec)
    return out


def _key(rec):
    from memstore.format import seal

    return seal.key_bytes(rec["vkey"])


def _f32(vec):
    from memstore.format.segment import DT_VEC_F32, Header

    body = np.asarray(vec, "<f4").tobytes()
    return Header(-1, -1, len(body), DT_VEC_F32, len(vec), 1.0, 0), body


def _sealed(store, items, before=None, after=None):
    """A sealed pack of `items` [(record, header, body, hash16 or None)], its name drawn (by its
    random nonce) to sort before `before` or after `after` when given."""
    from memstore.format import pack as packfmt

    for _ in range(500):
        w = packfmt.PackWriter(DAY, DIM)
        for rec, header, body, h16 in items:
            w.add_encoded(rec["id"], _key(rec), h16 or rec["hash"][:16], header, body)
        name = packfmt.pack_name(w.to_bytes())
        if (before is None or name < before) and (after is None or name > after):
            return w.write(store.root).name
    raise AssertionError("no nonce gave a pack name in the wanted order")


def _clear(store, items, before=LOW):
    """A format-2 pack (items in the clear, named by record id), as stores before format 3 hold;
    its name (the hash of its bytes) drawn below `before` by the spaces after its manifest."""
    from memstore.format import pack as packfmt
    from memstore.format.segment import DT_JSON, Header

    rows, segs = [], []
    for k, (rec, header, body) in enumerate(items):
        segs.append(header.pack() + body)
        rows.append([rec["id"], rec["hash"][:16], k + 1])
    text = json.dumps({"pack": 2, "day": DAY, "dim": DIM, "records": rows})
    for pad in range(500):
        manifest = (text + " " * pad).encode()
        data = Header(-1, -1, len(manifest), DT_JSON, 0, 1.0, 0).pack() + manifest + b"".join(segs)
        if packfmt.pack_name(data) < before:
            break
    else:
        raise AssertionError("no padding gave a pack name in the wanted order")
    folder = packfmt.day_dir(store.root, DAY)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / packfmt.pack_name(data)).write_bytes(data)
    return packfmt.pack_name(data)


def _error_of(line):
    from memstore.format import record as recordfmt

    try:
        recordfmt.loads(line)
    except recordfmt.RecordError as exc:
        return str(exc)
    raise AssertionError(f"{line!r} is a good line")


@pytest.fixture
def damaged_day(tmp_path):
    """A day of 18 lines whose vectors are good, missing, foreign, NaN, of another size, int8,
    held twice, in a format-2 pack, or in a pack whose copy will not open; with a line that is no JSON and one forgotten record.

    Returns (store, {line number: expected vector, or the problem expected for it})."""
    from memstore.format import log as logfmt
    from memstore.format import pack as packfmt
    from memstore.format import seal
    from memstore.format import tombstones
    from memstore.format.segment import DT_VEC_F32, DT_VEC_I8, HEADER_SIZE, Header

    store = make_store(tmp_path / "s")
    recs = _records(store, 15)
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((15, DIM)).astype(np.float32)
    nan = vecs[3].copy()
    nan[7] = np.nan
    inf = vecs[9].copy()
    inf[0] = np.inf
    codes = rng.integers(-127, 128, DIM).astype(np.int8)
    i8 = Header(-1, -1, DIM, DT_VEC_I8, DIM, 0.03125, 0), codes.tobytes()
    later = vecs[4] + 1  # r4's other copy, in a pack that sorts after the first
    first = _sealed(
        store,
        [
            (recs[0], *_f32(vecs[0]), None),
            (recs[2], *_f32(vecs[2]), "0123456789abcdef"),  # made from other text
            (recs[3], *_f32(nan), None),
            (recs[4], *_f32(vecs[4]), None),
            (recs[5], *i8, None),
            (recs[6], *_f32(vecs[6][:3]), None),  # 3 dimensions
            (recs[9], *_f32(inf), None),
            (
                recs[10],
                Header(-1, -1, 100, DT_VEC_F32, DIM, 1.0, 0),
                b"\0" * 100,
                None,
            ),  # payload cut short
            (recs[12], Header(-1, -1, 4 * DIM, DT_VEC_F32, 3, 1.0, 0), vecs[12].tobytes(), None),
        ],
        before=LOW,
    )
    _sealed(store, [(recs[4], *_f32(later), None), (recs[7], *_f32(vecs[7]), None)], after=first)
    # r8 in a format-2 pack only; r11 in both kinds of pack, the format-2 one first by name
    clear = _clear(store, [(recs[8], *_f32(vecs[8])), (recs[11], *_f32(vecs[11]))])
    _sealed(store, [(recs[11], *_f32(-vecs[11]), None)], after=clear)
    # r13's first copy is damaged (a byte of its seal flipped), the next pack's copy opens; r14,
    # in the damaged pack too, after r13 in the day, still opens there
    broken = packfmt.day_dir(store.root, DAY) / _sealed(
        store,
        [(recs[14], *_f32(vecs[14]), None), (recs[13], *_f32(-vecs[13]), None)],
        before=LOW,
    )
    pk = packfmt.read(broken)
    tag = seal.tag(_key(recs[13]), bytes.fromhex(pk.manifest["nonce"]), seal.VECTOR)
    seg = next(row[-1] for row in pk.manifest["records"] if row[0] == tag)
    data = bytearray(broken.read_bytes())
    data[pk.offsets[seg] + HEADER_SIZE + 5] ^= 1  # within r13's sealed bytes
    broken.write_bytes(bytes(data))
    _sealed(store, [(recs[13], *_f32(vecs[13]), None)], after=broken.name)
    lines = (
        [json.dumps(r) for r in recs[:6]] + ["this is not json"] + [json.dumps(r) for r in recs[6:]]
    )
    lines.append(json.dumps(recs[0]))  # a merge kept a record's line twice: both get its vector
    gone = store.normalize({"ts": f"{DAY}T23:00:00Z", "role": "user", "text": "gone"})
    lines.append(json.dumps(gone))
    (store.root / tombstones.FILENAME).write_text(json.dumps({"id": gone["id"]}) + "\n")
    path = logfmt.day_path(store.root, DAY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    log = f"{path}"
    where = f"{PACKS}/{first}"
    i8_vec = codes.astype(np.float32) * np.float32(0.03125)
    expected = {
        1: vecs[0],
        2: f"record {recs[1]['id']}: no vector in {PACKS}/",
        3: f"{where}: vector of record {recs[2]['id']} was made from other text "
        f"(hash16 0123456789abcdef, the record's is {recs[2]['hash'][:16]})",
        4: f"{where}: vector of record {recs[3]['id']} holds NaN or Infinity",
        5: vecs[4],  # the first pack by name, not `later`
        6: i8_vec,
        7: f"{log}:7: {_error_of('this is not json')}",
        8: f"{where}: vector of record {recs[6]['id']} has 3 dimensions, the store uses {DIM}",
        9: vecs[7],
        10: vecs[8],
        11: f"{where}: vector of record {recs[9]['id']} holds NaN or Infinity",
        12: f"{where}: vector of record {recs[10]['id']}: float32 payload is 100 bytes for dim {DIM}",
        13: vecs[11],  # the format-2 copy: its pack sorts first
        14: f"{where}: vector of record {recs[12]['id']}: float32 payload is {4 * DIM} bytes "
        "for dim 3",
        15: vecs[13],
        16: vecs[14],
        17: vecs[0],
        18: f"{log}:18: {tombstones.BACK.format(rid=gone['id'])}",
    }
    return store, expected


def test_each_record_gets_the_vector_or_the_problem_a_lookup_record_by_record_gave(damaged_day):
    from memstore.index import exact

    store, expected = damaged_day
    index = store.index()
    rows, _, _ = index._read_day(DAY)
    problems = [v for v in expected.values() if isinstance(v, str)]
    assert rows.problems == problems
    assert index.problems() == problems
    # a line whose vector is bad still gets its row (found by words), without a vector
    assert [r[1] for r in rows.rows] == [n for n in expected if n not in (7, 18)]
    for row, vec in zip(rows.rows, rows.vectors):
        want = expected[row[1]]
        if isinstance(want, str):
            assert vec is None and row[11] is None, row[1]
        else:
            assert vec.dtype == np.float32 and vec.tobytes() == want.tobytes(), row[1]
    # where each vector lies (records.vkey) opens to the same vector
    vrows = [v for (v,) in index.conn.execute("SELECT vrow FROM records WHERE vrow >= 0")]
    got, read_problems = exact.rows(index, vrows)
    want = [
        expected[n]
        for (n,) in index.conn.execute("SELECT line_no FROM records WHERE vrow >= 0 ORDER BY vrow")
    ]
    assert read_problems == [] and got.tobytes() == np.stack(want).astype(np.float32).tobytes()


def test_a_pack_that_will_not_parse_is_named_before_the_first_record_it_fails(damaged_day):
    store, expected = damaged_day
    from memstore.format import pack as packfmt

    bad = packfmt.day_dir(store.root, DAY) / ("f" * 64 + ".is")
    bad.write_bytes(b"\xff" * 10)
    rows, _, _ = store.index()._read_day(DAY)
    said = [p for p in rows.problems if bad.name in p]
    assert len(said) == 1 and "header is 10 bytes" in said[0]
    # said before the first record that looks in the packs (line 1), the rest as before
    assert rows.problems.index(said[0]) == 0
    assert [p for p in rows.problems if p != said[0]] == [
        v for v in expected.values() if isinstance(v, str)
    ]


@pytest.mark.parametrize(
    "ts",
    [
        "2026-11-30T06:08:11.000000Z",
        "2026-11-30T06:08:11.123457Z",
        "1000-01-01T00:00:00.000001Z",
        "9998-12-31T23:59:59.999999Z",
        "1969-12-31T23:59:59.999999Z",
        "2026-11-30T06:08:11Z",
        "2026-11-30T06:08:11.5+02:00",
        "2026-11-30 06:08:11.000000Z",
        "2026-11-30T06:08:11.000000z",
        1764482891.25,
    ],
)
def test_the_canonical_ts_is_read_to_the_same_seconds(ts):
    from memstore.format.timeutil import from_iso
    from memstore.index.build import _seconds

    assert _seconds(ts) == from_iso(ts).timestamp()


def test_every_microsecond_form_reads_to_the_general_parsers_seconds():
    from memstore.format.timeutil import from_iso, to_iso
    from memstore.index.build import _seconds

    rng = np.random.default_rng(3)
    base = dt.datetime(1000, 1, 1, tzinfo=dt.timezone.utc)
    for us in rng.integers(0, 9000 * 365 * 86400 * 10**6, 20_000).tolist():
        ts = to_iso(base + dt.timedelta(microseconds=us))
        assert _seconds(ts) == from_iso(ts).timestamp(), ts


@pytest.mark.parametrize("ts", ["2026-11-30T25:08:11.000000Z", "2026-02-30T06:08:11.000000Z"])
def test_an_impossible_ts_raises_as_the_general_parser_does(ts):
    from memstore.index.build import _seconds

    with pytest.raises(ValueError):
        _seconds(ts)


def _index_state(index):
    vecs, times = index.matrix()
    rows = index.conn.execute("SELECT * FROM records ORDER BY rowid").fetchall()
    indexes = index.conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
    ).fetchall()
    return rows, indexes, vecs.codes[:].tobytes(), vecs.errors[:].tobytes(), times[:].tobytes()


def test_an_empty_index_places_new_rows_where_a_rebuild_does(damaged_day):
    """Into an empty index the append path, and a rebuild, give each new row its vector row
    before inserting it (the matrix order day, ts, line_no, id, worked out in Python): the order
    SQLite sorts them in, and the same rows, vector rows, codes and times either way."""
    store, _ = damaged_day
    write_turns(
        store,
        [
            ("2026-12-01T09:00:00Z", "user", "later in the day, written first", "s", "x"),
            ("2026-12-01T08:00:00Z", "user", "earlier in the day, written second", "s", "x"),
            ("2026-11-29T08:00:00Z", "user", "the day before", "s", "x"),
        ],
    )
    for p in store.meta_dir.glob("index.db*"):
        p.unlink()
    index = store.index(update=False)
    index.close()
    assert not index.update().rebuild  # the append path, not a rebuild
    appended = _index_state(index)
    rows = appended[0]
    # vrow: 7 of the damaged day's 16 rows have no vector
    assert len(rows) == 19 and sum(r[14] >= 0 for r in rows) == 12
    _assert_matrix_order(index)
    index.update(rebuild=True)
    assert _index_state(index) == appended
    _assert_matrix_order(index)


def _assert_matrix_order(index):
    """Vector rows 0..n-1 in the order SQLite sorts the rows by (day, ts, line_no, id)."""
    conn = index.conn
    by_sql = conn.execute(
        "SELECT rowid FROM records WHERE vrow >= 0 ORDER BY day, ts, line_no, id"
    ).fetchall()
    by_vrow = conn.execute("SELECT rowid, vrow FROM records WHERE vrow >= 0 ORDER BY vrow")
    assert [(r,) for r, _ in by_vrow] == by_sql
    vrows = [v for (v,) in conn.execute("SELECT vrow FROM records WHERE vrow >= 0 ORDER BY vrow")]
    assert vrows == list(range(len(by_sql)))


def test_a_bulk_load_leaves_the_full_text_settings_as_they_were(tmp_path):
    """A bulk load turns FTS5's automerge off while its rows go in (the optimize after it merges
    them all) and puts it back: fts_config holds what it held before, row for row."""
    store = make_store(tmp_path / "s")
    write_turns(
        store, [(f"2026-11-30T0{h}:00:00Z", "user", f"note {h}", "s", "x") for h in range(3)]
    )
    index = store.index()
    fresh = index.conn.execute("SELECT k, v FROM fts_config ORDER BY k").fetchall()
    assert ("automerge",) not in [r[:1] for r in fresh]
    index.update(rebuild=True)  # a bulk load
    assert index.conn.execute("SELECT k, v FROM fts_config ORDER BY k").fetchall() == fresh
    with index.conn:
        index.conn.execute("INSERT INTO fts(fts, rank) VALUES ('automerge', 8)")
    index.update(rebuild=True)
    assert ("automerge", 8) in index.conn.execute("SELECT k, v FROM fts_config").fetchall()
    hits = index.conn.execute("SELECT rowid FROM fts WHERE fts MATCH 'note'").fetchall()
    assert len(hits) == 3


def test_a_bulk_load_writes_with_a_big_page_cache_and_puts_it_back(tmp_path, monkeypatch):
    """A bulk load's rows go in with SQLite's page cache at BULK_CACHE_KIB (at the default 2 MB a
    100k-turn import read its pages back and wrote them again); afterwards the connection has the
    size it had, and a small update never changes it."""
    from memstore.index import build

    store = make_store(tmp_path / "s")
    write_turns(
        store, [(f"2026-11-30T0{h}:00:00Z", "user", f"note {h}", "s", "x") for h in range(3)]
    )
    index = store.index()
    before = index.conn.execute("PRAGMA cache_size").fetchone()[0]
    seen: list[int] = []
    real = build.Index._apply_rows

    def spy(self, plan, conn, *rest):
        seen.append(conn.execute("PRAGMA cache_size").fetchone()[0])
        return real(self, plan, conn, *rest)

    monkeypatch.setattr(build.Index, "_apply_rows", spy)
    index.update(rebuild=True)  # a bulk load
    assert seen == [-build.BULK_CACHE_KIB] and before != -build.BULK_CACHE_KIB
    assert index.conn.execute("PRAGMA cache_size").fetchone()[0] == before
    write_turns(store, [("2026-12-01T09:00:00Z", "user", "one more note", "s", "x")])
    store.index()  # a small update: the cache as it was, while the row goes in too
    assert seen[1:] == [before]
    assert index.conn.execute("PRAGMA cache_size").fetchone()[0] == before
    hits = store.index().conn.execute("SELECT rowid FROM fts WHERE fts MATCH 'note'").fetchall()
    assert len(hits) == 4


def _segments_after_small_writes(conn) -> int:
    """FTS5 segments left after 200 one-row transactions (automerge folds them as they come)."""
    import random

    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(6)) for _ in range(5000)]
    for i in range(200):
        with conn:
            body = " ".join(rng.choice(words) for _ in range(300))
            conn.execute("INSERT INTO fts (rowid, body) VALUES (?, ?)", (i + 1, body))
    return conn.execute("SELECT COUNT(DISTINCT segid) FROM fts_idx").fetchone()[0]


@pytest.mark.parametrize("load", ["succeeds", "fails"])
def test_after_a_bulk_load_the_connection_merges_full_text_segments_as_before(load):
    """FTS5 keeps its settings per connection too: the one that loaded goes on merging the
    segments later writes make as a connection that never turned merging off."""
    from memstore.sqlitedb import sqlite3

    from memstore.index.build import SCHEMA, Index

    plain = sqlite3.connect(":memory:")
    plain.executescript(SCHEMA)
    if load == "succeeds":  # the same row, without turning merging off
        with plain:
            plain.execute("INSERT INTO fts (rowid, body) VALUES (100000, 'bulk')")
    loaded = sqlite3.connect(":memory:")
    loaded.executescript(SCHEMA)
    with pytest.raises(RuntimeError) if load == "fails" else contextlib.nullcontext():
        with loaded, Index._fts_merging_off(loaded, True):
            loaded.execute("INSERT INTO fts (rowid, body) VALUES (100000, 'bulk')")
            if load == "fails":
                raise RuntimeError("a failed load rolls back")
    off = sqlite3.connect(":memory:")
    off.executescript(SCHEMA)
    with off:
        off.execute("INSERT INTO fts(fts, rank) VALUES ('automerge', 0)")
    merged = _segments_after_small_writes(plain)
    assert _segments_after_small_writes(loaded) == merged
    assert _segments_after_small_writes(off) > merged  # what the count tells apart


def test_a_bulk_load_gathers_its_terms_in_one_segment_and_leaves_no_setting_behind(monkeypatch):
    """A bulk load lets FTS5 hold FTS_BULK_HASH bytes of terms before it writes a segment: rows
    whose terms overflow the default 1 MB several times over go in as one segment, not one per MB,
    and fts_config holds no row of the settings afterwards (SQLite's defaults stand)."""
    import random
    from memstore.sqlitedb import sqlite3

    from memstore.index import build
    from memstore.index.build import SCHEMA, Index

    rng = random.Random(7)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(40_000)
    ]
    bodies = [(i + 1, " ".join(rng.choice(words) for _ in range(200))) for i in range(4_000)]

    def segments(bulk: bool) -> tuple[int, list]:
        conn = sqlite3.connect(":memory:")
        conn.executescript(SCHEMA)
        with conn, Index._fts_merging_off(conn, bulk):
            conn.executemany("INSERT INTO fts (rowid, body) VALUES (?, ?)", bodies)
        return (
            conn.execute("SELECT COUNT(DISTINCT segid) FROM fts_idx").fetchone()[0],
            conn.execute("SELECT k FROM fts_config WHERE k != 'version'").fetchall(),
        )

    assert segments(True) == (1, [])
    assert segments(False)[0] > 1  # (what the count tells apart)
    # an SQLite that refuses the setting (here: refusing its value) loads the rows as before,
    # a segment per megabyte, and has no setting left behind either
    monkeypatch.setattr(build, "FTS_BULK_HASH", -1)
    many, left = segments(True)
    assert many > 1 and left == []


@pytest.mark.parametrize("rows", [1, 7, 16_384 + 5])
def test_quantize_gives_the_codes_and_errors_of_its_formula_bit_for_bit(rows):
    """index/vectors.quantize works in place in one buffer; its numbers are still those of
    codes = clip(rint(x * scale)), error = next float32 up of ||x - codes / scale|| in float64."""
    from memstore.index.vectors import CODE_MAX, make_scales, quantize

    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, DIM)).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 1e-30, 3.0]
    scale = make_scales(x[: max(1, rows // 2)])  # rows past these scales are clipped
    x64, s = x.astype(np.float64), scale.astype(np.float64)
    want = np.clip(np.rint(x64 * s), -CODE_MAX, CODE_MAX)
    err = np.sqrt(((x64 - want / s) ** 2).sum(axis=1))
    codes, errors = quantize(x, scale)
    assert codes.tobytes() == want.astype(np.int8).tobytes()
    assert errors.tobytes() == np.nextafter(err.astype(np.float32), np.float32(np.inf)).tobytes()
    assert rows < 7 or (np.abs(codes) == CODE_MAX).any()
    # the rows as a list of views (how the index hands them over, stacked a chunk at a time):
    # the same scales, codes and errors, bit for bit
    half = [x[i] for i in range(max(1, rows // 2))]
    assert make_scales(half).tobytes() == scale.tobytes()
    listed = quantize([x[i] for i in range(rows)], scale)
    assert listed[0].tobytes() == codes.tobytes() and listed[1].tobytes() == errors.tobytes()
    # and the largest |value| found whichever chunk holds it
    big = np.zeros((40_000, DIM), np.float32)
    big[-1, 3], big[20_000, 5] = -9.0, 4.0
    top = CODE_MAX / make_scales(list(big))
    assert np.isclose(top[3], 9.0) and np.isclose(top[5], 4.0)
    assert make_scales(list(big)).tobytes() == make_scales(big).tobytes()
