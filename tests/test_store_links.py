"""A store never reads or writes through a symbolic link, nor reads a FIFO or device, whatever git or a
copied `.memstore/` put there (memstore/storefile.py): reads skip the file and name it, fsck names it
as damage with what to do, writes refuse (exit 4) and change nothing; no file outside the store is
read, written or truncated, and every committed record stays."""

from __future__ import annotations

import json
import os
import resource
from memstore.sqlitedb import sqlite3
import subprocess

import pytest

from conftest import CT, commits, committed_ids, ct, git_clean, make_store

TEXTS = ("cap the trip budget at 2400 euros", "Hotels in Lisbon", "train to Porto")


def _git(root, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def root(tmp_path):
    """A store with three records, a marker and a topic tree, all committed; identity set locally."""
    path = tmp_path / "store"
    make_store(path)
    _git(path, "config", "user.name", "t")
    _git(path, "config", "user.email", "t@example.invalid")
    for text in TEXTS:
        ct("-C", path, "add", text)
    ct("-C", path, "mark", "working on budget")
    return path


@pytest.fixture
def outside(tmp_path):
    path = tmp_path / "outside"
    path.mkdir()
    return path


def _day_log(root):
    (log,) = sorted((root / "log").rglob("*.jsonl"))
    return log


def _commit(root):
    _git(root, "add", "-A", ".")
    _git(root, "commit", "-qm", "hostile", "--no-verify")


def _state(root):
    return _git(root, "rev-parse", "HEAD"), len(commits(root))


def _no_traceback(proc):
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert "MemoryError" not in proc.stderr, proc.stderr


def _linked(root, rel: str, target) -> None:
    """Replace the store's `rel` by a link to `target` and commit it, as a `git pull` would bring it."""
    path = root / rel
    if path.is_dir() and not path.is_symlink():
        import shutil

        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    _commit(root)


# ----- 1. a committed linked day log -------------------------------------------------------------


def test_linked_day_log_is_neither_read_nor_appended(root, outside):
    log = _day_log(root)
    rel = log.relative_to(root).as_posix()
    away = outside / "day.jsonl"
    away.write_bytes(log.read_bytes())
    _linked(root, rel, away)
    before, state = away.read_bytes(), _state(root)

    found = ct("-C", root, "search", "budget")
    assert "2400 euros" not in found.stdout  # the outside file's record is not read
    assert rel in found.stderr and "symbolic link" in found.stderr

    added = ct("-C", root, "add", "written outside?", check=False)
    _no_traceback(added)
    assert added.returncode == 4 and rel in added.stderr.splitlines()[0], added.stderr
    assert away.read_bytes() == before and _state(root) == state and git_clean(root)

    checked = ct("-C", root, "fsck", check=False)
    _no_traceback(checked)
    assert checked.returncode == 1
    assert f"{rel}: is a symbolic link (to {away})" in checked.stdout
    assert "git rm" in checked.stdout


@pytest.mark.parametrize("top", ["log", "packs"])
def test_linked_year_folder_takes_no_write(root, outside, top):
    year = next((root / top).iterdir())
    moved = outside / year.name
    year.rename(moved)
    _linked(root, f"{top}/{year.name}", moved)
    listing = sorted(p.relative_to(moved) for p in moved.rglob("*"))
    sizes = {p: p.stat().st_size for p in moved.rglob("*") if p.is_file()}
    state = _state(root)

    added = ct("-C", root, "add", "lands where?", check=False)
    _no_traceback(added)
    assert added.returncode == 4, added.stderr
    assert f"{top}/{year.name}" in added.stderr.splitlines()[0]
    assert sorted(p.relative_to(moved) for p in moved.rglob("*")) == listing
    assert {p: p.stat().st_size for p in moved.rglob("*") if p.is_file()} == sizes
    assert _state(root) == state and git_clean(root)
    checked = ct("-C", root, "fsck", check=False)
    _no_traceback(checked)
    assert f"{top}/{year.name}: is a symbolic link" in checked.stdout


# ----- 2. a linked markers.jsonl -----------------------------------------------------------------


def test_linked_markers_takes_no_mark(root, outside):
    away = outside / "m.jsonl"
    away.write_bytes((root / "markers.jsonl").read_bytes())
    _linked(root, "markers.jsonl", away)
    before, state = away.read_bytes(), _state(root)
    marked = ct("-C", root, "mark", "new marker", check=False)
    _no_traceback(marked)
    assert marked.returncode == 4 and "markers.jsonl" in marked.stderr.splitlines()[0]
    assert away.read_bytes() == before and _state(root) == state and git_clean(root)


# ----- 3. a link to /dev/zero is never read ------------------------------------------------------


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))


def _run(root, *args):
    return subprocess.run(
        [*CT, "-C", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited,
        env={**os.environ, "MEMSTORE_LOCK_TIMEOUT": "5"},
    )


def _zero_place(root, kind: str) -> str:
    day = _day_log(root).stem
    return {
        "pack": f"packs/{day[:4]}/{day}/{'a' * 64}.is",
        "log": _day_log(root).relative_to(root).as_posix(),
        "tree": next((root / "tree").rglob("*.jsonl")).relative_to(root).as_posix(),
        "forgotten": "forgotten.jsonl",
        "markers": "markers.jsonl",
    }[kind]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
@pytest.mark.parametrize("kind", ["pack", "log", "tree", "forgotten", "markers"])
def test_link_to_dev_zero_is_never_read(root, kind):
    rel = _zero_place(root, kind)
    kept = committed_ids(root)
    _linked(root, rel, "/dev/zero")
    for args in (["search", "budget"], ["fsck"], ["stat"], ["tree"], ["add", "one more"]):
        proc = _run(root, *args)
        _no_traceback(proc)
        assert proc.returncode in (0, 1, 4), (args, proc.returncode, proc.stderr)
        if args == ["fsck"]:
            assert f"{rel}: is a symbolic link (to /dev/zero)" in proc.stdout
        if args[0] == "add" and kind in ("log", "tree"):  # it would append through the link
            assert proc.returncode == 4 and rel in proc.stderr.splitlines()[0], proc.stderr
    assert git_clean(root) and os.path.islink(root / rel)
    if kind != "log":  # the linked log's records are damage now; every other one is committed still
        assert set(kept) <= set(committed_ids(root))


# ----- 4. crash recovery never truncates through a link -------------------------------------------


def test_rollback_never_cuts_a_linked_file(root, outside):
    victim = outside / "victim.txt"
    victim.write_text("USER DATA\n")
    log = _day_log(root)
    rel = f"log/{log.parent.name}/2099-01-01.jsonl"
    os.symlink(victim, root / rel)
    journal = {"pid": 999_999, "started": 0, "head": "x", "appended": {rel: 0}}
    (root / ".memstore").mkdir(exist_ok=True)
    (root / ".memstore" / "write-journal.json").write_text(json.dumps(journal))
    proc = ct("-C", root, "search", "budget", check=False)
    _no_traceback(proc)
    assert victim.read_text() == "USER DATA\n"
    repaired = ct("-C", root, "fsck", "--repair", check=False)
    _no_traceback(repaired)
    assert victim.read_text() == "USER DATA\n"
    assert sorted(json.loads(x)["text"] for x in log.read_text().splitlines()) == sorted(TEXTS)


# ----- 5. links in a copied .memstore/ -----------------------------------------------------------


@pytest.mark.parametrize(
    "name, args", [("index.lock", ["search", "x"]), ("write.lock", ["add", "y"])]
)
def test_linked_lock_is_not_written(root, outside, name, args):
    away = outside / "precious.txt"
    away.write_text("PRECIOUS\n")
    import shutil

    shutil.rmtree(root / ".memstore")  # a copied store: no index yet, the lock a link
    (root / ".memstore").mkdir()
    os.symlink(away, root / ".memstore" / name)
    state = _state(root)
    proc = ct("-C", root, *args, check=False)
    _no_traceback(proc)
    assert away.read_text() == "PRECIOUS\n"
    assert _state(root) == state and git_clean(root)
    assert proc.returncode == 4 and f".memstore/{name}" in proc.stderr.splitlines()[0]


def test_linked_index_db_gets_no_tables(root, outside):
    other = outside / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE mine (x)")
    conn.close()
    before = other.read_bytes()
    meta = root / ".memstore"
    for p in meta.glob("index.db*"):
        p.unlink()
    os.symlink(other, meta / "index.db")
    proc = ct("-C", root, "search", "budget", check=False)
    _no_traceback(proc)
    assert other.read_bytes() == before
    assert not (outside / "other.db-wal").exists()
    assert ".memstore/index.db" in proc.stderr


def test_linked_meta_folder_gets_no_index(root, outside):
    import shutil

    shutil.rmtree(root / ".memstore")
    os.symlink(outside, root / ".memstore")
    proc = ct("-C", root, "search", "budget", check=False)
    _no_traceback(proc)
    assert list(outside.iterdir()) == []
    assert proc.returncode == 4 and ".memstore" in proc.stderr.splitlines()[0]


def test_fifo_journal_is_never_read(root):
    """A FIFO where the write journal goes (a copied .memstore/) would block a reader forever."""
    journal = root / ".memstore" / "write-journal.json"
    journal.unlink(missing_ok=True)
    os.mkfifo(journal)
    proc = subprocess.run(
        [*CT, "-C", str(root), "search", "budget"], capture_output=True, text=True, timeout=60
    )
    _no_traceback(proc)
    assert proc.returncode == 0 and "2400 euros" in proc.stdout
    assert ct("-C", root, "fsck").returncode == 0


def test_a_forget_never_writes_its_merge_rule_through_a_linked_gitattributes(root, outside):
    """A forget adds its merge rule to .gitattributes: a linked one (to a file of the user's) is
    refused before anything changes, and the file it points at keeps its bytes."""
    victim = outside / "attributes"
    victim.write_text("KEEP\n")
    _linked(root, ".gitattributes", victim)
    before = _state(root)
    proc = ct("-C", root, "forget", "--match", "Porto", check=False)
    _no_traceback(proc)
    assert proc.returncode == 4 and ".gitattributes" in proc.stderr, proc.stderr
    assert victim.read_text() == "KEEP\n"
    assert _state(root) == before and len(committed_ids(root)) == len(TEXTS)
