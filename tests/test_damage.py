"""Damage that must be named or repaired (issue 26): non-finite numbers refused at input, a damaged
index rebuilt instead of crashing searches, committed day logs missing from the work tree restored,
corrupt git objects named, a killed upgrade pointing at `ct upgrade`."""

from __future__ import annotations

import json
import os
from memstore.sqlitedb import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import commits, ct, git_clean, log_records, make_store

from memstore.format.segment import ShardWriter
from test_upgrade import old_code  # noqa: F401  (the fixture: the previous release, for format-1 stores)


# ----- NaN and Infinity are refused at input -------------------------------------------------------


@pytest.mark.parametrize(
    "line, field",
    [
        ('{"ts":"2026-11-20T08:00:00Z","role":"user","text":"a","score":NaN}', "meta.score"),
        (
            '{"ts":"2026-11-20T08:00:00Z","role":"user","text":"a","meta":{"v":[1,Infinity]}}',
            "meta.v[1]",
        ),
        (
            '{"ts":"2026-11-20T08:00:00Z","role":"user","text":"a","source":{"w":-Infinity}}',
            "meta.source.w",  # an export's own `source` is kept under meta
        ),
    ],
)
def test_jsonl_import_refuses_nan_and_infinity_naming_file_line_and_field(
    tmp_path, store, line, field
):
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
    assert (
        f"{tape / 'segment_3.is'}: vector (of text segment 2) holds NaN or Infinity" in proc.stderr
    )
    assert not log_records(store.root) and git_clean(store.root)


def test_a_write_refuses_non_finite_vectors_naming_the_record(store):
    from memstore.errors import FormatError
    from memstore.format import pack as packfmt
    from memstore.core import refuse_non_finite

    recs = [{"id": "a"}, {"id": "b"}]
    vecs = np.stack([_unit(1), np.full(384, np.inf, np.float32)])
    with pytest.raises(
        FormatError, match=r"turns.jsonl:9: its vector holds NaN or Infinity \(1 of 2 vectors"
    ):
        refuse_non_finite(recs, vecs, {id(recs[1]): "turns.jsonl:9"}, "hash")
    refuse_non_finite(recs, vecs[:1].repeat(2, axis=0), {}, "hash")  # finite: no error
    with pytest.raises(packfmt.PackError, match="vector of record b holds NaN"):
        packfmt.PackWriter("2026-11-20", 384).add_vector(
            "b", bytes(32), "0" * 64, vecs[1], "float32", 0
        )


def test_a_nan_vector_already_in_a_pack_is_damage_and_never_ranks_first(store):
    """A pack written before the checks: fsck names it, and the index leaves the vector out."""
    from memstore.format import pack as packfmt
    from memstore.format.segment import DT_VEC_F32, Header

    store.add("kyoto trains run on time", ts="2026-11-20T08:00:00Z")
    store.add("budget for the hotel in osaka", ts="2026-11-20T09:00:00Z")
    rec = next(r for r in log_records(store.root) if "osaka" in r["text"])
    day = packfmt.day_dir(store.root, "2026-11-20")
    from memstore.format import seal

    key = seal.key_bytes(rec["vkey"])
    for p in packfmt.pack_files(
        day
    ):  # the osaka vector becomes NaN: the pack is rewritten under its new name
        pk = packfmt.read(p)
        if (rec["id"], key) not in pk.vectors([(rec["id"], key)]):
            continue
        w = packfmt.PackWriter("2026-11-20", 384)
        body = np.full(384, np.nan, "<f4").tobytes()
        w.add_encoded(
            rec["id"],
            key,
            rec["hash"][:16],
            Header(-1, -1, len(body), DT_VEC_F32, 384, 1.0, 0),
            body,
        )
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
        (vec,) = meta.glob("vectors-*.i8")
        with open(vec, "r+b") as fh:
            fh.truncate(100)
    elif how == "missing vectors":
        (vec,) = meta.glob("vectors-*.i8")
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
    assert (
        out.returncode == 1 and "DAMAGE  .memstore/" in out.stdout and "rebuilds it" in out.stdout
    ), out.stdout
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


# ----- committed records missing from the work tree ----------------------------------------------


def _two_days(store):
    for i in range(4):
        store.add(f"first day note {i} about trains", ts=f"2026-11-29T0{i}:00:00Z")
    store.add("second day note", ts="2026-11-30T08:00:00Z")
    return store.root / "log/2026/2026-11-29.jsonl"


def test_a_deleted_committed_day_log_is_damage_and_repair_restores_it(store):
    log = _two_days(store)
    committed = log.read_bytes()
    log.unlink()
    out = ct("-C", store.root, "fsck", check=False)
    assert out.returncode == 1, out.stdout
    assert (
        "DAMAGE  log/2026/2026-11-29.jsonl: the committed day log is missing from the work tree"
        in out.stdout
    )
    assert "ct forget" not in out.stdout  # the records are not gone: nothing to forget
    ct("-C", store.root, "fsck", "--repair")
    assert log.read_bytes() == committed and git_clean(store.root)
    assert ct("-C", store.root, "fsck").returncode == 0


def test_a_truncated_committed_day_log_is_restored_keeping_a_line_added_since(store):
    log = _two_days(store)
    committed = log.read_bytes()
    lines = committed.split(b"\n")
    added = json.dumps(
        {
            "ts": "2026-11-29T09:00:00Z",
            "role": "user",
            "type": "text",
            "text": "typed by hand",
            "id": "byhand",
        }
    ).encode()
    log.write_bytes(
        lines[0] + b"\n" + lines[1][:40] + b"\n" + added + b"\n"
    )  # cut mid-line, then a line added
    out = ct("-C", store.root, "fsck", check=False)
    assert out.returncode == 1 and "lacks 3 of its committed records (truncated" in out.stdout, (
        out.stdout
    )
    fixed = ct("-C", store.root, "fsck", "--repair")
    assert log.read_bytes() == committed and git_clean(store.root)
    assert "1 files restored from HEAD" in fixed.stdout and "1 uncommitted records" in fixed.stdout
    kept = list((store.meta_dir / "rolled-back").rglob("2026-11-29.jsonl"))
    assert (
        kept and kept[0].read_bytes() == added + b"\n"
    )  # the person's line is not thrown away unseen
    assert ct("-C", store.root, "fsck").returncode == 0


def test_a_truncated_log_whose_committed_record_was_edited_is_left_alone(store):
    log = _two_days(store)
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(lines[0].replace(b"note 0", b"NOTE 0") + b"\n")
    fixed = ct("-C", store.root, "fsck", "--repair", check=False)
    assert fixed.returncode == 1 and "left alone: log/2026/2026-11-29.jsonl" in fixed.stdout
    assert b"NOTE 0" in log.read_bytes()


# ----- corrupt git objects are named by path ----------------------------------------------------------


def _loose_object(root, path: str):
    import subprocess

    oid = subprocess.run(
        ["git", "-C", str(root), "rev-parse", f"HEAD:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    obj = root / ".git" / "objects" / oid[:2] / oid[2:]
    obj.chmod(0o644)
    return oid, obj


def test_fsck_names_a_corrupt_git_object_of_a_committed_file(store):
    import zlib

    _two_days(store)
    path = "log/2026/2026-11-30.jsonl"
    oid, obj = _loose_object(store.root, path)
    obj.write_bytes(b"garbage")  # not zlib at all
    out = ct("-C", store.root, "fsck", check=False)
    assert (
        out.returncode == 1
        and f"DAMAGE  {path}: its committed git object {oid[:12]} is damaged" in out.stdout
    )

    pack = next(p for p in (store.root / "packs").rglob("*.is") if "2026-11-29" in str(p))
    rel = store.rel(pack)
    oid2, obj2 = _loose_object(store.root, rel)
    raw = zlib.decompress(obj2.read_bytes())
    obj2.write_bytes(zlib.compress(raw[:-4] + b"XXXX"))  # inflates, but to other bytes
    out = ct("-C", store.root, "fsck", check=False)
    assert (
        f"DAMAGE  {rel}: its committed git object {oid2[:12]} is damaged: its bytes do not hash"
        in out.stdout
    )
    assert f"DAMAGE  {path}:" in out.stdout  # the first one is still named
    obj2.write_bytes(obj2.read_bytes()[:20])  # cut short: git dies streaming it
    out = ct("-C", store.root, "fsck", check=False)
    assert (
        f"DAMAGE  {rel}: its committed git object {oid2[:12]} is damaged: git cannot read it"
        in out.stdout
    )
    assert out.stdout.count("is damaged") == 2, out.stdout  # and no object after it is blamed


# ----- a killed upgrade says "ct upgrade" -------------------------------------------------------------


def _killed_upgrade(old_code, tmp_path, when: str):
    """A format-1 store whose `ct upgrade` died (os._exit, as a SIGKILL: no cleanup) inside its write."""
    import subprocess
    import sys

    from test_upgrade import old_ct, records

    root = tmp_path / "store"
    old_ct(old_code, "init", root, "--embedder", "hash", "--timezone", "UTC")
    old_ct(old_code, "-C", root, "add", "the ficus needs water", "--ts", "2026-11-20T08:00:00Z")
    old_ct(old_code, "-C", root, "add", "the budget is 2400", "--ts", "2026-11-21T08:00:00Z")
    before = records(root)
    die = {  # after everything but the commit, or before segments/ is removed (the config already says 2)
        "before commit": "def dying(store, res):\n    orig(store, res)\n    os._exit(137)\nup._apply = dying\n",
        "before segments go": "up.shutil.rmtree = lambda *a, **k: os._exit(137)\n",
    }[when]
    code = (
        f"import os, memstore.upkeep.upgrade as up\norig = up._apply\n{die}"
        f"from memstore.cli import main\nmain(['-C', {str(root)!r}, 'upgrade'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 137, proc.stderr
    assert not git_clean(root)
    return root, before


@pytest.mark.parametrize("when", ["before commit", "before segments go"])
def test_a_killed_upgrade_is_met_with_run_ct_upgrade(old_code, tmp_path, when):
    from test_upgrade import records

    root, before = _killed_upgrade(old_code, tmp_path, when)
    out = ct("-C", root, "fsck", check=False)
    assert (
        out.returncode == 1 and 'run "ct upgrade"' in out.stdout and "git add" not in out.stdout
    ), out.stdout
    fixed = ct("-C", root, "fsck", "--repair")
    assert (
        "Rolled back an upgrade to format 3" in fixed.stdout
        and '"ct upgrade" upgrades it again' in fixed.stdout
    )
    assert "git add" not in fixed.stdout, fixed.stdout
    assert git_clean(root) and records(root) == before
    assert ct("-C", root, "fsck").returncode == 0
    ct("-C", root, "upgrade")
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"] and git_clean(root)


def test_a_read_after_a_killed_upgrade_undoes_it_whole(old_code, tmp_path):
    from test_upgrade import records

    root, before = _killed_upgrade(old_code, tmp_path, "before commit")
    assert "ficus" in ct("-C", root, "search", "ficus").stdout
    assert git_clean(root) and records(root) == before  # never half rolled back
    ct("-C", root, "upgrade")
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"]


# ----- a killed ct sync needs one repair ---------------------------------------------------------------


def test_a_sync_killed_inside_git_merge_is_undone_by_one_repair(tmp_path):
    """git killed before its merge commit leaves MERGE_HEAD and the merged files: that merge is ct's own."""
    import subprocess
    import sys

    from test_crash import _git, committed_lines

    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    a = make_store(tmp_path / "a").root
    _git(a, "remote", "add", "origin", str(remote))
    ct("-C", a, "add", "from a before", "--ts", "2026-11-20T08:00:00Z")
    ct("-C", a, "sync", "--set-upstream", "origin")
    b = tmp_path / "b"
    _git(tmp_path, "clone", "-q", str(remote), str(b))
    ct("-C", b, "add", "from b", "--ts", "2026-11-20T09:00:00Z")
    ct("-C", b, "sync")
    ct("-C", a, "add", "from a after", "--ts", "2026-11-20T10:00:00Z")
    before = committed_lines(a)
    code = (
        "import os, subprocess, memstore.upkeep.sync as sy\n"
        "def dying(store, res):\n"
        "    subprocess.run(['git', '-C', str(store.root), 'merge', '--no-commit', '-q', 'refs/remotes/' + res.upstream])\n"
        "    os._exit(137)\n"
        "sy._merge = dying\n"
        f"from memstore.cli import main\nmain(['-C', {str(a)!r}, 'sync'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 137, proc.stderr
    assert (a / ".git" / "MERGE_HEAD").exists() and not git_clean(a)
    ct("-C", a, "fsck", "--repair")
    rep = json.loads(ct("-C", a, "fsck", "--json").stdout)
    assert rep["ok"] and not rep["warnings"], rep
    assert (
        git_clean(a) and not (a / ".git" / "MERGE_HEAD").exists() and committed_lines(a) == before
    )
    ct("-C", a, "sync")
    texts = {json.loads(v)["text"] for v in committed_lines(a).values()}
    assert texts == {"from a before", "from b", "from a after"}


def test_a_person_s_unfinished_merge_is_still_refused_by_repair(tmp_path):
    a = make_store(tmp_path / "a")
    a.add("one", ts="2026-11-20T08:00:00Z")
    head = (a.root / ".git" / "HEAD").read_text()
    (a.root / ".git" / "MERGE_HEAD").write_text(
        __import__("subprocess")
        .run(["git", "-C", str(a.root), "rev-parse", "HEAD"], capture_output=True, text=True)
        .stdout
    )
    out = ct("-C", a.root, "fsck", "--repair", check=False)
    assert out.returncode != 0 and "in the middle of a merge" in out.stderr
    assert (a.root / ".git" / "MERGE_HEAD").exists() and (
        a.root / ".git" / "HEAD"
    ).read_text() == head


# ----- text without whitespace is chunked at the chunk size -------------------------------------------


@pytest.mark.parametrize("text", ["a" * 300_000, "0123456789abcdef" * 20_000, "é" * 100_000])
def test_text_without_whitespace_is_cut_at_the_chunk_size(text):
    from memstore.adapters.hashing import HashEmbedder
    from memstore.ingest.chunk import chunk

    chunks = chunk(text, "text", HashEmbedder().count_tokens, 256, 32)
    assert "".join(c.text for c in chunks) == text  # still exact slices
    assert max(len(c.text) for c in chunks) < (256 - 32 + 1) * 16  # 224 tokens of 16 characters
    assert len(chunks) >= len(text) // ((256 - 32) * 16)


def test_ingesting_a_whitespace_free_file_makes_records_of_the_chunk_size(tmp_path, store):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "blob.txt").write_text("x" * 200_000 + "\n")
    ct("-C", store.root, "ingest-path", folder)
    texts = [r["text"] for r in log_records(store.root)]
    assert "".join(texts) == "x" * 200_000 + "\n"
    assert len(texts) >= 200_000 // 3600 and max(map(len, texts)) < 3600


def test_a_sync_killed_after_git_committed_its_merge_but_before_it_removed_merge_head_needs_one_repair(
    tmp_path,
):
    """git removes MERGE_HEAD only after its post-merge hook: a kill in between leaves the merge
    committed and MERGE_HEAD behind. One repair finishes git's clean-up (it refused before)."""
    import subprocess
    import time

    from conftest import make_store

    def g(root, *args):
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    a = make_store(tmp_path / "a").root
    g(a, "remote", "add", "origin", str(remote))
    ct("-C", a, "sync", "--set-upstream", "origin")
    b = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(remote), str(b)], check=True)
    for root in (a, b):
        g(root, "config", "user.name", "t")
        g(root, "config", "user.email", "t@example.invalid")
    ct("-C", b, "add", "from b", "--ts", "2026-11-20T08:00:00Z")
    g(b, "push", "-q")
    ct("-C", a, "add", "from a", "--ts", "2026-11-20T09:00:00Z")
    before = g(a, "rev-parse", "HEAD")
    g(a, "fetch", "-q", "origin")
    subprocess.run(
        ["git", "-C", str(a), "merge", "-q", "--no-edit", "origin/main"],
        check=True,
        env={**__import__("os").environ, "MEMSTORE_COMMITTING": "1"},
    )
    (a / ".git" / "MERGE_HEAD").write_text(
        g(a, "rev-parse", "origin/main") + "\n"
    )  # what the kill left
    journal = {"pid": 999999, "started": time.time() - 5, "head": before, "merge": True}
    (a / ".memstore" / "write-journal.json").write_text(json.dumps(journal))
    out = ct("-C", a, "fsck", "--repair", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (a / ".git" / "MERGE_HEAD").exists()
    assert ct("-C", a, "fsck").returncode == 0
