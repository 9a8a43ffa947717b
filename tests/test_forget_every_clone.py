"""A forget is honoured on every clone: what a plain git merge brings back of a forgotten record is
damage (fsck exit 1, --repair removes it), the post-merge hook cleans it, the pre-push hook and a
guarded bare remote's pre-receive hook refuse to carry it (docs/format.md, "Merging with plain git")."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import committed_ids, ct, make_store

SECRET = "the octopus combination is 4417"


def git(root, *args, check=True):
    proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed:\n{proc.stderr}")
    return proc


def _identity(*roots):
    for i, root in enumerate(roots):
        git(root, "config", "user.name", f"writer{i}")
        git(root, "config", "user.email", f"w{i}@example.invalid")


def _stale_clone_brings_it_back(tmp_path, hooks_on_b: bool = False):
    """a writes three turns (the last one the secret) and pushes; b clones; a forgets the secret and
    pushes; b, which has not pulled, appends to the same day and pulls with plain git: the union
    merge keeps the forgotten line (b appended right after it). Returns (a, b, remote, forgotten id)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    a = make_store(tmp_path / "a").root
    git(a, "remote", "add", "origin", str(remote))
    for i, text in enumerate(("we fly on Friday", "the hotel is by the river", SECRET)):
        ct("-C", a, "add", text, "--ts", f"2026-11-30T10:0{i}:00Z")
    ct("-C", a, "sync", "--set-upstream", "origin")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(b))
    _identity(a, b)
    if hooks_on_b:
        ct("-C", b, "hooks", "install")
    rid = next(i for i, rec in _records(a).items() if rec["text"] == SECRET)
    ct("-C", a, "forget", rid)
    ct("-C", a, "sync")
    ct("-C", b, "add", "b writes later that day", "--ts", "2026-11-30T11:00:00Z")
    return a, b, remote, rid


def _records(root) -> dict[str, dict]:
    out = {}
    for path in sorted(Path(root, "log").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            out[rec["id"]] = rec
    return out


def _holds_secret(root) -> bool:
    return any(
        SECRET in p.read_text(errors="replace")
        for p in Path(root).rglob("*.jsonl")
        if ".git" not in p.parts
    )


def test_fsck_exits_1_while_a_plain_pull_brought_a_forgotten_line_back_and_repair_removes_it(
    tmp_path,
):
    a, b, _remote, rid = _stale_clone_brings_it_back(tmp_path)
    git(b, "pull", "-q", "--no-rebase")
    assert _holds_secret(b), "the flow did not bring the line back (union merge)"
    out = ct("-C", b, "fsck", check=False)
    assert out.returncode == 1, out.stdout
    assert rid in out.stdout and "fsck --repair" in out.stdout
    fixed = ct("-C", b, "fsck", "--repair")
    assert "Removed again what a git merge brought back" in fixed.stdout
    assert not _holds_secret(b)
    assert ct("-C", b, "fsck").returncode == 0
    assert git(b, "status", "--porcelain").stdout == ""
    assert set(committed_ids(b)) == set(_records(a)) | {i for i in _records(b)}


def test_the_post_merge_hook_removes_what_a_plain_pull_brought_back(tmp_path):
    _a, b, _remote, rid = _stale_clone_brings_it_back(tmp_path, hooks_on_b=True)
    proc = git(b, "pull", "-q", "--no-rebase")
    assert not _holds_secret(b), "the post-merge hook did not remove the forgotten line"
    assert "forgotten on another clone" in git(b, "log", "-1", "--format=%s").stdout
    assert "removed what the merge brought back" in proc.stderr
    assert ct("-C", b, "fsck").returncode == 0
    assert git(b, "status", "--porcelain").stdout == ""
    assert rid not in committed_ids(b)


def test_the_pre_push_hook_refuses_to_carry_a_forgotten_line_to_the_remote(tmp_path):
    _a, b, remote, rid = _stale_clone_brings_it_back(tmp_path)
    git(b, "pull", "-q", "--no-rebase")  # no hooks yet: the line is back
    ct("-C", b, "hooks", "install")
    proc = git(b, "push", "-q", check=False)
    assert proc.returncode != 0
    assert "push refused" in proc.stderr and rid in proc.stderr and "ct sync" in proc.stderr
    assert SECRET not in git(remote, "show", "main:log/2026/2026-11-30.jsonl").stdout
    ct("-C", b, "fsck", "--repair")
    git(b, "push", "-q")
    assert SECRET not in git(remote, "show", "main:log/2026/2026-11-30.jsonl").stdout


def test_a_guarded_bare_remote_refuses_forgotten_lines_conflict_markers_and_unreadable_files_only(
    tmp_path,
):
    _a, b, remote, rid = _stale_clone_brings_it_back(tmp_path)
    out = ct("-C", remote, "hooks", "install")
    assert "pre-receive" in out.stdout and (remote / "hooks" / "pre-receive").exists()
    git(b, "pull", "-q", "--no-rebase")
    proc = git(b, "push", check=False)
    assert proc.returncode != 0 and "pre-receive" in proc.stderr and rid in proc.stderr
    assert SECRET not in git(remote, "show", "main:log/2026/2026-11-30.jsonl").stdout
    ct("-C", b, "fsck", "--repair")
    git(b, "push", "-q")  # whole again: accepted

    log = b / "log" / "2026" / "2026-11-30.jsonl"
    good = log.read_text()
    for bad, why in (
        (good + "<<<<<<< HEAD\n", "conflict marker"),
        (good + '{"half a record\n', "not a record memstore can read"),
    ):
        log.write_text(bad)
        git(b, "commit", "-qam", "a plain-git edit")
        proc = git(b, "push", check=False)
        assert proc.returncode != 0 and why in proc.stderr, proc.stderr
        git(b, "reset", "-q", "--hard", "HEAD~1")
    (b / "notes.txt").write_text("<<<<<<< not memstore's file\n")
    git(b, "add", "notes.txt")
    git(b, "commit", "-qm", "a file of the user's own")
    git(b, "push", "-q")  # the guard refuses nothing else
    ct("-C", b, "add", "an ordinary write", "--ts", "2026-11-30T12:00:00Z")
    git(b, "push", "-q")


def test_a_guard_that_cannot_run_refuses_and_says_why(tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    ct("-C", remote, "hooks", "install")
    a = make_store(tmp_path / "a").root
    _identity(a)
    git(a, "remote", "add", "origin", str(remote))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        ["git", "-C", str(a), "push", "-q", "origin", "main"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode != 0 and "neither memstore nor ct" in proc.stderr


def test_the_remote_guard_keeps_a_pre_receive_hook_that_was_there(tmp_path):
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    seen = tmp_path / "seen"
    hook = remote / "hooks" / "pre-receive"
    hook.write_text(f'#!/bin/sh\ncat > "{seen}"\n')
    hook.chmod(0o755)
    ct("-C", remote, "hooks", "install")
    a = make_store(tmp_path / "a").root
    _identity(a)
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "origin", "main")
    assert (
        seen.read_text().split()[2] == "refs/heads/main"
    )  # the old hook ran, with the refs on stdin
