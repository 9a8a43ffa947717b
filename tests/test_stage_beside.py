"""A big write's forked file writer stages its files in git itself (core.FilesBeside,
GitRepo.stage_big) while the writing process places the records: the commit finds them staged and
hashes nothing again, its tree is the one staging them in the writing process makes, and a child
that fails to stage, or is killed in `git add`, costs the write nothing or rolls it back whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ct, git_clean, make_store
from test_big_import import _turns, _zlib_levels
from test_crash import committed_lines

from memstore import core, gitrepo, workers
from memstore.errors import GitError
from memstore.store import Store

TESTS = str(Path(__file__).parent)


@pytest.fixture
def beside(monkeypatch):
    """A write of 50 records or more has a forked child write (and stage) its files; the
    FilesBeside objects started, for the test to look at."""
    started: list = []
    real = core.FilesBeside.__init__

    def init(self, *a):
        real(self, *a)
        started.append(self)

    monkeypatch.setattr(core, "BESIDE_RECORDS", 50)
    monkeypatch.setattr(core.FilesBeside, "__init__", init)
    monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
    monkeypatch.setattr(workers.threading, "active_count", lambda: 1)
    return started


def _git(root, *args, env=None) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env
    ).stdout


def _records(store, days: int = 120, per_day: int = 3, start: int = 0) -> list[dict]:
    """Conversation turns over `days` days: twice as many paths (a log and a pack folder a day)."""
    rows = _turns(start + days, per_day)[start * per_day :]
    return [store.normalize(r) for r in rows]


def _count_hashing(root: Path, count: Path) -> None:
    """A clean filter that passes the bytes through unchanged (the blob ids stay the same) and
    counts the files git hashes: one line in `count` each."""
    _git(root, "config", "filter.count.clean", f"sh -c 'echo x >> {count}; cat'")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text(
        "log/** filter=count\npacks/** filter=count\n"
    )


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _tree_staged_by_hand(root: Path, paths: list[str]) -> str:
    """The tree git makes of the parent commit plus `paths` staged afresh from the files on disk in a
    scratch index (what staging them in the writing process gives)."""
    env = {**os.environ, "GIT_INDEX_FILE": str(root / ".git" / "scratch-index")}
    _git(root, "read-tree", "HEAD~1", env=env)
    for i in range(0, len(paths), 200):
        _git(root, "add", "-A", "--", *paths[i : i + 200], env=env)
    tree = _git(root, "write-tree", env=env).strip()
    (root / ".git" / "scratch-index").unlink()
    return tree


def test_the_child_stages_its_files_and_the_commit_hashes_none_again(tmp_path, beside, monkeypatch):
    store = make_store(tmp_path / "s")
    store.write(_records(store, days=5, start=200), "first")
    count = tmp_path / "hashed"
    _count_hashing(store.root, count)
    parent, calls = os.getpid(), []
    real_git, real_paths = gitrepo._git, core.FilesBeside.paths

    def traced(cwd, args, env):
        if os.getpid() == parent:
            calls.append(" ".join(a for a in args if not a.startswith("core.")))
        return real_git(cwd, args, env)

    seen = {}

    def paths(self):
        calls.append("<paths>")
        out = real_paths(self)
        calls.append("</paths>")
        staged = _git(store.root, "diff", "--cached", "--name-only", "--", *out).split()
        seen.update(paths=out, staged=staged, hashed=_lines(count))
        return out

    monkeypatch.setattr(gitrepo, "_git", traced)
    monkeypatch.setattr(core.FilesBeside, "paths", paths)
    monkeypatch.setattr(core.FilesBeside, "start", _marking(core.FilesBeside.start, calls))
    res = store.write(_records(store), "Import 360 turns")
    assert len(beside) == 1 and beside[0].stage_error is None and res.commit
    # every log and pack the child wrote was staged (by the child) before it said it was done
    assert len(seen["paths"]) == 240
    assert len(seen["staged"]) >= 240 and {p.split("/")[0] for p in seen["staged"]} == {
        "log",
        "packs",
    }
    assert seen["hashed"] >= 240  # the child hashed them: every log and every new pack
    # the writing process ran no git while the child staged, and its commit hashed nothing again
    assert calls[calls.index("<start>") + 1 : calls.index("</paths>")] == ["<paths>"]
    assert any(c.split(" -- ")[0].endswith("add -A") for c in calls[calls.index("</paths>") :])
    assert _lines(count) == seen["hashed"]
    assert git_clean(store.root) and store.fsck().ok


def test_a_stager_of_its_own_stages_while_the_child_becomes_the_indexing_process(
    tmp_path, beside, monkeypatch
):
    """The child forks a stager for `git add` and becomes the indexing process at once (the index
    no longer waits for git); the indexing process reaps the stager before it exits, so that no
    process of the write outlives it and the stager's time counts among the writer's children."""
    store = make_store(tmp_path / "s")
    store.write(_records(store, days=5, start=200), "first")
    seen = tmp_path / "stager"
    real = core._stage_written

    def traced(*a):  # (runs in the stager: it writes who it is and who its parent is)
        seen.write_text(f"{os.getpid()} {os.getppid()} {os.getpgid(0)}")
        return real(*a)

    monkeypatch.setattr(core, "_stage_written", traced)
    res = store.write(_records(store), "Import 360 turns")
    assert len(beside) == 1 and beside[0].stage_error is None and res.commit
    stager, parent, group = map(int, seen.read_text().split())
    child = beside[0].pid
    assert stager not in (child, os.getpid()) and parent == child and group == child
    assert beside[0].returncode == 0
    assert not Path(f"/proc/{stager}").exists()  # reaped (no zombie), not left running
    assert git_clean(store.root) and store.fsck().ok


def test_files_staged_within_a_second_of_writing_are_not_hashed_again(
    tmp_path, beside, monkeypatch
):
    """git keeps an index entry's mtime to the second: a file written in the second the index was
    written is "racily clean", and the next `git add` hashes it again. A quick staging (four days:
    eight files) still leaves the commit nothing to hash: the child waits for the next second."""
    store = make_store(tmp_path / "s")
    store.write(_records(store, days=5, start=200), "first")
    count = tmp_path / "hashed"
    _count_hashing(store.root, count)
    seen = []
    real_paths = core.FilesBeside.paths

    def paths(self):
        out = real_paths(self)
        seen.append(_lines(count))
        return out

    monkeypatch.setattr(core.FilesBeside, "paths", paths)
    for k in range(3):
        store.write(_records(store, days=4, per_day=15, start=300 + 4 * k), f"Add 60 turns, {k}")
        assert seen[-1] >= 8 and _lines(count) == seen[-1]  # the child's eight, nothing after
    assert len(beside) == 3 and git_clean(store.root)


def _marking(real, calls):
    def start(cls, *a, **k):
        calls.append("<start>")
        return real(*a, **k)

    return classmethod(start)


def test_the_commit_is_the_tree_the_writing_process_would_stage(tmp_path, beside, monkeypatch):
    """Same paths, same blob ids as staging the same files afresh; same paths as a write without a
    second process (MEMSTORE_WORKERS=1) of the same records."""
    from test_index_beside import _fixed_ids

    trees = []
    for name, workers_env in (("alone", "1"), ("beside", None)):
        if workers_env:
            monkeypatch.setenv(workers.WORKERS_ENV, workers_env)
        else:
            monkeypatch.delenv(workers.WORKERS_ENV, raising=False)
        _fixed_ids(monkeypatch)
        store = make_store(tmp_path / name)
        store.write(_records(store, days=5, start=200), "first")
        res = store.write(_records(store), "Import 360 turns")
        changed = _git(store.root, "diff-tree", "-r", "--name-only", "HEAD~1", "HEAD").split()
        trees.append((store, res, changed))
    (alone, _, alone_changed), (store, res, changed) = trees
    assert len(beside) == 1 and beside[0].stage_error is None
    # logs, pack files (named by their bytes, sealed with fresh keys: one a day either way), tree
    assert _named(changed) == _named(alone_changed) and len(changed) > 240
    assert _git(store.root, "rev-parse", "HEAD^{tree}").strip() == _tree_staged_by_hand(
        store.root, changed
    )


def _named(paths: list[str]) -> list[str]:
    return [p.rsplit("/", 1)[0] + "/*.is" if p.startswith("packs/") else p for p in paths]


def test_a_child_that_cannot_stage_leaves_it_to_the_commit(tmp_path, beside, monkeypatch):
    parent = os.getpid()
    real = gitrepo.GitRepo.stage_big

    def failing(self, paths, sealed_under=None):
        if os.getpid() != parent:  # the child: half of the files staged, then git fails
            real(self, paths[: len(paths) // 2], sealed_under)
            raise GitError("git add failed in the store: fatal: simulated failure")
        return real(self, paths, sealed_under)

    monkeypatch.setattr(gitrepo.GitRepo, "stage_big", failing)
    store = make_store(tmp_path / "s")
    store.write(_records(store, days=5, start=200), "first")
    before = committed_lines(store.root)
    res = store.write(_records(store), "Import 360 turns")
    assert len(beside) == 1 and "simulated failure" in beside[0].stage_error
    assert res.commit and len(res.added) == 360
    after = committed_lines(store.root)
    assert before.items() <= after.items() and len(after) == len(before) + 360
    changed = _git(store.root, "diff-tree", "-r", "--name-only", "HEAD~1", "HEAD").split()
    assert _git(store.root, "rev-parse", "HEAD^{tree}").strip() == _tree_staged_by_hand(
        store.root, changed
    )
    assert git_clean(store.root) and store.fsck().ok


@pytest.mark.parametrize("encrypted", [False, True])
def test_the_childs_staging_keeps_packs_uncompressed_and_logs_at_level_1(
    tmp_path, beside, monkeypatch, encrypted
):
    if encrypted:
        ident = tmp_path / "me.key"
        ct("keys", "new", ident)
        monkeypatch.setenv("MEMSTORE_IDENTITY", str(ident))
        ct("init", tmp_path / "s", "--embedder", "hash", "--timezone", "UTC", "--encrypt")
        store = Store.open(tmp_path / "s", search_parents=False)
    else:
        store = make_store(tmp_path / "s")
    store.write(_records(store), "Import 360 turns")
    assert len(beside) == 1 and beside[0].stage_error is None
    levels = _zlib_levels(store.root)
    packs = {p: h for p, h in levels.items() if p.startswith("packs/")}
    logs = {p: h for p, h in levels.items() if p.startswith("log/")}
    assert len(packs) >= 120 and len(logs) >= 120
    assert {h for h, _ in packs.values()} == {b"\x78\x01"}
    assert all(r >= 1.0 for _, r in packs.values())
    # (an encrypted store's lines are base64 ciphertext: 0.77 of their size at zlib's level 1)
    limit = 0.85 if encrypted else 0.7
    assert {h for h, _ in logs.values()} == {b"\x78\x01"}
    assert all(r < limit for _, r in logs.values())


_SLOW_STAGING = r"""
import sys
sys.path.insert(0, {tests!r})
from memstore import core
from memstore.errors import MemstoreError
from memstore.store import Store
from test_big_import import _turns

core.BESIDE_RECORDS = 50
real = core.FilesBeside.__init__
def init(self, *a):
    real(self, *a)
    print("BESIDE", self.pid, flush=True)
core.FilesBeside.__init__ = init
store = Store.open({root!r}, search_parents=False)
try:
    store.write([store.normalize(r) for r in _turns(120, 3)], "Import 360 turns")
    print("DONE", flush=True)
except MemstoreError as exc:
    print("FAILED", str(exc).replace("\n", " "), flush=True)
"""


def _slow_git_add(root: Path, tmp: Path) -> tuple[Path, Path, Path]:
    """The first file git hashes while `flag` exists waits in a clean filter (which writes its pid
    to `staging` first) until `release` exists (60 s at most): a `git add` caught holding
    .git/index.lock."""
    flag, staging, release = tmp / "slow", tmp / "staging", tmp / "release"
    script = (
        f"if [ -f {flag} ] && rm {flag} 2>/dev/null; then echo $$ > {staging}.tmp; "
        f"mv {staging}.tmp {staging}; i=0; "
        f'while [ ! -f {release} ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi; cat'
    )
    _git(root, "config", "filter.slow.clean", f"sh -c '{script}'")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "attributes").write_text("log/** filter=slow\n")
    flag.touch()
    return flag, staging, release


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(
        f"/proc/{pid}/status"
    ).read_text(errors="replace")


def _python_ancestor(pid: int) -> int:
    """The nearest process above `pid` that runs Python (the git add's caller)."""
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if "python" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode():
            return pid
    raise AssertionError("no Python process above the filter")


@pytest.mark.parametrize("who", ["child", "everything", "writer"])
def test_a_child_killed_in_git_add_is_rolled_back_and_the_next_write_works(tmp_path, who):
    """SIGKILL while the `git add` of the child's stager (its own forked process: the child has
    become the indexing process meanwhile) holds .git/index.lock: of the stager alone (the
    writing process sees its answer end unsaid, kills what is left of the child's process group,
    the git add, its filter and the indexing process, and rolls back), of the writing process and
    the child's whole group (the next write rolls back and clears the stale index.lock), or of the
    writing process alone (the stager stages all its files, finds nobody to tell and exits, the
    indexing process finishes: the next write unstages them with the rest)."""
    store = make_store(tmp_path / "s")
    store.write(_records(store, days=5, start=200), "first")
    before, head = committed_lines(store.root), store.git.head()
    flag, staging, release = _slow_git_add(store.root, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_STAGING.format(tests=TESTS, root=str(store.root))],
        stdout=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != workers.WORKERS_ENV},
    )
    line = proc.stdout.readline()
    assert line.startswith("BESIDE"), line
    child = int(line.split()[1])
    for _ in range(600):
        if staging.exists():
            break
        time.sleep(0.05)
    filter_pid = int(staging.read_text())
    assert (store.root / ".git" / "index.lock").exists()  # the child's git add, mid-way
    stager = _python_ancestor(filter_pid)  # (the child's own process that stages, git add's parent)
    assert stager not in (child, proc.pid) and os.getpgid(stager) == child
    if who == "child":
        os.kill(stager, signal.SIGKILL)
        out = proc.communicate(timeout=60)[0]
        assert "FAILED Writing the day logs and packs failed" in out, out
        assert proc.returncode == 0
        for _ in range(40):  # killed with the child's group, not left sleeping on the lock
            if not _alive(filter_pid):
                break
            time.sleep(0.05)
        assert not _alive(filter_pid)
        assert not (store.root / ".git" / "index.lock").exists()
        assert store.git.head() == head and git_clean(store.root)
    else:
        proc.kill()
        proc.wait()
        if who == "everything":
            os.killpg(child, signal.SIGKILL)
            assert (store.root / ".git" / "index.lock").exists()
        else:  # the child goes on: stages every file, then cannot tell a writer that is gone
            release.touch()
            for _ in range(600):
                if not _alive(child) and not _alive(stager):
                    break
                time.sleep(0.05)
            assert not _alive(child) and not _alive(stager)
            staged = _git(store.root, "diff", "--cached", "--name-only").split()
            assert len(staged) >= 240 and not (store.root / ".git" / "index.lock").exists()
        fsck = ct("-C", store.root, "fsck", check=False)
        assert "did not finish" in fsck.stdout + fsck.stderr
    assert not flag.exists()
    after = Store.open(store.root, search_parents=False)
    res = after.write(_records(after, days=4, start=300), "Add 12 turns")  # rolls back first
    assert res.commit and len(res.added) == 12
    assert not (store.root / ".git" / "index.lock").exists() and git_clean(store.root)
    lines = committed_lines(store.root)
    assert before.items() <= lines.items() and len(lines) == len(before) + 12
    assert ct("-C", store.root, "fsck").returncode == 0
