"""Freshness that costs nothing when nothing changed (issue 32): a warm reader skips the per-day stat
calls while the kernel reports no change, and still sees every write made elsewhere at its next read."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import ct, write_turns
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


def test_the_full_look_comes_back_after_its_interval(store, plans, monkeypatch):
    monkeypatch.setattr(watch, "FULL_CHECK_S", 0.0)
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
