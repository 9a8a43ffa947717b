"""Freshness that costs nothing when nothing changed (issue 32): a warm reader skips the per-day stat
calls while the kernel reports no change, and still sees every write made elsewhere at its next read."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ct, ct_process, write_turns
from memstore.index import build, watch

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="inotify is Linux's; elsewhere every read looks"
)

TURNS = [
    ("2026-11-10T20:15:00Z", "user", "The budget review is on the tenth.", "s", "ana"),
    ("2026-11-11T09:00:00Z", "assistant", "Noted: review on the tenth.", "s", None),
]


@pytest.fixture
def plans(monkeypatch):
    """How many full looks at the store's files the index made (calls of Index.plan without days)."""
    seen = []
    real = build.Index.plan

    def counting(self, rebuild=False, days=None):
        if days is None:
            seen.append(rebuild)
        return real(self, rebuild, days)

    monkeypatch.setattr(build.Index, "plan", counting)
    return seen


def _texts(hits):
    return [h.text for h in hits]


def test_a_warm_search_does_not_look_again_when_nothing_changed(store, plans):
    write_turns(store, TURNS)
    store.search("budget")
    looked = len(plans)
    for _ in range(5):
        assert "The budget review is on the tenth." in _texts(store.search("budget"))
    assert len(plans) == looked  # five reads, no stat of any day log


def test_a_write_by_another_process_is_seen_by_the_next_read(store, plans):
    write_turns(store, TURNS)
    store.search("budget")
    ct("-C", store.root, "add", "--ts", "2027-01-02T10:00:00Z", "The carnival budget is 300.")
    assert "The carnival budget is 300." in _texts(
        store.search("carnival budget")
    )  # a new year's folder


def test_git_moving_the_branch_is_seen_by_the_next_read(store, plans):
    write_turns(store, TURNS)
    ct("-C", store.root, "add", "--ts", "2026-11-12T10:00:00Z", "The museum trip costs 40.")
    assert "The museum trip costs 40." in _texts(store.search("museum trip"))
    store.git.run("reset", "--hard", "HEAD~1")
    assert "The museum trip costs 40." not in _texts(store.search("museum trip"))


def test_a_hand_edit_of_a_day_log_is_seen(store, plans):
    write_turns(store, TURNS)
    store.search("budget")
    looked = len(plans)
    log = next((store.root / "log").rglob("*.jsonl"))
    os.utime(log)
    store.search("budget")
    assert len(plans) == looked + 1


def test_without_inotify_every_read_looks(store, plans, monkeypatch):
    monkeypatch.setattr(watch, "_inotify", lambda: None)
    write_turns(store, TURNS)
    store.search("budget")
    looked = len(plans)
    store.search("budget")
    store.search("budget")
    assert len(plans) == looked + 2


def test_the_full_look_comes_back_after_its_interval_where_watches_cannot_see_all(
    store, plans, monkeypatch
):
    monkeypatch.setattr(watch, "FULL_CHECK_S", 0.0)
    monkeypatch.setattr(watch, "MAX_DAY_WATCHES", 0)  # more day folders than it watches
    write_turns(store, TURNS)
    store.search("budget")
    looked = len(plans)
    store.search("budget")
    assert len(plans) == looked + 1


def test_a_look_that_failed_half_way_is_made_again(store, plans, monkeypatch):
    write_turns(store, TURNS)
    store.search("budget")
    os.utime(next((store.root / "log").rglob("*.jsonl")))

    def boom(self, *a, **k):
        raise OSError("disk went away")

    monkeypatch.setattr(build.Index, "_update", boom)
    with pytest.raises(OSError):
        store.index()
    monkeypatch.undo()
    seen = []
    real = build.Index.plan
    monkeypatch.setattr(
        build.Index, "plan", lambda self, r=False, d=None: seen.append(d) or real(self, r, d)
    )
    store.search("budget")
    assert None in seen  # the next read looked at every day again


# ----- every way a change can arrive, seen by the next read with no periodic look to fall back on ---


@pytest.fixture
def no_periodic_look(monkeypatch):
    """The watches alone: the time-based full look never comes (a reader that waits forever)."""
    monkeypatch.setattr(watch, "FULL_CHECK_S", 1e9)


# git with the store's hooks off: the post-merge and post-checkout hooks refresh the index
# themselves, and these tests are about what the reader sees without them.
GIT = ["git", "-c", f"core.hooksPath={os.devnull}"]


def _warm(store):
    write_turns(store, TURNS)
    assert "The budget review is on the tenth." in _texts(store.search("budget review"))
    store.search("budget review")  # armed: from here on only an event makes it look


def test_an_idle_reader_on_a_local_disk_never_looks_again(store, plans, monkeypatch):
    monkeypatch.setattr(watch, "FULL_CHECK_S", 0.0)  # as if minutes passed between the reads
    _warm(store)
    looked = len(plans)
    for _ in range(3):
        store.search("budget")
    assert len(plans) == looked
    assert store.index()._watch.complete


def test_on_a_network_file_system_the_periodic_look_stays(store, plans, monkeypatch):
    monkeypatch.setattr(watch, "FULL_CHECK_S", 0.0)
    monkeypatch.setattr(watch, "fs_type", lambda path: "nfs4")
    _warm(store)
    looked = len(plans)
    store.search("budget")
    assert len(plans) == looked + 1


def test_file_system_kinds():
    assert watch.fs_type("/") is not None
    for kind, local in (("ext4", True), ("nfs4", False), ("fuse.sshfs", False), ("9p", False)):
        assert (kind not in watch.REMOTE_FS and not kind.startswith("fuse")) is local


def test_another_processs_write_is_seen(store, plans, no_periodic_look):
    _warm(store)
    ct_process("-C", store.root, "add", "--ts", "2026-11-10T21:00:00Z", "The kite costs 12.")
    # (the writer brings the shared index up to date itself; the next read must not undo that)
    assert "The kite costs 12." in _texts(store.search("kite costs"))  # an existing day's log


def test_a_git_pull_is_seen(store, plans, no_periodic_look, tmp_path):
    _warm(store)
    other = tmp_path / "clone"
    run = [*GIT, "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*run, "clone", "-q", str(store.root), str(other)], check=True)
    ct_process("-C", other, "add", "--ts", "2026-11-11T10:00:00Z", "The ferry leaves at noon.")
    subprocess.run(
        [*run, "-C", str(store.root), "pull", "-q", "--no-rebase", str(other)], check=True
    )
    assert "The ferry leaves at noon." in _texts(store.search("ferry leaves"))


def test_a_hand_edit_in_place_of_an_existing_day_log_is_seen(store, plans, no_periodic_look):
    _warm(store)
    log = next(p for p in (store.root / "log").rglob("*.jsonl") if "2026-11-10" in p.name)
    folder_mtime = log.parent.stat().st_mtime_ns
    data = log.read_bytes()
    at = data.index(b"tenth")
    with open(log, "r+b") as f:  # same size, same inode: only the file's own mtime moves
        f.seek(at)
        f.write(b"sixth")
    assert log.parent.stat().st_mtime_ns == folder_mtime  # the folder does not say it
    # Words only the new text has: the hits' text is read from the log, so only the index can miss it.
    assert "The budget review is on the sixth." in _texts(store.search("sixth", mode="exact"))


def test_a_deleted_day_is_seen(store, plans, no_periodic_look):
    _warm(store)
    for p in (store.root / "log").rglob("2026-11-10.jsonl"):
        p.unlink()
    assert "The budget review is on the tenth." not in _texts(store.search("budget review"))


def test_a_checkout_of_another_branch_is_seen(store, plans, no_periodic_look):
    _warm(store)
    store.git.run("branch", "before-museum")
    ct_process("-C", store.root, "add", "--ts", "2026-11-12T10:00:00Z", "The museum trip costs 40.")
    assert "The museum trip costs 40." in _texts(store.search("museum trip"))
    subprocess.run([*GIT, "-C", str(store.root), "checkout", "-q", "before-museum"], check=True)
    assert "The museum trip costs 40." not in _texts(store.search("museum trip"))


def test_a_pack_added_by_hand_to_a_days_folder_is_seen(store, plans, no_periodic_look):
    _warm(store)
    looked = len(plans)
    pack = next((store.root / "packs").rglob("*.is"))
    shutil.copyfile(pack, pack.with_name("0" * 8 + pack.name))  # nothing else moves: no log, no git
    store.search("budget")
    assert len(plans) == looked + 1  # the day's folder is watched: the next read looked


def test_out_of_watches_among_the_day_folders_falls_back_to_the_periodic_look(
    store, plans, monkeypatch
):
    """The kernel's watch limit (fs.inotify.max_user_watches) reached at a pack day folder: the
    logs and git stay watched, and the reader looks every FULL_CHECK_S instead of at every read."""
    import ctypes
    import errno

    real = watch._inotify()

    class Limited:  # the real libc, with the limit reached for the day folders (fault injection)
        inotify_init1 = real.inotify_init1

        @staticmethod
        def inotify_add_watch(fd, path, mask):
            if os.path.basename(os.path.dirname(path)).isdigit() and b"packs" in path:
                ctypes.set_errno(errno.ENOSPC)
                return -1
            return real.inotify_add_watch(fd, path, mask)

    monkeypatch.setattr(watch, "_inotify", lambda: Limited)
    monkeypatch.setattr(watch, "FULL_CHECK_S", 1e9)
    _warm(store)
    w = store.index()._watch
    assert w.fd is not None and not w.complete
    looked = len(plans)
    store.search("budget")
    assert len(plans) == looked  # still answered by the watches between looks
    monkeypatch.setattr(w, "full_check_s", 0.0)
    store.search("budget")
    assert len(plans) == looked + 1


def test_the_fast_fingerprints_are_the_stored_ones(store):
    """fresh.fingerprints (the loop a fresh process runs over every day) gives the very strings
    stat_fingerprint gives, so an unchanged store is not reindexed and a changed day is seen."""
    from memstore.index import fresh

    write_turns(store, TURNS)
    store.index()
    root = str(store.root)
    days = fresh.days_on_disk(root)
    slow = {
        d: fresh.stat_fingerprint(p, fresh.segment_dir(root, d), fresh.pack_dir(root, d))
        for d, p in days.items()
    }
    assert fresh.fingerprints(root, days, segments=False) == slow
    assert fresh.fingerprints(root, days, segments=True) == slow
    stored = dict(store.index().conn.execute("SELECT day, stat_fp FROM days"))
    assert stored == slow and fresh.fresh_index_connection(store) is not None
    shutil.rmtree(fresh.pack_dir(root, "2026-11-10"))  # a day without its pack folder
    assert fresh.fingerprints(root, days, segments=False) != stored
    assert fresh.fresh_index_connection(store) is None


def test_a_one_shot_reader_adds_no_watches_and_a_second_read_does(store):
    from memstore.store import Store

    write_turns(store, TURNS)
    reader = Store.open(store.root)  # as a new `ct search` process opens it
    reader.search("budget")
    assert reader._index._watch.watched == {}  # one read: no watch on any folder
    reader.search("budget")
    w = reader._index._watch
    assert w.complete and any("packs" in f for f in w.watched)


def test_a_day_folder_removed_and_made_again_is_watched_again(store, plans, no_periodic_look):
    _warm(store)
    day_packs = next(p for p in (store.root / "packs").rglob("*") if p.name == "2026-11-10")
    shutil.rmtree(day_packs)
    next((store.root / "log").rglob("2026-11-10.jsonl")).unlink()
    store.search("budget")  # looks: the day is gone
    git = [*GIT, "-C", str(store.root)]
    subprocess.run([*git, "checkout", "-q", "--", "log", "packs"], check=True)  # and back
    assert "The budget review is on the tenth." in _texts(store.search("budget review"))
    store.search("budget")  # armed again, the folder made again among the watched
    looked = len(plans)
    pack = next(day_packs.glob("*.is"))
    shutil.copyfile(pack, pack.with_name("0" * 8 + pack.name))
    store.search("budget")
    assert len(plans) == looked + 1
