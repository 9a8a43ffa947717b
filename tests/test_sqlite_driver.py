"""One SQLite driver per process (memstore/sqlitedb.py), and a store whose index was made by the
other kind of SQLite: rebuilt, never misread, and every search still answers.

pysqlite3 brings a SQLite that deletes from a full-text table holding no copy of the text
(contentless_delete, 3.43+); Python's own sqlite3 here may be older, and then the full-text table
keeps its copy. A process of each kind is run on one store in turn."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ct_process, make_store
from memstore.sqlitedb import CONTENTLESS_DELETE, sqlite3

# `ct` with Python's own sqlite3: pysqlite3 cannot be imported in this process
STDLIB_CT = (
    "import sys; sys.modules['pysqlite3'] = None; from memstore.cli import run; run(sys.argv[1:])"
)
STDLIB_INFO = (
    "import sys; sys.modules['pysqlite3'] = None; "
    "from memstore.sqlitedb import CONTENTLESS_DELETE, sqlite3; "
    "print(sqlite3.__name__, int(CONTENTLESS_DELETE))"
)


def _stdlib_ct(*args) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-c", STDLIB_CT, *map(str, args)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def _index_kind(root) -> tuple[str, str]:
    """(the index's schema as its meta table says, the full-text table's CREATE statement)."""
    conn = sqlite3.connect(root / ".memstore" / "index.db")
    try:
        schema = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0]
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'fts'").fetchone()[0]
    finally:
        conn.close()
    return schema, sql


def test_the_driver_is_the_one_sqlite_utils_uses():
    from sqlite_utils.utils import sqlite3 as theirs

    assert theirs.sqlite_version == sqlite3.sqlite_version
    assert theirs.Error is sqlite3.Error or theirs.dbapi2.Error is sqlite3.Error


def test_the_fulltext_table_keeps_no_text_where_sqlite_can_delete_from_it(tmp_path):
    from memstore.index.fresh import SCHEMA_ID, SCHEMA_VERSION

    store = make_store(tmp_path / "s")
    ct_process("-C", store.root, "add", "the quokka vault opens on tuesdays")
    schema, sql = _index_kind(store.root)
    assert schema == SCHEMA_ID
    assert ("contentless_delete=1" in sql) == CONTENTLESS_DELETE
    assert SCHEMA_ID == (str(SCHEMA_VERSION) if CONTENTLESS_DELETE else f"{SCHEMA_VERSION}-content")
    conn = sqlite3.connect(store.root / ".memstore" / "index.db")
    bodies = [b for (b,) in conn.execute("SELECT body FROM fts")]
    conn.close()
    assert bodies == ([None] if CONTENTLESS_DELETE else ["the quokka vault opens on tuesdays"])


def test_an_index_made_by_the_other_sqlite_is_rebuilt_and_searches_answer(tmp_path):
    name, stdlib_deletes = subprocess.run(
        [sys.executable, "-c", STDLIB_INFO], capture_output=True, text=True, check=True
    ).stdout.split()
    assert name == "sqlite3"
    store = make_store(tmp_path / "s")
    root = store.root
    for i, text in enumerate(
        ["the quokka vault opens on tuesdays", "apples keep in a cold cellar"]
    ):
        _stdlib_ct("-C", root, "add", "--ts", f"2026-03-0{i + 1}T10:00:00Z", text)
    assert "quokka" in _stdlib_ct("-C", root, "search", "quokka vault").stdout
    made = _index_kind(root)
    assert ("contentless_delete=1" in made[1]) == bool(int(stdlib_deletes))

    # this process's SQLite: the index is its own kind again before the search reads it
    out = ct_process("-C", root, "search", "cold cellar").stdout
    assert "apples" in out and "rebuilding" not in out
    assert ("contentless_delete=1" in _index_kind(root)[1]) == CONTENTLESS_DELETE
    ct_process("-C", root, "add", "--ts", "2026-03-03T10:00:00Z", "pears ripen on the sill")
    assert "pears" in ct_process("-C", root, "search", "pears sill").stdout

    # and back: the other kind rebuilds it in turn, forgets through it, and fsck finds it sound
    assert "quokka" in _stdlib_ct("-C", root, "search", "quokka").stdout
    assert _index_kind(root) == made
    _stdlib_ct("-C", root, "forget", "--match", "quokka vault")
    assert "quokka" not in _stdlib_ct("-C", root, "search", "quokka vault").stdout
    assert "quokka" not in ct_process("-C", root, "search", "quokka vault").stdout
    assert ct_process("-C", root, "fsck").returncode == 0


def _keyword_scores(root, queries, tmp_path) -> list[list]:
    """Each query's BM25 hits (ids and scores), as `ct search --mode exact` gives them."""
    qfile = tmp_path / "queries.txt"
    qfile.write_text("\n".join(queries) + "\n")
    out = ct_process("-C", root, "search", "--mode", "exact", "-k", "40", "--queries", qfile)
    # (rows of equal score come in the order of their row numbers, which a rebuild gives anew)
    return [
        sorted((h["id"], h["score"]) for h in json.loads(line)["hits"])
        for line in out.stdout.splitlines()
    ]


def test_a_day_read_again_ranks_as_a_rebuilt_index_does(tmp_path):
    """bm25 weighs terms by the number of rows and their mean length: a full-text table without
    the text keeps counting the rows deleted from it, unless what they held is taken off its
    totals (index/fts.py). A day read again (here: a forget rewrites it, then a line appended
    out of order) and the index rebuilt from nothing give the same scores, to the last digit."""
    from memstore.index import fts

    store = make_store(tmp_path / "s")
    root = store.root
    words = ["apple", "pear", "plum", "quince", "cherry", "melon", "lime", "fig"]
    for i in range(24):
        text = " ".join(words[(i * k) % 8] for k in range(1, 2 + i % 5)) + f" note {i}"
        ct_process("-C", root, "add", "--ts", f"2026-03-0{1 + i % 3}T1{i % 10}:00:00Z", text)
    ct_process("-C", root, "forget", "--match", "note 7")
    ct_process("-C", root, "add", "--ts", "2026-03-01T00:30:00Z", "apple fig before the rest")
    conn = sqlite3.connect(root / ".memstore" / "index.db")
    owed = conn.execute("SELECT value FROM meta WHERE key = ?", (fts.OWED,)).fetchone()
    conn.close()
    assert owed is None  # settled after each update
    queries = ["apple", "pear plum", "fig lime melon", "note"]
    incremental = _keyword_scores(root, queries, tmp_path)
    assert len(incremental) == 4 and all(len(hits) >= 3 for hits in incremental)
    ct_process("-C", root, "index", "--rebuild")
    assert _keyword_scores(root, queries, tmp_path) == incremental


def _totals(db) -> tuple[tuple, tuple]:
    """(the full-text table's totals as bm25 reads them, as its rows say): rows and tokens."""
    from memstore.index import fts

    conn = sqlite3.connect(db)
    try:
        block = bytes(conn.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()[0])
        rows, at = fts._varint(block, 0)
        tokens, _ = fts._varint(block, at)
        sizes = [fts._varint(bytes(s), 0)[0] for (s,) in conn.execute("SELECT sz FROM fts_docsize")]
    finally:
        conn.close()
    return (rows, tokens), (len(sizes), sum(sizes))


def test_a_debt_a_stopped_process_left_is_settled_by_the_next_update(tmp_path):
    """Deleted rows noted in the delete's transaction, the process gone before it settled them
    (as if killed): the next update takes them off the totals before anything else."""
    from memstore.index import fts

    if not CONTENTLESS_DELETE:
        pytest.skip("this SQLite's full-text table keeps its text and its own totals")
    store = make_store(tmp_path / "s")
    for i in range(6):
        ct_process("-C", store.root, "add", f"pears and plums, note {i}")
    db = store.root / ".memstore" / "index.db"
    conn = sqlite3.connect(db)
    with conn:  # what _apply_rows does before its commit, and no settle after it
        fts.delete_rows(conn, "SELECT rowid FROM records WHERE rowid <= 2")
        conn.execute("DELETE FROM records WHERE rowid <= 2")
    assert conn.execute("SELECT value FROM meta WHERE key = ?", (fts.OWED,)).fetchone()
    conn.close()
    stated, true = _totals(db)
    assert stated[0] == true[0] + 2 and stated[1] > true[1]  # bm25 would count them still
    ct_process("-C", store.root, "add", "quinces, later")
    stated, true = _totals(db)
    assert stated == true


def test_varints_read_back_as_written():
    from memstore.index import fts

    for value in (0, 1, 127, 128, 16383, 16384, 2**31, 2**56 - 1, 2**56, 2**63 - 1):
        data = b"\x07" + fts._put_varint(value) + b"\x01"
        assert fts._varint(data, 1) == (value, len(data) - 1), value


def test_a_stranger_s_totals_or_debt_never_fail_an_update(tmp_path):
    """A copied index.db whose averages record is cut short or whose debt is not two numbers:
    settling leaves the record as it is and drops the debt; the update and the search go on."""
    from memstore.index import fts

    if not CONTENTLESS_DELETE:
        pytest.skip("this SQLite's full-text table keeps its text and its own totals")
    store = make_store(tmp_path / "s")
    ct_process("-C", store.root, "add", "pears and plums")
    db = store.root / ".memstore" / "index.db"
    for block, debt in ((b"\x81", "3 40"), (b"\x05\x0a", "many -2"), (b"\x05\x0a", "-4 -9")):
        conn = sqlite3.connect(db)
        with conn:
            conn.execute("UPDATE fts_data SET block = ? WHERE id = 1", (block,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (fts.OWED, debt))
        fts.settle(conn)
        assert conn.execute("SELECT value FROM meta WHERE key = ?", (fts.OWED,)).fetchone() is None
        assert conn.execute("SELECT block FROM fts_data WHERE id = 1").fetchone()[0] == block
        conn.close()
    ct_process("-C", store.root, "add", "quinces, later")
    assert "quinces" in ct_process("-C", store.root, "search", "quinces").stdout
