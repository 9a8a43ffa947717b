"""Crashes: `ct` killed with SIGKILL at random moments loses no committed record and commits no half record.

The loop runs real `ct` processes (ingest-path, import jsonl, add, reorganize) in their own process group and
kills the whole group (git children included) after a random delay. After every kill it checks that
every record committed before is still committed byte for byte, that every committed line is whole,
and then lets either `ct fsck --repair` or the next writer clean up. At the end every interrupted
batch is run to completion and each of its records must be in the store exactly once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import CT, commits, ct, ct_process, git_clean, make_store, write_turns

WORDS = (
    "budget trip memory store vector index merge crash record segment kyoto train hotel "
    "deadline review draft cache lock commit branch remote union driver"
).split()


def _git(root, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def committed_lines(root) -> dict[str, bytes]:
    """Every record line of every day log at HEAD: {"path:id": line}. Each must be whole and valid."""
    from memstore.format import record as recordfmt

    out = {}
    for path in _git(root, "ls-tree", "-r", "--name-only", "HEAD", "--", "log").split():
        data = subprocess.run(
            ["git", "-C", str(root), "cat-file", "blob", f"HEAD:{path}"],
            capture_output=True,
            check=True,
        ).stdout
        assert data.endswith(b"\n"), f"{path}: committed log does not end with a whole line"
        for line in data.split(b"\n")[:-1]:
            rec = recordfmt.loads(line.decode("utf-8"))  # raises on a half-written record
            assert "seg" not in rec, f"{path}: format-2 record names a segment file"
            out[f"{path}:{rec['id']}"] = line
    return out


def leftovers(root) -> Counter:
    """What a kill left behind, before anyone repairs it (for the report in docs/reliability.md)."""
    found = Counter()
    journal = (root / ".memstore" / "write-journal.json").exists()
    if journal:
        found["journal"] += 1
    if (root / ".git" / "index.lock").exists():
        found["git index.lock"] += 1
    status = _git(root, "status", "--porcelain", "--untracked-files=all")
    for line in status.splitlines():
        xy, p = line[:2], line[3:]
        name = p.rsplit("/", 1)[-1]
        if ".tmp-" in name:
            found["temp file"] += 1
        elif p.startswith("packs/"):
            found["uncommitted pack" if xy == "??" else "deleted pack"] += 1
        elif p == "tree.json" or p.startswith("tree/"):
            found["uncommitted tree.json"] += 1
        elif p.startswith("log/") and not (root / p).exists():
            # git replaces a file it checks out by unlinking it first: a sync killed inside its
            # merge can leave a day log missing (fsck names it, --repair restores it from HEAD)
            found["day log missing (a killed checkout)"] += 1
        elif p.startswith("log/"):
            found["uncommitted log"] += 1
            data = (root / p).read_bytes()
            if data and not data.endswith(b"\n"):
                found["unfinished last line"] += 1
        if xy[0] not in " ?":
            found["staged, not committed"] += 1
    if journal and not status.strip():
        found["journal only (killed after its commit, or before writing)"] += 1
    return found


class Corpus:
    """Fresh batches of input, so that every run has real work to be killed in."""

    def __init__(self, base: Path, rng: random.Random):
        self.base, self.rng, self.n = base, rng, 0

    def words(self, k: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(k))

    def jsonl(self, records: int) -> tuple[Path, set[str]]:
        self.n += 1
        path = self.base / f"batch{self.n}.jsonl"
        ids = set()
        with open(path, "w") as fh:
            for k in range(records):
                rid = f"imp{self.n}-{k}"
                ids.add(rid)
                day = 20 + k % 3
                fh.write(
                    json.dumps(
                        {
                            "ts": f"2026-11-{day}T{k % 24:02d}:{k % 60:02d}:07Z",
                            "role": "user",
                            "text": f"{rid} {self.words(25)}",
                            "id": rid,
                            "session": f"b{self.n}",
                        }
                    )
                    + "\n"
                )
        return path, ids

    def docs(self, files: int) -> Path:
        self.n += 1
        folder = self.base / f"docs{self.n}"
        folder.mkdir()
        for k in range(files):
            paras = "\n\n".join(self.words(70) for _ in range(4))
            (folder / f"note{k}.md").write_text(f"# Batch {self.n} note {k}\n\n{paras}\n")
        return folder


def _fsck_round(root, figures: Counter) -> None:
    """fsck; when it reports anything, `fsck --repair` must leave a store with no damage, no
    warning and a clean `git status` (the other rounds leave the cleaning to the next command)."""
    check = ct("-C", root, "fsck", "--json", check=False)
    if check.returncode != 0 or json.loads(check.stdout)["warnings"]:
        figures["fsck found leftovers"] += 1
        ct("-C", root, "fsck", "--repair")
        figures["repairs"] += 1
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and not rep["warnings"], rep
    assert git_clean(root)


def _run_or_kill(
    root, args, op: str, took: dict, rng, figures: Counter, seen: Counter
) -> str | None:
    """Run `ct ARGS`; the first run of each kind goes to the end and is timed, later ones are killed
    (the whole process group, git children included) after 20-110 % of the last finished run's
    time. Returns the output of a run that finished, None for a killed one (its leftovers counted)."""
    figures["runs"] += 1
    proc = _start(root, args)
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(
            timeout=rng.uniform(0.2, 1.1) * took[op] if op in took else None
        )
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        figures["kills"] += 1
        seen.update(leftovers(root))
        return None
    assert proc.returncode == 0, f"ct {' '.join(args)} failed:\n{err}"
    took[op] = time.monotonic() - t0
    figures["completed"] += 1
    return out


def _start(root, args):
    return subprocess.Popen(
        [*CT, "-C", str(root), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def crash_loop(tmp_path: Path, kills: int, seed: int, batch: int = 40) -> dict:
    """Run writers, kill them at random; returns the figures the docs quote."""
    from conftest import make_store

    rng = random.Random(seed)
    store = make_store(tmp_path / "store")
    root = store.root
    corpus = Corpus(tmp_path, rng)
    pending: list[tuple[str, list[str], object]] = []  # interrupted batches: (kind, args, expected)
    added_ids: set[str] = set()
    committed = committed_lines(root)
    seen = Counter()
    figures = Counter()
    # The first run of each kind runs to the end and is timed; later kills are drawn between 20%
    # and 110% of the last completed run's time, so that most runs die somewhere inside (start-up,
    # embedding, segments, log append, tree, git commit) and about one in ten finishes.
    took: dict[str, float] = {}
    while figures["kills"] < kills:
        op = rng.choice(["import", "ingest", "add", "import", "ingest", "add", "reorganize"])
        if pending and rng.random() < 0.3:
            kind, args, expected = pending.pop(rng.randrange(len(pending)))
            op = kind
        elif op == "import":
            path, ids = corpus.jsonl(batch)
            args, expected = ["import", "jsonl", str(path)], ids
        elif op == "ingest":
            folder = corpus.docs(max(2, batch // 8))
            args, expected = ["ingest-path", str(folder)], folder
        elif op == "reorganize":
            args, expected = ["reorganize", "--prune-trivial"], None
        else:
            args, expected = (
                ["add", "--json", f"crash-add {figures['runs']} {corpus.words(12)}"],
                None,
            )
        out = _run_or_kill(root, args, op, took, rng, figures, seen)
        if out is not None and op == "add":
            added_ids.update(json.loads(out)["ids"])
        elif out is None and op in ("import", "ingest"):
            pending.append((op, args, expected))
        # Nothing committed before may be lost or changed, and nothing half-written is committed.
        now = committed_lines(root)
        missing = [k for k in committed if now.get(k) != committed[k]]
        assert not missing, f"committed records lost or changed: {missing[:5]}"
        committed = now
        if rng.random() < 0.5:
            _fsck_round(root, figures)
    # Every interrupted batch, run to the end, lands exactly once; everything passes fsck.
    for kind, args, expected in pending:
        ct("-C", root, *args)
    final = committed_lines(root)
    assert all(final.get(k) == v for k, v in committed.items())
    ids = Counter(k.split(":", 1)[1] for k in final)
    dup = [i for i, n in ids.items() if n > 1]
    assert not dup, f"duplicated records: {dup[:5]}"
    for kind, args, expected in pending:
        if kind == "import":
            assert expected <= set(ids), f"import lost {sorted(expected - set(ids))[:5]}"
        else:
            _assert_folder_complete(root, expected)
    assert added_ids <= set(ids)
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and not rep["warnings"], rep
    assert git_clean(root)
    figures["records"] = len(final)
    figures["commits"] = len(commits(root))
    return {"figures": dict(figures), "leftovers": dict(seen)}


def _assert_folder_complete(root, folder: Path) -> None:
    """Every file of an ingested folder has all its chunks, visible, in the store."""
    from memstore.store import Store

    idx = Store.open(root).index()
    for f in sorted(folder.iterdir()):
        rows = idx.conn.execute(
            "SELECT rowid FROM records WHERE source = ? AND hidden = 0 AND type = 'doc'",
            (f"{folder.name}/{f.name}",),
        ).fetchall()  # portable: folder name + relative path
        assert rows, f"{f} was never ingested"
        chunks = {idx.record_at(r)["source"]["chunk"] for (r,) in rows}
        total = idx.record_at(rows[0][0])["source"]["chunks"]
        assert chunks == set(range(total)), f"{f}: chunks {sorted(chunks)} of {total}"


def test_kill_loop_loses_nothing(tmp_path):
    result = crash_loop(
        tmp_path, kills=8, seed=int(os.environ.get("MEMSTORE_CRASH_SEED", "7")), batch=16
    )
    assert result["figures"]["kills"] == 8


@pytest.mark.slow
def test_kill_loop_long(tmp_path):
    kills = int(os.environ.get("MEMSTORE_CRASH_KILLS", "60"))
    result = crash_loop(
        tmp_path, kills=kills, seed=int(os.environ.get("MEMSTORE_CRASH_SEED", "2026"))
    )
    print("crash loop:", json.dumps(result))
    out = os.environ.get("MEMSTORE_CRASH_REPORT")
    if out:
        Path(out).write_text(json.dumps(result, indent=1))
    assert result["figures"]["kills"] == kills


def forget_kill_loop(tmp_path: Path, kills: int, seed: int) -> dict:
    """`ct forget` killed at random: each forget lands whole or not at all, nothing else is touched.

    A forget rewrites day logs, tree shards and markers whole and consolidates packs before its
    commit; a kill anywhere in that must leave the committed store as it was or as the forget made
    it, with the rollback (the next command's, or `ct fsck --repair`) putting every file back.
    """
    from conftest import make_store

    rng = random.Random(seed)
    root = make_store(tmp_path / "store").root
    corpus = Corpus(tmp_path, rng)
    for _ in range(3):  # three days of records, a tree and a marker that quotes one of them
        path, _ = corpus.jsonl(60)
        ct("-C", root, "import", "jsonl", str(path))
    first = committed_lines(root)
    quoted = json.loads(sorted(first.values())[0])
    ct("-C", root, "mark", quoted["text"])
    marker = json.loads((root / "markers.jsonl").read_text().splitlines()[-1])["id"]
    committed = committed_lines(root)
    figures, seen, took, gone = Counter(), Counter(), {}, set()
    while figures["kills"] < kills:
        present = sorted({k.split(":", 1)[1] for k in committed})
        targets = rng.sample(present, rng.randint(1, 3))
        _run_or_kill(root, ["forget", *targets], "forget", took, rng, figures, seen)
        now = committed_lines(root)
        removed = {k.split(":", 1)[1] for k in committed} - {k.split(":", 1)[1] for k in now}
        assert removed in (set(), set(targets)), f"a forget landed in part: {removed} of {targets}"
        assert all(now[k] == v for k, v in committed.items() if k in now), "a kept record changed"
        assert set(now) <= set(committed), "a forget added a record"
        figures["forgets committed"] += bool(removed)
        gone |= removed
        committed = now
        if rng.random() < 0.5:
            _fsck_round(root, figures)
    _fsck_round(root, figures)
    tombstoned = {
        json.loads(line)["id"] for line in (root / "forgotten.jsonl").read_text().splitlines()
    }
    # the marker quoting a record is forgotten with it, and gets a tombstone of its own
    assert tombstoned == gone | ({marker} if quoted["id"] in gone else set()), (
        "a tombstone without its forget, or a forget without its tombstone"
    )
    from memstore.store import Store

    indexed = {rid for (rid,) in Store.open(root).index().conn.execute("SELECT id FROM records")}
    assert indexed == {k.split(":", 1)[1] for k in committed}, (
        "the index and the committed logs differ"
    )
    figures["records"] = len(committed)
    return {"figures": dict(figures), "leftovers": dict(seen)}


def test_forget_kill_loop_lands_whole_or_not_at_all(tmp_path):
    result = forget_kill_loop(
        tmp_path, kills=6, seed=int(os.environ.get("MEMSTORE_CRASH_SEED", "7"))
    )
    assert result["figures"]["kills"] == 6


@pytest.mark.slow
def test_forget_kill_loop_long(tmp_path):
    kills = int(os.environ.get("MEMSTORE_CRASH_KILLS", "60")) // 2
    result = forget_kill_loop(
        tmp_path, kills=kills, seed=int(os.environ.get("MEMSTORE_CRASH_SEED", "2026"))
    )
    print("forget kill loop:", json.dumps(result))
    out = os.environ.get("MEMSTORE_CRASH_REPORT")
    if out:
        Path(out).with_suffix(".forget.json").write_text(json.dumps(result, indent=1))
    assert result["figures"]["kills"] == kills


# ----- targeted leftovers: each kind of debris, made by hand, is rolled back exactly ---------------


def _shard(store) -> Path:
    return next((store.root / "packs").glob("*/*"))


def test_next_writer_rolls_back_a_crashed_write(store):
    store.add("committed before the crash", ts="2026-11-30T08:00:00Z")
    before = committed_lines(store.root)
    n_commits = len(commits(store.root))
    log = store.root / "log/2026/2026-11-30.jsonl"
    shard = _shard(store)
    # What a writer killed between its pack and its commit leaves:
    (store.meta_dir / "write-journal.json").write_text(
        json.dumps({"pid": 999999, "started": time.time() - 5})
    )
    (shard / ("ab" * 32 + ".is")).write_bytes(b"\x03" * 40)
    (shard / (".cd" + "ef" * 31 + ".is.tmp-999999")).write_bytes(b"\x00" * 10)
    with open(log, "ab") as fh:
        fh.write(
            b'{"ts":"2026-11-30T09:00:00.000000Z","role":"user","type":"text","text":"never committed","id":"u1"}\n'
        )
        fh.write(b'{"ts":"2026-11-30T09:01:00.0000')
    (store.root / ".git" / "index.lock").write_bytes(b"")
    proc = ct("-C", store.root, "add", "after the crash", "--ts", "2026-11-30T10:00:00Z")
    assert (
        "Rolled back an interrupted write (pid 999999): 1 uncommitted records, 1 unfinished lines, "
        "1 uncommitted packs, 1 temp files, stale git locks (index.lock)." in proc.stderr
    )
    assert len(commits(store.root)) == n_commits + 1 and git_clean(store.root)
    after = committed_lines(store.root)
    assert all(after[k] == v for k, v in before.items())
    texts = [json.loads(v)["text"] for v in after.values()]
    assert "never committed" not in texts and "after the crash" in texts
    kept = next((store.meta_dir / "rolled-back").rglob("*.jsonl")).read_bytes()
    assert b"never committed" in kept and kept.endswith(b'"2026-11-30T09:01:00.0000')
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["warnings"] == []


def test_fsck_reports_then_repair_fixes_only_uncommitted_things(store):
    store.add("first", ts="2026-11-29T08:00:00Z")
    store.add("second", ts="2026-11-30T08:00:00Z")
    head = _git(store.root, "rev-parse", "HEAD")
    before = committed_lines(store.root)
    shard = _shard(store)
    (shard / ("09" * 32 + ".is")).write_bytes(b"")
    (shard / (".10" * 32 + ".is.tmp-4242")).write_bytes(b"x")
    with open(store.root / "log/2026/2026-11-29.jsonl", "ab") as fh:
        fh.write(b'{"ts":"2026-11-29T09:0')
    (store.meta_dir / "write-journal.json").write_text("{torn")
    rep = ct("-C", store.root, "fsck", check=False)
    assert rep.returncode == 1
    assert (
        "log/2026/2026-11-29.jsonl:2" in rep.stdout
        and "temp file left by an interrupted write" in rep.stdout
    )
    assert "did not finish" in rep.stdout
    fixed = ct("-C", store.root, "fsck", "--repair")
    assert "1 unfinished lines, 1 uncommitted packs, 1 temp files" in fixed.stdout
    assert fixed.stdout.rstrip().endswith("ok: 2 records, 2 packs, 0 problems, 0 warnings")
    assert _git(store.root, "rev-parse", "HEAD") == head and git_clean(store.root)
    assert committed_lines(store.root) == before


HAND_LINE = b'{"ts":"2026-11-30T09:00:00.000000Z","role":"user","type":"text","text":"hand-written","id":"h1"}\n'


def test_writer_without_journal_refuses_uncommitted_log_lines(store):
    store.add("first", ts="2026-11-30T08:00:00Z")
    log = store.root / "log/2026/2026-11-30.jsonl"
    with open(log, "ab") as fh:
        fh.write(HAND_LINE)
    edited = log.read_bytes()
    n = len(commits(store.root))
    proc = ct("-C", store.root, "add", "--ts", "2026-11-30T10:00:00Z", "more", check=False)
    assert proc.returncode == 1
    assert f"{log} has uncommitted changes" in proc.stderr and "fsck --repair" in proc.stderr
    assert (
        len(commits(store.root)) == n and log.read_bytes() == edited
    )  # nothing written, the edit kept
    # An import (the other write path) refuses the same way.
    src = store.root.parent / "more.jsonl"
    src.write_text('{"ts":"2026-11-30T11:00:00Z","role":"user","text":"imported"}\n')
    proc = ct("-C", store.root, "import", "jsonl", src, check=False)
    assert proc.returncode == 1 and f"{log} has uncommitted changes" in proc.stderr
    assert len(commits(store.root)) == n and log.read_bytes() == edited
    # Staged (a person's git add), fsck --repair leaves it alone: the refusal says to commit or unstage.
    subprocess.run(["git", "-C", str(store.root), "add", str(log)], check=True)
    proc = ct("-C", store.root, "add", "--ts", "2026-11-30T10:00:00Z", "more", check=False)
    assert (
        proc.returncode == 1
        and "They are staged" in proc.stderr
        and "restore --staged" in proc.stderr
    )
    assert len(commits(store.root)) == n and log.read_bytes() == edited


def test_a_write_to_another_day_commits_only_its_own_files(store):
    """A hand edit in one day log is left uncommitted (and unharmed) by a write to another day."""
    store.add("first", ts="2026-11-30T08:00:00Z")
    log = store.root / "log/2026/2026-11-30.jsonl"
    with open(log, "ab") as fh:
        fh.write(HAND_LINE)
    edited = log.read_bytes()
    ct("-C", store.root, "add", "--ts", "2026-12-01T10:00:00Z", "more")
    assert log.read_bytes() == edited
    assert _git(store.root, "status", "--porcelain").strip() == "M log/2026/2026-11-30.jsonl"
    assert "hand-written" not in _git(store.root, "show", "HEAD:log/2026/2026-11-30.jsonl")


def test_a_write_refuses_to_commit_what_a_person_staged(store):
    store.add("first", ts="2026-11-30T08:00:00Z")
    log = store.root / "log/2026/2026-11-30.jsonl"
    with open(log, "ab") as fh:
        fh.write(HAND_LINE)
    _git(store.root, "add", "log/2026/2026-11-30.jsonl")
    head = _git(store.root, "rev-parse", "HEAD")
    proc = ct("-C", store.root, "add", "--ts", "2026-12-01T10:00:00Z", "more", check=False)
    assert (
        proc.returncode == 1
        and "has staged changes" in proc.stderr
        and "Nothing was written" in proc.stderr
    )
    assert _git(store.root, "rev-parse", "HEAD") == head
    # the person's staged change is still staged; the failed write left no file behind
    assert (
        _git(store.root, "status", "--porcelain", "--untracked-files=all").strip()
        == "M  log/2026/2026-11-30.jsonl"
    )


def test_repair_restores_a_deleted_log_and_leaves_a_hand_edit_alone(store):
    store.add("first", ts="2026-11-29T08:00:00Z")
    store.add("second", ts="2026-11-30T08:00:00Z")
    (store.root / "log/2026/2026-11-29.jsonl").unlink()
    log30 = store.root / "log/2026/2026-11-30.jsonl"
    log30.write_text(log30.read_text().replace("second", "SECOND"))
    out = ct("-C", store.root, "fsck", "--repair", check=False)
    assert (store.root / "log/2026/2026-11-29.jsonl").exists()
    assert "left alone: log/2026/2026-11-30.jsonl: differs from its committed version" in out.stdout
    assert "SECOND" in log30.read_text()  # a person's edit is theirs to keep or undo
    assert out.returncode == 1  # and fsck still names the damage it causes


def test_repair_rebuilds_a_garbage_index(store):
    store.add("indexed line", ts="2026-11-30T08:00:00Z")
    store.index()
    store.index(update=False).close()
    (store.meta_dir / "index.db").write_bytes(b"this is not sqlite" * 100)
    for p in store.meta_dir.glob("index.db-*"):
        p.unlink()
    out = json.loads(ct("-C", store.root, "fsck", "--repair", "--json").stdout)
    assert out["ok"] and out["repair"]["index"]["rebuilt"]
    assert "indexed line" in ct("-C", store.root, "search", "indexed", "--mode", "exact").stdout


# ----- two writers on one clone --------------------------------------------------------------------


def test_two_concurrent_writers_serialise(store):
    n0 = len(commits(store.root))
    errors = []

    def writer(name):  # two writer processes, as two `ct add` run at once would be
        for i in range(4):
            proc = ct_process("-C", store.root, "add", f"{name} line {i}", check=False)
            if proc.returncode:
                errors.append(proc.stderr)

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(commits(store.root)) == n0 + 8 and git_clean(store.root)
    texts = sorted(json.loads(v)["text"] for v in committed_lines(store.root).values())
    assert texts == sorted(f"{n} line {i}" for n in ("left", "right") for i in range(4))
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["warnings"] == []


def test_lock_timeout_names_the_lock_and_changes_nothing(store):
    n0 = len(commits(store.root))
    with store.lock():
        t0 = time.monotonic()
        proc = ct_process(
            "-C", store.root, "add", "blocked", check=False, env={"MEMSTORE_LOCK_TIMEOUT": "0.5"}
        )
        waited = time.monotonic() - t0
    assert proc.returncode == 7
    assert "Another memstore process has held the write lock" in proc.stderr
    assert "MEMSTORE_LOCK_TIMEOUT" in proc.stderr
    assert waited < 10
    assert len(commits(store.root)) == n0 and git_clean(store.root)


def test_a_failed_write_cuts_exactly_its_own_appends(store, monkeypatch):
    """The journal records each file's size before the writer's first append, so the rollback of a
    failed write cuts those bytes and nothing else: a person's line appended a moment before the
    write, to a day the write does not touch, stays (file times alone could not tell them apart)."""
    from memstore.gitrepo import GitRepo

    store.add("first", ts="2026-11-30T08:00:00Z")
    store.add("second", ts="2026-12-01T08:00:00Z")
    other = store.root / "log/2026/2026-11-30.jsonl"
    with open(other, "ab") as fh:  # the person's edit, microseconds before the write begins
        fh.write(HAND_LINE)
    edited = other.read_bytes()
    day = store.root / "log/2026/2026-12-01.jsonl"
    before = day.read_bytes()
    n = len(commits(store.root))

    def fail(self, *args, **kwargs):
        assert day.read_bytes() != before  # the write appended its line, then its commit fails
        raise RuntimeError("commit failed")

    monkeypatch.setattr(GitRepo, "commit", fail)
    with pytest.raises(RuntimeError, match="commit failed"):
        store.add("third", ts="2026-12-01T09:00:00Z")
    assert day.read_bytes() == before  # the writer's own line is gone
    assert other.read_bytes() == edited  # the person's line is not
    assert len(commits(store.root)) == n
    saved = b"".join(
        p.read_bytes() for p in (store.meta_dir / "rolled-back").rglob("*") if p.is_file()
    )
    assert b"third" in saved and b"hand-written" not in saved
    assert not (store.meta_dir / "write-journal.json").exists()


def test_a_writer_embeds_with_the_embedder_the_store_has_when_it_takes_the_lock(tmp_path):
    """A process that opened the store before another one re-embedded it (`ct reembed` changes
    memstore.toml) must not commit vectors of the old size: a writer reads the config again under
    the write lock. Likewise after a reembed killed before its commit: the rollback puts the old
    config back, the next write uses it, and `fsck --repair` checks against it (no false damage)."""
    import sys

    from memstore.format import pack
    from memstore.store import Store

    def dims():
        return {pack.read(p).manifest["dim"] for p in (store.root / "packs").rglob("*.is")}

    def killed_reembed(dim):  # dies where a kill between writing the files and committing leaves it
        code = (
            "import os, sys; from memstore.gitrepo import GitRepo; GitRepo.commit = lambda *a, **k: os._exit(9); "
            "from memstore.store import Store; Store.open(sys.argv[1]).reembed(dim=int(sys.argv[2]))"
        )
        assert (
            subprocess.run([sys.executable, "-c", code, str(store.root), str(dim)]).returncode == 9
        )
        assert f"dim = {dim}" in (store.root / "memstore.toml").read_text()

    store = make_store(tmp_path / "s")
    store.add("first turn about the harbour", ts="2026-11-30T08:00:00Z")
    early = Store.open(store.root)  # opened with the 384-d config, before the reembed below
    ct("-C", store.root, "reembed", "--dim", "32")
    early.add("written by the process that opened the store first", ts="2026-11-30T09:00:00Z")
    rep = json.loads(ct("-C", store.root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["damage"] == [] and dims() == {32}, rep

    killed_reembed(96)
    ct("-C", store.root, "add", "--ts", "2026-11-30T10:00:00Z", "after a killed reembed")
    rep = json.loads(ct("-C", store.root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["damage"] == [] and dims() == {32} and git_clean(store.root), rep

    killed_reembed(96)
    repaired = ct("-C", store.root, "fsck", "--repair", check=False)
    assert repaired.returncode == 0 and "DAMAGE" not in repaired.stdout + repaired.stderr, (
        repaired.stdout
    )
    assert (
        dims() == {32}
        and git_clean(store.root)
        and "dim = 32" in (store.root / "memstore.toml").read_text()
    )


def test_fsck_names_a_stale_git_index_lock(tmp_path):
    """A .git/index.lock that a dead git process left makes every write fail with git's words; fsck
    names it (only when it is old: a running git holds it for moments) with what to run."""
    store = make_store(tmp_path / "s")
    store.add("first", ts="2026-11-30T08:00:00Z")
    lock = store.root / ".git" / "index.lock"
    lock.touch()
    assert (
        json.loads(ct("-C", store.root, "fsck", "--json").stdout)["warnings"] == []
    )  # fresh: a git at work
    os.utime(lock, (time.time() - 7200, time.time() - 7200))
    warnings = json.loads(ct("-C", store.root, "fsck", "--json").stdout)["warnings"]
    assert len(warnings) == 1 and "index.lock: a git lock file 120 minutes old" in warnings[0], (
        warnings
    )
    assert f'"rm {lock}"' in warnings[0]
    lock.unlink()
    ct("-C", store.root, "add", "second", "--ts", "2026-11-30T09:00:00Z")


# ----- ct sync killed at random -------------------------------------------------------------------


def two_clones(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(bare remote, store a that pushed to it first, b a plain clone of it)."""
    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    a = make_store(tmp_path / "a").root
    _git(a, "remote", "add", "origin", str(remote))
    ct("-C", a, "sync", "--set-upstream", "origin")
    b = tmp_path / "b"
    _git(tmp_path, "clone", "-q", str(remote), str(b))
    return remote, a, b


def sync_kill_loop(tmp_path: Path, kills: int, seed: int, batch: int = 12) -> dict:
    """`ct sync` killed at random between two clones of a bare remote: one `ct fsck --repair` leaves
    the killed clone clean (no damage, no warning, git clean), and nothing either clone wrote is lost.

    Each round the other clone imports a batch on the same days and syncs, this clone imports one
    and its `ct sync` (fetch, merge, reindex, tombstones, push) is killed after a random delay.
    """
    rng = random.Random(seed)
    remote, a, b = two_clones(tmp_path)
    corpus = Corpus(tmp_path, rng)
    wrote: set[str] = set()
    figures, seen, took = Counter(), Counter(), {}
    committed = committed_lines(a)
    while figures["kills"] < kills:
        for root in (b, a):
            path, ids = corpus.jsonl(batch)
            ct("-C", root, "import", "jsonl", path)
            wrote |= ids
        ct("-C", b, "sync")
        _run_or_kill(a, ["sync"], "sync", took, rng, figures, seen)
        # a kill inside the push can leave the remote's receive-pack dead holding its ref locks
        remote_locks = [remote / "refs/heads/main.lock", remote / "HEAD.lock"]
        if any(p.exists() for p in remote_locks):
            seen["remote ref locks (a killed push)"] += 1
        now = committed_lines(a)
        assert {k.split(":", 1)[1] for k in committed} <= {k.split(":", 1)[1] for k in now}, (
            "a sync lost records"
        )
        committed = now
        _fsck_round(a, figures)
        assert not any(p.exists() for p in remote_locks), "the repair left the remote's lock"
    ct("-C", a, "sync")
    ct("-C", b, "sync")
    for root in (a, b):
        ids = {k.split(":", 1)[1] for k in committed_lines(root)}
        assert wrote <= ids, f"{root.name} lacks {sorted(wrote - ids)[:5]}"
        rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
        assert rep["ok"] and not rep["warnings"], rep
        assert git_clean(root)
    figures["records"] = len(committed_lines(a))
    return {"figures": dict(figures), "leftovers": dict(seen)}


def test_sync_kill_loop_needs_one_repair(tmp_path):
    result = sync_kill_loop(tmp_path, kills=5, seed=int(os.environ.get("MEMSTORE_CRASH_SEED", "7")))
    assert result["figures"]["kills"] == 5


@pytest.mark.slow
def test_sync_kill_loop_long(tmp_path):
    kills = int(os.environ.get("MEMSTORE_CRASH_KILLS", "60")) // 2
    result = sync_kill_loop(
        tmp_path, kills=kills, seed=int(os.environ.get("MEMSTORE_CRASH_SEED", "2026"))
    )
    print("sync kill loop:", json.dumps(result))
    out = os.environ.get("MEMSTORE_CRASH_REPORT")
    if out:
        Path(out).with_suffix(".sync.json").write_text(json.dumps(result, indent=1))
    assert result["figures"]["kills"] == kills


def test_repair_removes_the_remote_ref_lock_a_killed_fetch_left(store):
    """A `ct sync` killed inside its `git fetch` leaves refs/remotes/origin/main.lock, and every
    later fetch fails on it; the one repair after the kill removes it (it is newer than the journal)."""
    from memstore.repair import JOURNAL

    write_turns(store, [("2026-11-10T09:00:00Z", "user", "first", "s", None)])
    lock = store.root / ".git" / "refs" / "remotes" / "origin" / "main.lock"
    with store.lock():  # the sync's journalled lock
        journal = (store.meta_dir / JOURNAL).read_bytes()
        lock.parent.mkdir(parents=True)
        lock.write_text("")  # git fetch, killed with the sync
    (store.meta_dir / JOURNAL).write_bytes(journal)  # the sync died holding it
    ct("-C", store.root, "fsck", "--repair")
    assert not lock.exists()


def test_a_day_log_a_killed_checkout_left_missing_is_counted_and_repaired(store):
    """git checks a file out by unlinking it first: a sync killed inside its merge can leave a day
    log missing. The kill loop counts it (it crashed reading it), and one repair restores it."""
    write_turns(store, [("2026-11-20T10:00:00Z", "user", "a turn about bikes", "s", None)])
    (store.root / "log" / "2026" / "2026-11-20.jsonl").unlink()
    assert leftovers(store.root)["day log missing (a killed checkout)"] == 1
    figures = Counter()
    _fsck_round(store.root, figures)
    assert figures["repairs"] == 1 and len(committed_lines(store.root)) == 1


def _hold_the_ref_locks(remote: Path, mark: Path) -> Path:
    """A `reference-transaction` hook in `remote` that stops a push while git holds its ref locks
    (the "prepared" state): a kill then lands exactly where a kill loop's rare unlucky one does."""
    hook = remote / "hooks" / "reference-transaction"
    hook.write_text(f'#!/bin/sh\n[ "$1" = prepared ] && touch "{mark}" && sleep 60\nexit 0\n')
    hook.chmod(0o755)
    return hook


def _sync_killed_in_its_push(root: Path, remote: Path, tmp_path: Path) -> list[Path]:
    """`ct sync` of `root`, killed (its process group, receive-pack included) while the remote's
    receive-pack holds the ref locks; returns the locks it left in the remote."""
    mark = tmp_path / "push-holds-the-locks"
    hook = _hold_the_ref_locks(remote, mark)
    proc = _start(root, ["sync"])
    deadline = time.monotonic() + 60
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    _, err = proc.communicate()
    hook.unlink()
    assert mark.exists(), f"the push never reached the remote's ref update:\n{err}"
    return [p for p in (remote / "refs/heads/main.lock", remote / "HEAD.lock") if p.exists()]


def test_a_sync_killed_in_its_push_needs_one_repair_for_the_remote_too(tmp_path):
    """A sync killed while the bare remote's receive-pack holds refs/heads/main.lock (its process
    group holds receive-pack too) leaves that lock in the remote, and every later push of every
    clone failed on it ("20 pushes were rejected"). The one repair after the kill removes it (it
    holds the commit the killed push pushed); then both clones sync and each holds every record."""
    remote, a, b = two_clones(tmp_path)
    ct("-C", a, "add", "--ts", "2026-11-30T10:00:00Z", "a's turn pushed when killed")
    ct("-C", b, "add", "--ts", "2026-11-30T11:00:00Z", "b's turn")
    pushed = _git(a, "rev-parse", "HEAD").strip()
    left = _sync_killed_in_its_push(a, remote, tmp_path)
    assert left and all(p.read_text().strip() in ("", pushed) for p in left)
    figures = Counter()
    _fsck_round(a, figures)
    assert figures["repairs"] == 1
    assert not [p for p in left if p.exists()], "the repair left the killed push's remote lock"
    ct("-C", b, "sync")
    ct("-C", a, "sync")
    ct("-C", b, "sync")
    for root in (a, b):
        texts = {json.loads(v)["text"] for v in committed_lines(root).values()}
        assert {"a's turn pushed when killed", "b's turn"} <= texts
        assert git_clean(root)


def test_repair_leaves_a_remote_lock_the_killed_push_cannot_have_made(tmp_path):
    """The rollback removes a remote's lock only when the killed push provably made it: one holding
    another clone's commit (a push of theirs) or older than the push stays for its owner."""
    from memstore.repair import JOURNAL, journal_push

    remote = tmp_path / "remote.git"
    _git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    store = make_store(tmp_path / "a")
    _git(store.root, "remote", "add", "origin", str(remote))
    ct("-C", store.root, "sync", "--set-upstream", "origin")
    theirs, older = remote / "refs" / "heads" / "main.lock", remote / "HEAD.lock"
    older.write_text("")
    past = time.time() - 30
    os.utime(older, (past, past))
    with store.lock():  # the sync's journalled lock, its push under way
        journal_push(store, remote, "refs/heads/main", store.git.head())
        theirs.write_text("f" * 40 + "\n")  # another clone's push, made while this one pushed
        journal = (store.meta_dir / JOURNAL).read_bytes()
    (store.meta_dir / JOURNAL).write_bytes(journal)  # the sync died holding it
    out = json.loads(ct("-C", store.root, "fsck", "--repair", "--json").stdout)
    assert theirs.exists() and older.exists(), out
    assert not (store.meta_dir / JOURNAL).exists()
