"""Markers (ct mark, ct mark --done) and "where are we now" (ct where): files, commits, merges, speed path."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

from conftest import commits, ct, git_clean, write_turns
from memstore.format import markers as markerfmt
from memstore.index.fresh import stat_fingerprint
from memstore.retrieve.where import where
from memstore.upkeep.marks import done, mark

NOW = "2026-11-30T10:00:00"


def _turns(store, rows):
    write_turns(store, rows, fields=("ts", "role", "session", "text", "type"))


def _lines(root):
    return [json.loads(x) for x in (root / "markers.jsonl").read_text().splitlines()]


def test_mark_appends_one_line_and_one_commit(store):
    before = len(commits(store.root))
    out = ct("-C", store.root, "mark", "--json", "budget: waiting for Ana's numbers").stdout
    m = json.loads(out)
    assert (
        m["status"] == "open"
        and m["text"] == "budget: waiting for Ana's numbers"
        and len(m["id"]) == 26
    )
    assert _lines(store.root) == [
        {"id": m["id"], "ts": m["ts"], "text": m["text"], "status": "open"}
    ]
    assert commits(store.root)[0] == "Mark: budget: waiting for Ana's numbers"
    assert len(commits(store.root)) == before + 1 and git_clean(store.root)


def test_done_closes_by_id_prefix_and_never_edits_lines(store):
    a = mark(store, "first topic")
    b = mark(store, "second topic")
    original = (store.root / "markers.jsonl").read_bytes()
    ct("-C", store.root, "mark", "--done", a.id[:14])
    text = (store.root / "markers.jsonl").read_bytes()
    assert text.startswith(original)  # append-only
    last = _lines(store.root)[-1]
    assert (
        last["status"] == "done"
        and last["done"] == a.id
        and last["text"] == "first topic"
        and last["id"] != a.id
    )
    assert commits(store.root)[0] == "Mark done: first topic" and git_clean(store.root)
    state = {m.id: m.status for m in markerfmt.read(store.root)}
    assert state == {a.id: "done", b.id: "open"}
    assert [m.id for m in where(store).markers] == [b.id]


@pytest.mark.parametrize(
    "ref, message", [("zzzzzzzz", "no marker with id"), ("01", "no marker with id")]
)
def test_done_with_an_unknown_id_changes_nothing(store, ref, message):
    mark(store, "a topic")
    before_bytes, before_commits = (store.root / "markers.jsonl").read_bytes(), commits(store.root)
    proc = ct("-C", store.root, "mark", "--done", ref, check=False)
    assert proc.returncode == 1 and message in proc.stderr and "ct where" in proc.stderr
    assert (store.root / "markers.jsonl").read_bytes() == before_bytes
    assert commits(store.root) == before_commits and git_clean(store.root)


def test_done_twice_is_refused(store):
    m = mark(store, "a topic")
    done(store, m.id)
    n = len(commits(store.root))
    proc = ct("-C", store.root, "mark", "--done", m.id, check=False)
    assert proc.returncode == 1 and "already closed" in proc.stderr
    assert len(commits(store.root)) == n and git_clean(store.root)


def test_ambiguous_prefix_is_refused(store):
    for mid in ("01aaaaaaaaaaaaaaaaaaaaaaaa", "01aaaaaaaaaaaaaaaaaaaaaaab"):
        markerfmt.append(
            store.root,
            markerfmt.MarkerLine(mid, "2026-11-30T09:00:00.000000Z", "t " + mid[-1], "open"),
        )
    store.git.commit("Two markers", ["markers.jsonl"])
    proc = ct("-C", store.root, "mark", "--done", "01aaaa", check=False)
    assert proc.returncode == 2 and "ambiguous" in proc.stderr
    assert all(m.status == "open" for m in markerfmt.read(store.root))
    ct("-C", store.root, "mark", "--done", "01aaaaaaaaaaaaaaaaaaaaaaab")
    assert [m.status for m in markerfmt.read(store.root)] == ["open", "done"] and git_clean(
        store.root
    )


def test_mark_usage_errors(store):
    assert ct("-C", store.root, "mark", check=False).returncode == 2
    proc = ct("-C", store.root, "mark", "   ", check=False)
    assert proc.returncode == 2 and "needs some text" in proc.stderr
    assert not (store.root / "markers.jsonl").exists() and git_clean(store.root)


def test_a_damaged_markers_file_is_named_and_left_alone(store):
    mark(store, "fine")
    p = store.root / "markers.jsonl"
    p.write_bytes(p.read_bytes() + b'{"id": "x", "ts": "2026-11-30T00:00:00Z"}\n')
    damaged = p.read_bytes()
    proc = ct("-C", store.root, "mark", "another", check=False)
    assert proc.returncode == 4
    assert (
        "markers.jsonl:2" in proc.stderr
        and "'text'" in proc.stderr
        and "Nothing was changed" in proc.stderr
    )
    assert p.read_bytes() == damaged
    assert ct("-C", store.root, "where", check=False).returncode == 4


def test_markers_from_two_clones_merge_without_conflict(store, tmp_path):
    mark(store, "base marker")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(store.root), str(clone)], check=True)
    from memstore.store import Store

    other = Store.open(clone)
    mine, theirs = mark(store, "marked here"), mark(other, "marked there")
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(
        [*git, "pull", "-q", "--no-rebase", "--no-edit", str(store.root), "main"], check=True
    )
    assert git_clean(clone)
    texts = [m.text for m in markerfmt.read(clone)]
    assert sorted(texts) == ["base marker", "marked here", "marked there"]
    assert len({m.id for m in markerfmt.read(clone)}) == 3 and mine.id != theirs.id


def test_where_json_shows_open_markers_newest_last_and_the_latest_session(store):
    _turns(
        store,
        [
            ("2026-11-29T10:00:00Z", "user", "old", "an older session", "text"),
            ("2026-11-30T08:00:00Z", "user", "plan", "line 1", "text"),
            ("2026-11-30T08:01:00Z", "assistant", "plan", "line 2", "text"),
            ("2026-11-30T08:02:00Z", "tool", "plan", "Bash: ls", "action"),
            ("2026-11-30T08:03:00Z", "user", "plan", "line 4", "text"),
            (
                "2026-11-30T08:04:00Z",
                "system",
                "",
                "a document chunk, newer than everything",
                "doc",
            ),
            ("2026-11-30T08:05:00Z", "system", "plan", "harness row", "meta"),
        ],
    )
    for i in range(4):
        mark(store, f"topic {i}", now=dt.datetime(2026, 11, 30, 9, i, tzinfo=dt.timezone.utc))
    done(store, markerfmt.read(store.root)[3].id)
    data = json.loads(
        ct("-C", store.root, "where", "--json", "-m", "2", "-n", "3", "--now", NOW).stdout
    )
    assert data["now"] == "2026-11-30T10:00:00.000000Z"
    assert [m["text"] for m in data["markers"]] == ["topic 1", "topic 2"]
    assert data["markers_omitted"] == 1 and data["markers_done"] == 1
    assert data["session"] == {"name": "plan", "lines": 4}
    assert [r["text"] for r in data["lines"]] == ["line 2", "Bash: ls", "line 4"]
    out = ct("-C", store.root, "where", "--now", NOW).stdout.splitlines()
    assert out[0].startswith("[NOW] 2026-11-30 10:00 Mon (UTC)")
    assert out[1] == "-- open markers: 3 (newest last) --"
    assert out[2].startswith("* [2026-11-30 09:00] topic 0")
    assert '-- latest session "plan": last 4 of 4 lines --' in out
    assert (
        out[-1] == "[2026-11-30 08:03] user: line 4"
        and "[2026-11-30 08:02] tool (action): Bash: ls" in out
    )


def test_where_on_an_empty_store(store):
    out = ct("-C", store.root, "where").stdout
    assert "no open markers" in out and "no conversation on record yet" in out
    assert json.loads(ct("-C", store.root, "where", "--json").stdout)["session"] is None


def test_where_reads_a_fresh_index_directly_and_updates_a_stale_one(store, tmp_path):
    _turns(store, [("2026-11-30T08:00:00Z", "user", "s", "hello", "text")])
    index = store.index()
    for day, fp in index.conn.execute("SELECT day, stat_fp FROM days"):
        from memstore.format import log as logfmt

        from memstore.format import pack as packfmt

        assert (
            stat_fingerprint(
                logfmt.day_path(store.root, day),
                logfmt.segment_day_dir(store.root, day),
                packfmt.day_dir(store.root, day),
            )
            == fp
        )
    first = where(store)
    assert first.fast and [r["text"] for r in first.lines] == ["hello"]
    _turns(store, [("2026-11-30T08:04:00Z", "user", "s", "a line ct wrote", "text")])
    assert where(store).fast, "a write leaves the index holding what it committed"
    other = tmp_path / "other"  # a line that arrives by git (a pull), which no ct command indexed
    subprocess.run(["git", "clone", "-q", str(store.root), str(other)], check=True)
    from memstore.store import Store

    _turns(Store.open(other), [("2026-11-30T08:05:00Z", "user", "s", "a newer line", "text")])
    subprocess.run(
        [
            "git",
            "-C",
            str(store.root),
            "-c",
            "core.hooksPath=/dev/null",
            "pull",
            "-q",
            "--ff-only",
            str(other),
            "main",
        ],
        check=True,
    )  # no hook indexes it
    stale = where(store)
    assert not stale.fast and [r["text"] for r in stale.lines] == [
        "hello",
        "a line ct wrote",
        "a newer line",
    ]
    assert where(store).fast


def test_where_process_does_not_import_numpy(store):
    _turns(store, [("2026-11-30T08:00:00Z", "user", "s", "hello", "text")])
    store.index()
    code = (
        "import sys\nfrom memstore.cli import main\n"
        f"try:\n    main(['-C', {str(store.root)!r}, 'where'])\nexcept SystemExit:\n    pass\n"
        "print('NUMPY' if 'numpy' in sys.modules else 'NO-NUMPY')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "user: hello" in out and out.strip().endswith("NO-NUMPY")
