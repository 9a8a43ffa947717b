"""Back-dated writes go to the vector matrix's unsorted tail instead of re-sorting it, and every
search path still sees them: time windows, row filters, and the fold-in once the tail is long."""

from __future__ import annotations

import json
import os
import subprocess

from conftest import ct, make_store
from memstore.index import build


def _meta(store, key):
    row = store.index().conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return int(row[0]) if row else None


def _vector_hits(store, *options) -> list[dict]:
    """`ct search "crane inspection" --mode vector` with the given filters, as JSON hits."""
    proc = ct(
        "-C", store.root, "search", "crane inspection", "--mode", "vector", "--json", *options
    )
    return json.loads(proc.stdout)["hits"]


def test_a_back_dated_write_goes_to_the_tail_and_time_windows_find_it(tmp_path):
    store = make_store(tmp_path / "s")
    for day in range(1, 6):
        store.add(f"day {day} notes about the harbour crane", ts=f"2026-11-0{day}T10:00:00Z")
    store.index()
    gen = _meta(store, "gen")
    store.add("back-filled: the crane inspection passed", ts="2026-11-02T15:00:00Z")
    store.index()
    assert _meta(store, "gen") == gen  # appended, not re-sorted into a new generation
    assert _meta(store, "sorted_rows") == 5 and _meta(store, "n_rows") == 6
    texts = [
        h["text"] for h in _vector_hits(store, "--since", "2026-11-02", "--until", "2026-11-03")
    ]
    assert texts[0] == "back-filled: the crane inspection passed"
    assert set(texts) == {
        "back-filled: the crane inspection passed",
        "day 2 notes about the harbour crane",
    }
    # a window that excludes the tail row's time leaves it out; a row filter (role) still finds it
    assert {h["day"] for h in _vector_hits(store, "--since", "2026-11-04")} == {
        "2026-11-04",
        "2026-11-05",
    }
    out = _vector_hits(store, "--role", "user", "--since", "2026-11-02", "--until", "2026-11-03")
    assert out[0]["text"] == "back-filled: the crane inspection passed"
    # ct recall of that day finds it by meaning inside the window
    rec = ct(
        "-C", store.root, "recall", "what happened with the crane on 2 November 2026", "--json"
    )
    assert "back-filled" in rec.stdout


def test_a_long_tail_is_folded_back_into_time_order(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "TAIL_MIN", 2)
    monkeypatch.setattr(build, "TAIL_SHARE", 0.0)
    store = make_store(tmp_path / "s")
    for day in range(5, 9):
        store.add(f"note {day}", ts=f"2026-11-0{day}T10:00:00Z")
    store.index()
    for day in (1, 2):
        store.add(f"early {day}", ts=f"2026-11-0{day}T10:00:00Z")
        store.index()
    assert _meta(store, "sorted_rows") == 4 and _meta(store, "n_rows") == 6
    store.add("early 3", ts="2026-11-03T10:00:00Z")
    store.index()  # a third tail row is past TAIL_MIN: everything is put in order again
    assert _meta(store, "sorted_rows") == _meta(store, "n_rows") == 7
    vecs, times = store.index().matrix()
    assert list(times) == sorted(times)
    hits = store.search("early", k=10, mode="exact")
    assert {h.text for h in hits} == {"early 1", "early 2", "early 3"}


def test_a_line_edited_in_place_is_read_again_when_a_later_line_is_appended(tmp_path):
    """The append path keeps the rows it indexed only when the day log still starts with the bytes
    it read: an edit of the same length moves no offset, so the ids and offsets alone cannot say."""
    from memstore.store import Store

    store = make_store(tmp_path / "s")
    store.add("the harbour crane is red", ts="2026-11-01T10:00:00Z")
    store.index()
    log = next((store.root / "log").rglob("2026-11-01.jsonl"))
    data = log.read_bytes()
    log.write_bytes(data.replace(b"crane is red", b"crane is tan"))
    git = ["git", "-C", str(store.root), "-c", f"core.hooksPath={os.devnull}", "-c", "user.name=t"]
    subprocess.run([*git, "-c", "user.email=t@example.com", "commit", "-qam", "edit"], check=True)
    store.add("the ferry is late", ts="2026-11-01T11:00:00Z")  # the writer takes the day in
    fresh = Store.open(store.root)
    assert [h.text for h in fresh.search("tan", mode="exact")] == ["the harbour crane is tan"]
    assert fresh.search("red", mode="exact") == []
