"""A big write's days are taken into the index by a second process while the records are placed in
the topic tree (core.py, IndexBeside): same index, same tree, and the write never depends on it."""

from __future__ import annotations

import copy
import itertools

import pytest

from conftest import fts_terms, make_store
from test_tree_speed import _distinct_turns

from memstore import core, workers
from memstore.format import tree as treefmt
from memstore.index import build, queries


@pytest.fixture(params=["files", "index"])
def beside(request, monkeypatch):
    """A write of 50 records or more works beside itself: "files", a forked child writes the day
    logs and packs, then indexes them (a single-threaded process, as `ct import`); "index", a
    second process only indexes them (a process with other threads). The ones started, for the
    test to look at."""
    started: list = []
    kind = core.FilesBeside if request.param == "files" else core.IndexBeside
    real = kind.__init__

    def init(self, *a):
        real(self, *a)
        started.append(self)

    monkeypatch.setattr(core, "BESIDE_RECORDS", 50)
    monkeypatch.setattr(kind, "__init__", init)
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    threads = (lambda: 1) if request.param == "files" else (lambda: 2)
    monkeypatch.setattr(workers.threading, "active_count", threads)
    return started


def _code(b) -> int | None:
    return b.proc.returncode if isinstance(b, core.IndexBeside) else b.returncode


def _applied(monkeypatch) -> list:
    """Plans this process applied to the index (the second process's work is not counted)."""
    done = []
    real = build.Index._apply

    def counted(self, plan, progress=None, opened=None):
        done.append(list(plan.changed))
        return real(self, plan, progress, opened)

    monkeypatch.setattr(build.Index, "_apply", counted)
    return done


def _tree(store) -> dict:
    tree = treefmt.read(store.root)
    return {tuple(t.records): (t.name, t.summary) for t in tree.topics.values() if t.records}


def _fixed_ids(monkeypatch):
    from memstore.tree import assign, fanout

    ids = (f"t{k:011d}" for k in itertools.count())
    monkeypatch.setattr(fanout, "new_topic_id", lambda: next(ids))
    monkeypatch.setattr(assign.treefmt, "new_topic_id", lambda: next(ids))


def test_the_second_process_indexes_what_the_write_wrote(tmp_path, beside, monkeypatch):
    store = make_store(tmp_path / "s")
    done = _applied(monkeypatch)
    res = store.write(_distinct_turns(store, 300), "Import 300 turns")
    assert len(beside) == 1 and _code(beside[0]) == 0
    assert done == []  # the write's own look after the commit found its days indexed
    index = store.index(update=False)
    assert queries.vector_row_count(index) == 300
    assert index.known_ids([r["id"] for r in res.added]) == {r["id"] for r in res.added}
    assert store.index(dry_run=True).last_plan.empty
    hits = store.search(res.added[123]["text"], k=1)
    assert hits and hits[0].id == res.added[123]["id"]


def test_same_index_and_tree_as_a_write_without_it(tmp_path, beside, monkeypatch):
    monkeypatch.setattr(core, "BESIDE_RECORDS", 200)
    stores = [make_store(tmp_path / name) for name in ("one", "two")]
    first = _distinct_turns(stores[0], 120, seed=1)  # a store with records: rarity weights count
    big = _distinct_turns(stores[0], 400, seed=2)
    for n, st in enumerate(stores):
        _fixed_ids(monkeypatch)
        if n == 0:
            monkeypatch.setenv(workers.WORKERS_ENV, "1")
        st.write(copy.deepcopy(first), "first")
        st.write(copy.deepcopy(big), "big")
        monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    assert len(beside) == 1  # the second store's big write only
    assert _tree(stores[0]) == _tree(stores[1])
    rows = [sorted(queries.record_rows(st.index(update=False))) for st in stores]
    assert [len(r) for r in rows] == [520, 520]
    assert [r[0] for r in rows[0]] == [r[0] for r in rows[1]]


def test_a_second_process_that_fails_costs_the_write_nothing(tmp_path, beside, monkeypatch):
    monkeypatch.setattr(core, "_BESIDE", "import sys; sys.exit(3)")
    store = make_store(tmp_path / "s")
    done = _applied(monkeypatch)
    res = store.write(_distinct_turns(store, 200), "Import 200 turns")
    assert _code(beside[0]) == 3
    assert done and res.commit  # the write indexed its days itself
    assert queries.vector_row_count(store.index(update=False)) == 200


def test_a_write_that_fails_leaves_no_second_process(tmp_path, beside, monkeypatch):
    store = make_store(tmp_path / "s")
    head = store.git.head()

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(store), "place", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write(_distinct_turns(store, 200), "Import 200 turns")
    assert beside and _code(beside[0]) is not None  # killed and reaped
    assert store.git.head() == head
    assert queries.vector_row_count(store.index()) == 0  # the next read sees the write undone


def test_a_pinned_index_reads_as_it_was_while_another_process_writes(tmp_path):
    store = make_store(tmp_path / "s")
    store.write(_distinct_turns(store, 30, seed=3), "first", after_write=False)
    index = store.index(update=False)
    before = (queries.vector_row_count(index), len(index.matrix()[0]))
    index.pin()
    other = core.Core.open(store.root, search_parents=False)
    other.write(_distinct_turns(other, 20, seed=4), "second", after_write=False)
    assert queries.vector_row_count(other.index(update=False)) == 50
    assert (queries.vector_row_count(index), len(index.matrix()[0])) == before == (30, 30)
    index.unpin()
    assert (queries.vector_row_count(index), len(index.matrix()[0])) == (50, 50)


_KILLED_WRITER = r"""
import os, sys
sys.path.insert(0, {tests!r})
from memstore import core, workers
from memstore.store import Store
from test_tree_speed import _distinct_turns

core.BESIDE_RECORDS = 50
if {kind!r} == "index":
    workers.can_fork = lambda: False
for kind in (core.FilesBeside, core.IndexBeside):
    def patched(real):
        def init(self, *a):
            real(self, *a)
            print("BESIDE", getattr(self, "pid", None) or self.proc.pid, flush=True)
        return init
    kind.__init__ = patched(kind.__init__)
store = Store.open({root!r}, search_parents=False)
store.write(_distinct_turns(store, 1500, seed=9), "Import 1500 turns")
print("DONE", flush=True)
"""


@pytest.mark.parametrize("kind", ["files", "index"])
@pytest.mark.parametrize("delay", [0.0, 0.3, 0.8])
def test_a_big_write_killed_beside_its_second_process_loses_nothing(tmp_path, kind, delay):
    """SIGKILL of the writer while its second process indexes: the next read rolls the write back
    (or keeps it, if it committed) and its index holds exactly the committed records."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from memstore.store import Store
    from test_crash import committed_lines

    store = make_store(tmp_path / "s")
    store.write(_distinct_turns(store, 20, seed=8), "first")
    before = committed_lines(store.root)
    script = _KILLED_WRITER.format(
        tests=str(Path(__file__).parent), root=str(store.root), kind=kind
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    line = proc.stdout.readline()
    assert line.startswith("BESIDE"), line
    child = int(line.split()[1])
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for _ in range(600):  # the orphaned second process finishes on its own
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    after = committed_lines(store.root)
    assert before.items() <= after.items()  # nothing committed before is lost or changed
    assert len(after) in (len(before), len(before) + 1500)  # the write landed whole or not at all
    reader = Store.open(store.root, search_parents=False)
    index = reader.index()  # a read: rolls back what the killed writer left, brings the index up
    assert queries.vector_row_count(index) == len(after)
    ids = {key.rsplit(":", 1)[1] for key in after}
    assert index.known_ids(sorted(ids)) == ids
    assert reader.fsck().ok


def test_a_child_that_fails_to_write_fails_the_write_and_leaves_nothing(tmp_path, monkeypatch):
    import os

    from conftest import git_clean
    from memstore.errors import MemstoreError

    monkeypatch.setattr(core, "BESIDE_RECORDS", 50)
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    parent = os.getpid()
    real = core.Core._write_files

    def failing(self, *a, **k):
        if os.getpid() != parent:  # the forked writer, half way: one day written, then a failure
            real(self, a[0][:10], a[1][:10], **k)
            raise OSError(28, "No space left on device")
        return real(self, *a, **k)

    monkeypatch.setattr(core.Core, "_write_files", failing)
    store = make_store(tmp_path / "s")
    store.write(_distinct_turns(store, 20, seed=8), "first")
    head = store.git.head()
    with pytest.raises(MemstoreError, match="No space left on device"):
        store.write(_distinct_turns(store, 300), "Import 300 turns")
    assert store.git.head() == head and git_clean(store.root)
    assert queries.vector_row_count(store.index()) == 20
    monkeypatch.setattr(core.Core, "_write_files", real)
    res = store.write(_distinct_turns(store, 300), "Import 300 turns")  # the same write, again
    assert len(res.added) == 300 and queries.vector_row_count(store.index()) == 320


def test_an_encrypted_store_is_written_and_indexed_beside_placement(tmp_path, beside, monkeypatch):
    """The second process opens a sealed store with the writer's identity (MEMSTORE_IDENTITY, which
    `ct --identity` sets too) and writes or indexes its sealed lines."""
    from conftest import ct

    from memstore.store import Store

    ident = tmp_path / "me.key"
    ct("keys", "new", ident)
    monkeypatch.setenv("MEMSTORE_IDENTITY", str(ident))
    ct("init", tmp_path / "s", "--embedder", "hash", "--timezone", "UTC", "--encrypt")
    store = Store.open(tmp_path / "s", search_parents=False)
    done = _applied(monkeypatch)
    res = store.write(_distinct_turns(store, 200), "Import 200 turns")
    assert len(beside) == 1 and _code(beside[0]) == 0 and done == []
    assert b"Tell me about" not in (store.root / "log").rglob("*.jsonl").__next__().read_bytes()
    assert queries.vector_row_count(store.index()) == 200
    hits = store.search(res.added[17]["text"], k=1)
    assert hits and hits[0].id == res.added[17]["id"]
    assert store.fsck().ok


def test_the_second_process_checkpoints_the_index_once_placement_has_read_it(
    tmp_path, beside, monkeypatch
):
    """The second process writes the days into the index's write-ahead log while placement reads
    the index pinned as it was, so its own checkpoint cannot move the log into index.db; it waits
    for the writer's word (core.Unpinned, said when naming has read the words' rarity) and
    checkpoints then, beside the tree's files and the commit — the writer's next commit to the
    index no longer copies the whole log itself (248 MB at 100k turns)."""
    from memstore.sqlitedb import sqlite3
    import time

    from memstore.tree import assign

    store = make_store(tmp_path / "s")
    db = store.root / ".memstore" / "index.db"
    real = assign.Placer.finish
    waited = []

    def after_the_index(self, progress=None):
        # placement holds the index pinned until the second process has written all 300 rows
        # (and failed to checkpoint them): as in a big import, where indexing ends long before
        # placement does
        conn = sqlite3.connect(db, timeout=30)
        for _ in range(300):
            if conn.execute("SELECT count(*) FROM records").fetchone()[0] == 300:
                break
            time.sleep(0.1)
        time.sleep(0.5)  # (its failed checkpoint after the rows)
        waited.append(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
        conn.close()
        return real(self, progress)

    monkeypatch.setattr(assign.Placer, "finish", after_the_index)
    store.write(_distinct_turns(store, 300), "Import 300 turns")
    assert len(beside) == 1 and _code(beside[0]) == 0
    busy, logged, _moved = waited[0]
    assert logged >= 40  # the second process's pages, held in the log while the index was pinned
    conn = sqlite3.connect(db)
    _busy, left, _moved = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    assert left < logged // 4, (left, logged)  # only what the writer committed after it
    assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 300
    conn.close()


def test_a_second_process_waits_for_its_writers_word_then_checkpoints(tmp_path):
    """index_days with the read end of core.Unpinned: it indexes, leaves the log while the writer
    reads the index pinned, and checkpoints once the writer says so — or once the writer is gone
    (the pipe's end), so that it never outlives a writer killed mid-write."""
    import os
    import shutil
    import subprocess
    import sys
    import time

    store = make_store(tmp_path / "s")
    store.write(_distinct_turns(store, 60, seed=5), "first", after_write=False)
    meta = store.root / ".memstore"
    days = sorted(p.stem for p in (store.root / "log").rglob("*.jsonl"))
    for word in (True, False):
        shutil.rmtree(meta)  # (disposable) an empty index for the second process to fill
        writer = core.Core.open(store.root, search_parents=False)
        index = writer.index(update=False)
        index.pin()
        unpinned = core.Unpinned()
        proc = subprocess.Popen(
            [sys.executable, "-c", core._BESIDE, str(store.root), str(unpinned.fd), "-1", *days],
            env=core._beside_env(),
            pass_fds=(unpinned.fd,),
        )
        unpinned.forked()
        looker = core.Core.open(store.root, search_parents=False).index(update=False)
        for _ in range(300):
            if queries.vector_row_count(looker) == 60:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        wal = meta / "index.db-wal"
        assert proc.poll() is None and wal.stat().st_size > 0  # indexed, waiting for the word
        looker.close()
        index.unpin()
        if word:
            unpinned.say()
        else:
            os.close(unpinned._w)  # the writer gone: its end of the pipe closed
            unpinned._w = -1
        assert proc.wait(timeout=60) == 0
        assert wal.stat().st_size == 0  # checkpointed (TRUNCATE)
        index.close()


def _dump(index) -> tuple[dict, list]:
    """Every record row of the index by id (all its columns but its row numbers) with its vector's
    bytes, and the full-text table's terms, record by record."""
    conn = index.conn
    cur = conn.execute("SELECT * FROM records")
    names = [d[0] for d in cur.description]
    matrix, _ = index.matrix()
    rows = {}
    for row in cur.fetchall():
        got = dict(zip(names, row))
        vrow = got.pop("vrow")
        got.pop("rowid", None)
        vec = bytes(memoryview(matrix[vrow]).cast("B")) if vrow is not None and vrow >= 0 else None
        rows[got["id"]] = (got, vec)
    return rows, fts_terms(conn)


def test_the_indexing_process_takes_the_vectors_the_files_child_wrote(tmp_path, monkeypatch):
    """FilesBeside's child hands the process it becomes what it put into each new day's pack
    (each record's vector and the place of its sealed item: core._hand_over), so that process
    does not read the packs back (a third of reading a day back). Its index is the one reading
    them back makes, row for row; a day whose pack changed since is read back as before."""
    import os
    import shutil

    monkeypatch.setattr(core, "BESIDE_RECORDS", 50)
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    hook, log = tmp_path / "hook", tmp_path / "packs-read"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(  # (in the indexing process: its packs read back)
        "import memstore.index.build as b\n"
        "real = b.Index._pack_vectors\n"
        "def counted(self, packs, recs, day):\n"
        f"    with open({str(log)!r}, 'a') as f:\n"
        "        f.write(day + '\\n')\n"
        "    return real(self, packs, recs, day)\n"
        "b.Index._pack_vectors = counted\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]))
    store = make_store(tmp_path / "s")
    first = _distinct_turns(store, 30, seed=1)
    for r in first:  # (the day the big write's last 100 turns fall on: a day with a pack)
        r["ts"] = r["ts"].replace("2026-11-01", "2026-11-02")
    store.write(first, "first", after_write=False)
    before = tmp_path / "index-before"  # (its index as the big write found it)
    shutil.copytree(store.root / ".memstore", before)
    log.unlink(missing_ok=True)
    handed = tmp_path / "handed"  # (the days FilesBeside's child hands over: it is a fork)
    real_hand_over = core._hand_over

    def hand_over(opened):
        handed.write_text(" ".join(sorted(opened)))
        return real_hand_over(opened)

    monkeypatch.setattr(core, "_hand_over", hand_over)
    done = _applied(monkeypatch)
    res = store.write(_distinct_turns(store, 700, seed=2), "Import 700 turns")
    assert len(res.added) == 700 and done == []  # (the indexing process took every day in)
    assert handed.read_text() == "2026-11-01"  # the new day; 2026-11-02 had a pack before
    assert log.read_text().split() == ["2026-11-02"]  # (read back, as before)
    got = _dump(store.index(update=False))
    # the same files, and the index as the big write found it, brought up to date by reading the
    # days back (the int8 matrix's scales depend on how the index grew: the same history)
    copy_root = tmp_path / "copy"
    shutil.copytree(
        store.root, copy_root, symlinks=True, ignore=shutil.ignore_patterns(".memstore")
    )
    shutil.copytree(before, copy_root / ".memstore")
    other = core.Core.open(copy_root, search_parents=False).index(update=False)
    other.update(days=["2026-11-01", "2026-11-02"])
    want = _dump(other)
    assert len(got[0]) == 730 and got == want


def test_the_hand_over_is_mapped_back_without_copying_the_vectors():
    """What FilesBeside's child hands over crosses a memfd part by part (the vectors' own buffer,
    not a copy joined to the rest) and is mapped by the indexing process: the vectors come back
    as a view of the mapping, the locations as bytes; a file cut short or not the child's gives
    None (the packs are then read back)."""
    import os

    import numpy as np

    if not hasattr(os, "memfd_create"):
        pytest.skip("no memfd_create here")
    vecs = np.arange(12, dtype="<f4").reshape(3, 4)
    opened = {
        "2026-11-01": {
            "pack": "p.is",
            "ids": ["a", "b", "c"],
            "vectors": memoryview(vecs).cast("B"),
            "places": b"xyz" * 3,
        }
    }
    assert b"".join(workers._dump_parts([[opened], []])) == workers._dump([[opened], []])
    fd = core._hand_over(opened)
    assert fd >= 0
    got = core._taken_over(fd)
    day = got["2026-11-01"]
    assert isinstance(day["vectors"], memoryview) and isinstance(day["places"], bytes)
    assert np.frombuffer(day["vectors"], "<f4").reshape(3, 4).tolist() == vecs.tolist()
    assert day["places"] == b"xyz" * 3 and day["ids"] == ["a", "b", "c"]
    for junk in (b"", b"\x05\x00\x00\x00\x00\x00\x00\x00[1]", b"not what the child writes"):
        bad = os.memfd_create("junk", 0)
        os.write(bad, junk)
        os.lseek(bad, 0, os.SEEK_SET)
        assert core._taken_over(bad) is None
    assert core._taken_over(-1) is None
