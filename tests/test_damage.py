"""Damage that must be named or repaired (issue 26): non-finite numbers refused at input, a damaged
index rebuilt instead of crashing searches, committed day logs missing from the work tree restored,
corrupt git objects named, a killed upgrade pointing at `ct upgrade`."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pytest

from conftest import commits, ct, git_clean, log_records, make_store

from memstore.format.segment import ShardWriter


# ----- NaN and Infinity are refused at input -------------------------------------------------------


@pytest.mark.parametrize(
    "line, field",
    [
        ('{"ts":"2026-11-20T08:00:00Z","role":"user","text":"a","score":NaN}', "meta.score"),
        ('{"ts":"2026-11-20T08:00:00Z","role":"user","text":"a","meta":{"v":[1,Infinity]}}', "meta.v[1]"),
        ('{"ts":"2026-11-20T08:00:00Z","role":"user","text":"a","source":{"w":-Infinity}}', "source.w"),
    ],
)
def test_jsonl_import_refuses_nan_and_infinity_naming_file_line_and_field(tmp_path, store, line, field):
    good = '{"ts":"2026-11-20T07:00:00Z","role":"user","text":"fine"}'
    path = tmp_path / "turns.jsonl"
    path.write_text(f"{good}\n{line}\n")
    head = commits(store.root)
    proc = ct("-C", store.root, "import", "jsonl", path, check=False)
    assert proc.returncode == 4, proc.stderr
    assert f"{path}:2: field '{field}'" in proc.stderr and "JSON cannot store" in proc.stderr
    assert "Nothing was imported" in proc.stderr
    assert commits(store.root) == head and git_clean(store.root) and not log_records(store.root)


def test_api_add_refuses_a_nan_in_meta_and_no_log_line_is_invalid_json(store):
    from memstore.errors import UsageError

    with pytest.raises(UsageError, match="cannot add: field 'meta.score' is NaN"):
        store.add("a turn", meta={"score": float("nan")})
    assert not log_records(store.root) and git_clean(store.root)


def test_a_record_with_infinity_is_never_serialised_into_a_day_log():
    from memstore.format.record import RecordError, dumps

    with pytest.raises(RecordError, match="field 'meta.x' is Infinity"):
        dumps({"ts": "2026-11-20T07:00:00Z", "text": "a", "meta": {"x": float("inf")}})


def _unit(seed: int, dim: int = 384) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def test_contexttape_import_refuses_a_nan_vector_naming_its_segment(tmp_path, store):
    tape = tmp_path / "tape"
    sw = ShardWriter(tape)
    sw.write_pair("a fine pair", _unit(1), "float32", 1764500000)
    bad = _unit(2)
    bad[7] = np.nan
    assert sw.write_pair("a pair whose vector is broken", bad, "float32", 1764500060) == (2, 3)
    model = store.config.embedder["model"]
    proc = ct("-C", store.root, "import", "contexttape", tape, "--model", model, check=False)
    assert proc.returncode == 4, proc.stderr
    assert f"{tape / 'segment_3.is'}: vector (of text segment 2) holds NaN or Infinity" in proc.stderr
    assert not log_records(store.root) and git_clean(store.root)


def test_a_write_refuses_non_finite_vectors_naming_the_record(store):
    from memstore.errors import FormatError
    from memstore.format import pack as packfmt
    from memstore.store import refuse_non_finite

    recs = [{"id": "a"}, {"id": "b"}]
    vecs = np.stack([_unit(1), np.full(384, np.inf, np.float32)])
    with pytest.raises(FormatError, match=r"turns.jsonl:9: its vector holds NaN or Infinity \(1 of 2 vectors"):
        refuse_non_finite(recs, vecs, {id(recs[1]): "turns.jsonl:9"}, "hash")
    refuse_non_finite(recs, vecs[:1].repeat(2, axis=0), {}, "hash")  # finite: no error
    with pytest.raises(packfmt.PackError, match="vector of record b holds NaN"):
        packfmt.PackWriter("2026-11-20", 384).add_vector("b", "0" * 64, vecs[1], "float32", 0)


def test_a_nan_vector_already_in_a_pack_is_damage_and_never_ranks_first(store):
    """A pack written before the checks: fsck names it, and the index leaves the vector out."""
    from memstore.format import pack as packfmt
    from memstore.format.segment import DT_VEC_F32, Header

    store.add("kyoto trains run on time", ts="2026-11-20T08:00:00Z")
    store.add("budget for the hotel in osaka", ts="2026-11-20T09:00:00Z")
    rec = next(r for r in log_records(store.root) if "osaka" in r["text"])
    day = packfmt.day_dir(store.root, "2026-11-20")
    for p in packfmt.pack_files(day):  # the osaka vector becomes NaN: the pack is rewritten under its new name
        pk = packfmt.read(p)
        if rec["id"] not in pk.vectors():
            continue
        w = packfmt.PackWriter("2026-11-20", 384)
        body = np.full(384, np.nan, "<f4").tobytes()
        w.add_encoded(rec["id"], rec["hash"][:16], Header(-1, -1, len(body), DT_VEC_F32, 384, 1.0, 0), body)
        p.unlink()
        w.write(store.root)
    out = ct("-C", store.root, "fsck", check=False)
    assert out.returncode == 1 and f"vector of {rec['id']} holds NaN or Infinity" in out.stdout
    hits = json.loads(ct("-C", store.root, "search", "kyoto trains", "--json").stdout)["hits"]
    assert hits and "kyoto" in hits[0]["text"]


# ----- a damaged index is rebuilt, never a traceback --------------------------------------------------


def _indexed_store(tmp_path):
    st = make_store(tmp_path / "store")
    for i in range(5):
        st.add(f"note {i} about kyoto trains", ts=f"2026-11-2{i}T08:00:00Z")
    st.index().close()
    return st


def _damage_index(st, how: str) -> None:
    meta = st.meta_dir
    if how == "not a database":
        (meta / "index.db").write_bytes(b"this is not sqlite" * 300)
        for p in meta.glob("index.db-*"):
            p.unlink()
    elif how == "truncated vectors":
        (vec,) = meta.glob("vectors-*.f32")
        with open(vec, "r+b") as fh:
            fh.truncate(100)
    elif how == "missing vectors":
        (vec,) = meta.glob("vectors-*.f32")
        vec.unlink()
    else:
        conn = sqlite3.connect(meta / "index.db")
        conn.execute("DROP TABLE records" if how == "no table" else "DROP TABLE days")
        conn.commit()
        conn.close()


HOW = ["not a database", "truncated vectors", "missing vectors", "no table", "no days table"]


@pytest.mark.parametrize("how", HOW)
def test_a_read_that_meets_a_damaged_index_rebuilds_it_with_one_note(tmp_path, how):
    st = _indexed_store(tmp_path)
    _damage_index(st, how)
    proc = ct("-C", st.root, "search", "kyoto", "--json", check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    notes = [ln for ln in proc.stderr.splitlines() if "rebuilding the index" in ln]
    assert len(notes) == 1 and ".memstore/" in notes[0], proc.stderr
    assert len(json.loads(proc.stdout)["hits"]) == 5
    again = ct("-C", st.root, "search", "kyoto")
    assert "rebuilding" not in again.stderr  # rebuilt once


@pytest.mark.parametrize("how", HOW)
def test_fsck_names_a_damaged_index_and_repair_rebuilds_it(tmp_path, how):
    st = _indexed_store(tmp_path)
    _damage_index(st, how)
    out = ct("-C", st.root, "fsck", check=False)
    assert out.returncode == 1 and "DAMAGE  .memstore/" in out.stdout and "rebuilds it" in out.stdout, out.stdout
    fixed = json.loads(ct("-C", st.root, "fsck", "--repair", "--json").stdout)
    assert fixed["ok"] and fixed["repair"]["index"]["rebuilt"]
    assert ct("-C", st.root, "fsck").returncode == 0


@pytest.mark.parametrize("how", HOW)
def test_index_rebuild_of_a_damaged_index_works(tmp_path, how):
    st = _indexed_store(tmp_path)
    _damage_index(st, how)
    proc = ct("-C", st.root, "index", "-B", check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert ct("-C", st.root, "fsck").returncode == 0
    assert "kyoto" in ct("-C", st.root, "search", "kyoto").stdout


def test_a_page_corrupt_index_is_named_by_fsck_and_rebuilt_by_index_rebuild(tmp_path):
    """Damage only SQLite's quick_check sees (a page overwritten in the middle)."""
    st = _indexed_store(tmp_path)
    db = st.meta_dir / "index.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    data = bytearray(db.read_bytes())
    page = 4096
    assert len(data) > 4 * page
    data[3 * page + 8 : 3 * page + 400] = b"\xff" * 392  # a b-tree page's cells become garbage
    db.write_bytes(bytes(data))
    out = ct("-C", st.root, "fsck", check=False)
    assert out.returncode == 1 and ".memstore/index.db" in out.stdout, out.stdout
    proc = ct("-C", st.root, "index", "-B", check=False)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert ct("-C", st.root, "fsck").returncode == 0
