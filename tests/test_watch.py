"""ct watch: debounced batches of complete lines, one commit each, half-written lines never lost, clean stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

from conftest import CT, commits, ct, git_clean, make_store
from memstore.ingest.watch import Watcher


def jline(i: int, session: str = "s") -> str:
    return (
        json.dumps(
            {
                "ts": f"2026-11-30T06:{i // 60:02d}:{i % 60:02d}Z",
                "role": "user" if i % 2 else "assistant",
                "text": f"line {i} of {session}",
                "session": session,
            }
        )
        + "\n"
    )


def cc_line(uuid: str, role: str, text: str, ts: str) -> str:
    content = text if role == "user" else [{"type": "text", "text": text}]
    return (
        json.dumps(
            {
                "type": role,
                "uuid": uuid,
                "timestamp": ts,
                "sessionId": "sess",
                "message": {"role": role, "content": content},
            }
        )
        + "\n"
    )


def texts(store) -> list[str]:
    out = []
    for p in sorted((store.root / "log").rglob("*.jsonl")):
        out += [json.loads(line)["text"] for line in p.read_text(encoding="utf-8").splitlines()]
    return out


def test_debounce_waits_for_quiet_and_max_delay_caps_the_wait(store, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    f = logs / "a.jsonl"
    f.write_text(jline(0) + jline(1), encoding="utf-8")
    w = Watcher(store, [logs], kind="jsonl", interval=1, debounce=5, max_delay=30)
    m = f.stat().st_mtime
    assert w.tick(now=m + 1) is None  # changed 1 s ago: not quiet yet
    batch = w.tick(now=m + 6)  # quiet for 6 s: import
    assert batch.added == 2 and len(batch.commits) == 1
    assert w.tick(now=m + 7) is None  # nothing changed since
    n = len(commits(store.root))
    with open(f, "a", encoding="utf-8") as fh:
        fh.write(jline(2))
    m2 = f.stat().st_mtime
    assert w.tick(now=m2 - 100) is None  # first seen pending (at a clock reading 100 s earlier)
    assert len(commits(store.root)) == n
    batch = w.tick(now=m2 + 1)  # still not quiet, but pending longer than max_delay
    assert batch is not None and batch.added == 1
    assert texts(store) == ["line 0 of s", "line 1 of s", "line 2 of s"] and git_clean(store.root)


def test_writer_thread_with_half_written_lines_loses_nothing(store, tmp_path):
    """A writer appends to three files, pausing mid-line longer than the debounce, while watch runs."""
    logs = tmp_path / "logs"
    logs.mkdir()
    files = [logs / f"s{k}.jsonl" for k in range(3)]
    expected = []
    done = threading.Event()

    def writer():
        for i in range(45):
            f = files[i % 3]
            line = jline(i, f.stem)
            expected.append(f"line {i} of {f.stem}")
            with open(f, "a", encoding="utf-8") as fh:
                if i % 9 == 4:  # half a line, then a pause long enough for a batch to run
                    fh.write(line[:25])
                    fh.flush()
                    time.sleep(0.45)
                    fh.write(line[25:])
                else:
                    fh.write(line)
            time.sleep(0.02)
        done.set()

    w = Watcher(store, [logs], kind="jsonl", interval=0.1, debounce=0.2, max_delay=0.6)
    batches = []
    t = threading.Thread(target=writer)
    t.start()
    deadline = time.time() + 30
    while not done.is_set() and time.time() < deadline:
        b = w.tick()
        if b is not None:
            batches.append(b)
        time.sleep(0.1)
    t.join()
    for _ in range(10):  # the tail: let the last changes go quiet and import them
        time.sleep(0.25)
        b = w.tick()
        if b is not None:
            batches.append(b)
    assert not [e for b in batches for e in b.errors]  # a half line was never parsed as a line
    assert not [n for b in batches for n in b.notes if "skipped" in n]
    assert sorted(texts(store)) == sorted(expected) and len(texts(store)) == 45
    made = [c for b in batches for c in b.commits]
    assert len(made) >= 3  # several batches, not one at the end
    assert len(made) == len(commits(store.root)) - 1  # one commit per batch that added lines
    assert git_clean(store.root)
    assert "ok:" in ct("-C", store.root, "fsck").stdout


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_run_stops_cleanly(tmp_path, sig):
    st = make_store(tmp_path / "s")
    logs = tmp_path / "logs"
    logs.mkdir()
    f = logs / "live.jsonl"
    f.write_text("", encoding="utf-8")
    proc = subprocess.Popen(
        [
            *CT,
            "-C",
            str(st.root),
            "watch",
            str(logs),
            "--kind",
            "jsonl",
            "--interval",
            "0.05",
            "--debounce",
            "0",
            "--max-delay",
            "0.1",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert "Watching 1 path" in proc.stderr.readline()  # handlers are installed from here on
        stop_writing = threading.Event()
        written = []

        def writer():
            i = 0
            while not stop_writing.is_set() and i < 2000:
                with open(f, "a", encoding="utf-8") as fh:
                    fh.write(jline(i, "live"))
                written.append(f"line {i} of live")
                i += 1
                time.sleep(0.01)

        t = threading.Thread(target=writer)
        t.start()
        watchdog = threading.Timer(
            90, proc.kill
        )  # a hung watcher fails the test instead of hanging it
        watchdog.start()
        seen = []
        while not any(
            b["added"] for b in seen
        ):  # wait for a committed batch, however slow the machine
            line = proc.stdout.readline()
            assert line, "ct watch ended before importing anything"
            seen.append(json.loads(line))
        time.sleep(0.3)
        proc.send_signal(sig)  # while lines keep arriving and batches are being committed
        out, err = proc.communicate(timeout=60)
        watchdog.cancel()
        stop_writing.set()
        t.join()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    batches = seen + [json.loads(line) for line in out.splitlines()]
    assert sum(b["added"] for b in batches) > 0 and not [e for b in batches for e in b["errors"]]
    assert git_clean(st.root)
    assert "ok:" in ct("-C", st.root, "fsck").stdout
    # Whatever the stopped watcher had not read yet is imported by the next run, exactly once.
    ct("-C", st.root, "watch", logs, "--kind", "jsonl", "--once")
    got = []
    for p in sorted((st.root / "log").rglob("*.jsonl")):
        got += [json.loads(line)["text"] for line in p.read_text(encoding="utf-8").splitlines()]
    assert sorted(got) == sorted(written)
    assert git_clean(st.root)


def test_once_leaves_a_half_written_claude_code_line_for_later(tmp_path):
    st = make_store(tmp_path / "s")
    proj = tmp_path / "projects" / "-home-ana-trip"
    proj.mkdir(parents=True)
    f = proj / "3f1c.jsonl"
    second = cc_line("u2", "assistant", "Booked the 9:40 train.", "2026-11-30T06:00:05Z")
    f.write_text(
        cc_line("u1", "user", "Book the train to Porto.", "2026-11-30T06:00:00Z") + second[:40],
        encoding="utf-8",
    )
    out = ct("-C", st.root, "watch", tmp_path / "projects", "--once", "--json").stdout
    assert json.loads(out)["added"] == 1 and texts(st) == ["Book the train to Porto."]
    with open(f, "a", encoding="utf-8") as fh:
        fh.write(second[40:])
    out = ct("-C", st.root, "watch", tmp_path / "projects", "--once", "--json").stdout
    assert json.loads(out)["added"] == 1
    assert texts(st) == ["Book the train to Porto.", "Booked the 9:40 train."]
    assert commits(st.root)[0] == "Import 1 claude-code records from 3f1c.jsonl (1 sessions)"
    assert git_clean(st.root)


def test_a_bad_file_does_not_hold_back_the_good_ones(tmp_path):
    st = make_store(tmp_path / "s")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "good.jsonl").write_text(jline(0, "good") + jline(1, "good"), encoding="utf-8")
    (logs / "bad.jsonl").write_text(jline(0, "bad") + "{not json}\n", encoding="utf-8")
    proc = ct("-C", st.root, "watch", logs, "--kind", "jsonl", "--once", check=False)
    assert proc.returncode == 0  # a poison line is skipped with a note; watch goes on (issue 26)
    assert "skipped " in proc.stderr and "bad.jsonl:2: not valid JSON" in proc.stderr
    assert sorted(texts(st)) == ["line 0 of bad", "line 0 of good", "line 1 of good"]
    assert git_clean(st.root)
    # Fixed, it is imported by the next run.
    (logs / "bad.jsonl").write_text(jline(0, "bad") + jline(1, "bad"), encoding="utf-8")
    ct("-C", st.root, "watch", logs, "--kind", "jsonl", "--once")
    assert len(texts(st)) == 4 and git_clean(st.root)


def test_a_file_of_only_broken_lines_is_reported_without_kind_too(tmp_path):
    """Without --kind a file's kind comes from its lines; when every complete line is broken, none
    says it, and the file is named with its first bad line (exit 1), never passed over as "nothing new"."""
    st = make_store(tmp_path / "s")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "good.jsonl").write_text(jline(0, "good"), encoding="utf-8")
    (logs / "bad.jsonl").write_text("not json\n[1, 2]\n", encoding="utf-8")
    proc = ct("-C", st.root, "watch", logs, "--once", check=False)
    assert (
        proc.returncode == 1
        and "bad.jsonl:1: not valid JSON" in proc.stderr
        and "pass --kind" in proc.stderr
    )
    assert texts(st) == ["line 0 of good"] and git_clean(st.root)
    (logs / "bad.jsonl").write_text(
        "not json", encoding="utf-8"
    )  # no complete line yet: nothing to say
    assert ct("-C", st.root, "watch", logs, "--once").returncode == 0


def test_usage_errors(store, tmp_path):
    proc = ct("-C", store.root, "watch", tmp_path / "nowhere", check=False)
    assert proc.returncode == 2 and "nowhere" in proc.stderr
    store.add("A line in the store's own day log.")
    # tmp_path holds the store itself: its own day logs are never watched.
    proc = ct(
        "-C",
        store.root,
        "watch",
        tmp_path,
        "--kind",
        "jsonl",
        "--debounce",
        "5",
        "--max-delay",
        "1",
        "--once",
        "--json",
        check=False,
    )
    assert proc.returncode == 0  # max-delay is raised to the debounce, not an error
    assert json.loads(proc.stdout)["files"] == []
    assert len(commits(store.root)) == 2 and git_clean(store.root)


def test_a_whole_line_whose_newline_comes_later_is_neither_lost_nor_doubled(store, tmp_path):
    # A writer that writes the object and its "\n" separately: the object alone already parses,
    # so it is taken; when the newline and more lines follow, the cursor no longer ends at a line
    # end, the file is read again from the start and the store skips what it has.
    logs = tmp_path / "logs"
    logs.mkdir()
    f = logs / "a.jsonl"
    f.write_text(jline(0) + jline(1).rstrip("\n"), encoding="utf-8")
    w = Watcher(store, [logs], kind="jsonl", interval=1, debounce=0, max_delay=0)
    assert w.once().added == 2
    with open(f, "a", encoding="utf-8") as fh:
        fh.write("\n" + jline(2))
    batch = w.once()
    assert batch.added == 1 and batch.skipped == 2
    assert texts(store) == ["line 0 of s", "line 1 of s", "line 2 of s"] and git_clean(store.root)
