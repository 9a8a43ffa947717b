"""Merges that need nothing but git: plain clones (no `ct hooks install`, no merge driver) pulled with
merge and with rebase, the data-loss sequence of issue 12, a `cp -r` copy, and ct refusing to write
while git waits in the middle of a merge or rebase."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from conftest import committed_ids, ct, git_clean, make_store
from memstore.format import tree as treefmt
from tree_scenarios import DISTRACTORS, THESEUS, branchy, converse

ID = ["-c", "user.name=tester", "-c", "user.email=tester@example.org"]  # CI has no global identity


def git(root, *args, check=True):
    proc = subprocess.run(["git", *ID, "-C", str(root), *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def add(root, text, ts) -> str:
    return json.loads(ct("-C", root, "add", text, "--ts", ts, "--json").stdout)["ids"][0]


def no_hooks(root) -> bool:
    hooks = root / ".git" / "hooks"
    return not any(
        (hooks / n).exists() for n in ("post-merge", "post-commit", "post-checkout", "post-rewrite")
    )


@pytest.fixture
def plain_clones(tmp_path):
    """(b, c, remote): two plain `git clone`s of a store with a topic tree; no ct command has touched git there."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    origin = branchy(make_store(tmp_path / "origin"))
    converse(
        origin, [x for pair in zip(THESEUS, DISTRACTORS) for x in pair], start="2026-11-01T09:00:00"
    )
    git(origin.root, "remote", "add", "origin", str(remote))
    git(origin.root, "push", "-q", "-u", "origin", "main")
    b, c = tmp_path / "b", tmp_path / "c"
    git(tmp_path, "clone", "-q", str(remote), str(b))
    git(tmp_path, "clone", "-q", str(remote), str(c))
    assert no_hooks(b) and no_hooks(c)
    for root in (b, c):
        assert "memstore-tree" not in git(root, "config", "--list").stdout
    return b, c, remote


def assert_converged(*roots) -> None:
    heads = {git(r, "rev-parse", "HEAD").stdout for r in roots}
    assert len(heads) == 1, "clones did not converge"
    trees = []
    for root in roots:
        ids = committed_ids(root)
        assert max(ids.values()) == 1, f"{root}: duplicated {[i for i, n in ids.items() if n > 1]}"
        fs = ct("-C", root, "fsck", "--json", check=False)
        rep = json.loads(fs.stdout)
        assert fs.returncode == 0 and rep["ok"] and rep["warnings"] == [], rep
        assert git_clean(root)
        tree = treefmt.read(root)
        placed = set(tree.topic_of()) | set(tree.archived)
        conversation = {i for i in ids if not i.startswith("doc:")}
        assert conversation <= placed, (
            f"{root}: not in the tree: {sorted(conversation - placed)[:5]}"
        )
        trees.append(tree.dumps())
    assert len(set(trees)) == 1, "the replayed trees differ"


def test_two_plain_clones_merge_and_rebase_after_a_reorganize(plain_clones):
    b, c, _ = plain_clones
    # Same day, same topic on both sides: both continue the conversation the clone holds.
    mine = {
        add(
            b,
            f"Ship of Theseus again: plank {k} is replaced on clone b.",
            f"2026-11-02T10:0{k}:00Z",
        )
        for k in range(3)
    }
    theirs = {
        add(
            c,
            f"Ship of Theseus again: plank {k} is replaced on clone c.",
            f"2026-11-02T10:0{k}:30Z",
        )
        for k in range(3)
    }
    before = treefmt.read(b)
    out = json.loads(ct("-C", b, "reorganize", "--threshold", "0.3", "--offline", "--json").stdout)
    assert out["merges"], out
    gone = set(treefmt.read(b).gone) - set(before.gone)
    assert gone
    # Both clones consolidate the same day's packs (each its own writes) before they merge.
    for root in (b, c):
        gc = json.loads(ct("-C", root, "gc", "--json").stdout)
        assert "2026-11-02" in gc["days"] and gc["commit"], gc
    git(b, "push", "-q", "origin", "main")
    pull = git(c, "pull", "--no-rebase", "--no-edit", "origin", "main")  # a real merge commit
    assert "CONFLICT" not in pull.stdout + pull.stderr
    assert len(git(c, "rev-list", "--parents", "-n1", "HEAD").stdout.split()) == 3
    assert gone <= set(treefmt.read(c).gone)  # b's merges hold in c
    theirs.add(
        add(
            c,
            "Ship of Theseus: and the old planks make a second ship on c.",
            "2026-11-02T11:00:00Z",
        )
    )
    git(c, "push", "-q", "origin", "main")
    mine.add(
        add(
            b,
            "Ship of Theseus: on b the form matters more than the planks.",
            "2026-11-02T11:05:00Z",
        )
    )
    pull = git(b, "pull", "--rebase", "origin", "main")  # b's commit replayed on top
    assert "CONFLICT" not in pull.stdout + pull.stderr
    assert not (b / ".git" / "rebase-merge").exists() and not (b / ".git" / "rebase-apply").exists()
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    assert_converged(b, c)
    for root in (b, c):
        ids = committed_ids(root)
        assert mine | theirs <= set(ids)
        for text in (
            "plank 2 is replaced on clone b",
            "plank 1 is replaced on clone c",
            "second ship on c",
            "form matters more",
        ):
            hits = json.loads(ct("-C", root, "search", text, "--mode", "exact", "--json").stdout)[
                "hits"
            ]
            assert any(text in h["text"] for h in hits), (root, text)
    # `ct diff` explains the reorganize commit from the ops at each revision.
    sha = git(b, "log", "--format=%H", "--grep", "^Reorganize topics").stdout.split()[0]
    diff = ct("-C", b, "diff", f"{sha}~1", sha).stdout
    assert diff.count("\n  merged ") == len(out["merges"])


def test_the_data_loss_sequence_loses_nothing(plain_clones):
    """Issue 12's Why: pull --no-rebase with same-day writes on both sides, then ct add, fsck --repair, commit."""
    b, c, _ = plain_clones
    theirs = {add(b, f"written on b {k}", f"2026-11-30T09:0{k}:00Z") for k in range(2)}
    git(b, "push", "-q", "origin", "main")
    mine = {add(c, f"written on c {k}", f"2026-11-30T09:0{k}:30Z") for k in range(2)}
    pull = git(c, "pull", "--no-rebase", "--no-edit", "origin", "main")
    assert "CONFLICT" not in pull.stdout + pull.stderr
    mine.add(add(c, "written on c after the pull", "2026-11-30T10:00:00Z"))
    rep = json.loads(ct("-C", c, "fsck", "--repair", "--json").stdout)
    assert rep["ok"], rep
    commit = git(c, "commit", "--no-edit", check=False)  # nothing left to commit: all is committed
    assert "nothing to commit" in commit.stdout + commit.stderr
    assert theirs | mine <= set(committed_ids(c)) and git_clean(c)
    git(c, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert_converged(b, c)
    assert theirs | mine <= set(committed_ids(b))


def _conflict_in_a_file_of_the_users(b, c, rebase: bool):
    """Both clones write records and edit notes.txt differently: git stops mid-merge (or mid-rebase)."""
    (b / "notes.txt").write_text("base\n")
    git(b, "add", "notes.txt")
    git(b, "commit", "-q", "-m", "notes")
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    theirs = {add(b, "b's record before the conflict", "2026-11-30T09:00:00Z")}
    (b / "notes.txt").write_text("from b\n")
    git(b, "commit", "-q", "-am", "b notes")
    git(b, "push", "-q", "origin", "main")
    mine = {add(c, "c's record before the conflict", "2026-11-30T09:00:30Z")}
    (c / "notes.txt").write_text("from c\n")
    git(c, "commit", "-q", "-am", "c notes")
    pull = git(
        c,
        "pull",
        "--rebase" if rebase else "--no-rebase",
        "--no-edit",
        "origin",
        "main",
        check=False,
    )
    assert pull.returncode != 0 and "CONFLICT (content): Merge conflict in notes.txt" in pull.stdout
    return theirs, mine


@pytest.mark.parametrize("rebase", [False, True], ids=["merge", "rebase"])
def test_ct_refuses_to_write_while_git_waits_and_nothing_is_lost(plain_clones, rebase):
    b, c, _ = plain_clones
    theirs, mine = _conflict_in_a_file_of_the_users(b, c, rebase)
    status_before = git(c, "status", "--porcelain").stdout
    finish = "git rebase --continue" if rebase else "git commit"
    for args in (
        ["add", "a write mid-merge", "--ts", "2026-11-30T11:00:00Z"],
        ["fsck", "--repair"],
        ["mark", "a marker mid-merge"],
        ["reorganize", "--offline"],
    ):
        proc = ct("-C", c, *args, check=False)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert (
            f"in the middle of a {'rebase' if rebase else 'merge'}" in proc.stderr
            and finish in proc.stderr
        )
        assert "Nothing was changed" in proc.stderr
    assert git(c, "status", "--porcelain").stdout == status_before  # not a byte touched
    # Reads go on, with a warning; b's record is already in the working files.
    proc = ct("-C", c, "search", "b's record before the conflict", "--mode", "exact", "--json")
    assert "in the middle of" in proc.stderr and json.loads(proc.stdout)["hits"]
    (c / "notes.txt").write_text("both\n")
    git(c, "add", "notes.txt")
    if rebase:
        git(c, "-c", "core.editor=true", "rebase", "--continue")
    else:
        git(c, "commit", "--no-edit")
    mine.add(add(c, "written after the merge", "2026-11-30T11:00:00Z"))
    assert theirs | mine <= set(committed_ids(c))
    git(c, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert_converged(b, c)


def test_fsck_repair_keeps_staged_records(plain_clones):
    """Records that are staged (git add) but not committed are a person's work: repair leaves them."""
    b, _, _ = plain_clones
    rid = add(b, "staged but not yet committed", "2026-11-30T09:00:00Z")
    git(b, "reset", "-q", "--soft", "HEAD~1")
    staged = git(b, "diff", "--cached", "--name-only").stdout.split()
    assert any(p.startswith("log/") for p in staged) and any(p.startswith("tree/") for p in staged)
    rep = json.loads(ct("-C", b, "fsck", "--repair", "--json", check=False).stdout)
    assert git(b, "diff", "--cached", "--name-only").stdout.split() == staged, rep
    assert rid in (b / "log/2026/2026-11-30.jsonl").read_text()
    git(b, "commit", "-q", "-m", "commit the staged record")
    assert rid in committed_ids(b) and ct("-C", b, "fsck").returncode == 0 and git_clean(b)


def test_a_cp_r_copy_and_its_original_push_to_one_remote(plain_clones, tmp_path):
    b, c, _ = plain_clones
    add(b, "before the copy", "2026-11-30T08:00:00Z")
    copy = tmp_path / "usb" / "b"
    copy.parent.mkdir()
    subprocess.run(["cp", "-r", str(b), str(copy)], check=True)
    ids = {
        add(b, "written on the original", "2026-11-30T09:00:00Z"),
        add(copy, "written on the copy", "2026-11-30T09:00:00Z"),
    }
    git(b, "push", "-q", "origin", "main")
    pull = git(copy, "pull", "--no-rebase", "--no-edit", "origin", "main")
    assert "CONFLICT" not in pull.stdout + pull.stderr
    git(copy, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    assert_converged(b, copy, c)
    assert ids <= set(committed_ids(c))


def test_a_big_store_tunes_its_git_index_and_plain_git_still_syncs(plain_clones, monkeypatch):
    """Past MEMSTORE_INDEX_TUNE_BYTES (1 MB by default; 0 here) a write switches .git/index to format 4
    and a split index; plain git on both clones keeps working and the clones converge."""
    b, c, _ = plain_clones
    monkeypatch.setenv("MEMSTORE_INDEX_TUNE_BYTES", "0")
    ids = {add(b, "written on the tuned clone", "2026-11-30T08:00:00Z")}
    config = git(b, "config", "--list", "--local").stdout.lower()
    assert "core.splitindex=true" in config and "index.version=4" in config
    assert (b / ".git" / "index").read_bytes()[4:8] == (4).to_bytes(4, "big")
    assert list((b / ".git").glob("sharedindex.*")) and git_clean(b)
    ids.add(add(b, "a second write on the tuned index", "2026-11-30T08:30:00Z"))
    monkeypatch.delenv("MEMSTORE_INDEX_TUNE_BYTES")
    ids.add(add(c, "written on the other clone", "2026-11-30T09:00:00Z"))
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--rebase", "origin", "main")
    git(c, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert_converged(b, c)
    assert ids <= set(committed_ids(b))
    assert (
        "splitindex" not in git(c, "config", "--list", "--local").stdout.lower()
    )  # a small store keeps git's defaults


def test_a_store_has_no_merge_driver_and_union_attributes(tmp_path):
    from memstore.format.layout import GITATTRIBUTES

    st = make_store(tmp_path / "s")
    attrs = (st.root / ".gitattributes").read_text()
    assert attrs == GITATTRIBUTES and "merge=memstore" not in attrs
    for pattern in (
        "log/**/*.jsonl merge=union",
        "tree/**/*.jsonl merge=union",
        "markers.jsonl merge=union",
        "forgotten.jsonl merge=union",
        "*.is binary",
    ):
        assert pattern in attrs.splitlines()
    assert "merge.memstore" not in git(st.root, "config", "--list").stdout
    assert "merge-tree" not in ct("--help").stdout


def test_hooks_find_memstore_on_path_or_do_nothing(tmp_path, monkeypatch):
    from memstore.upkeep import hooks

    st = make_store(tmp_path / "s")
    stub = (st.root / ".git" / "hooks" / "post-merge").read_text()
    assert "/python" not in stub and "memstore hook post-merge" in stub
    assert set(hooks.status(st).values()) == {"installed"}  # memstore is on this PATH
    empty = tmp_path / "empty"  # a PATH with git but neither memstore, ct nor python3
    empty.mkdir()
    (empty / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(empty))
    assert set(hooks.status(st).values()) == {
        hooks.INACTIVE
    }  # never "installed" when it cannot run
    proc = subprocess.run(
        ["/bin/sh", str(st.root / ".git" / "hooks" / "post-merge"), "0"],
        cwd=st.root,
        capture_output=True,
        text=True,
        env={"PATH": str(empty)},
    )
    assert proc.returncode == 0 and proc.stdout == proc.stderr == ""
    old = st.root / ".git" / "hooks" / "post-commit"
    old.write_text(
        "#!/bin/sh\n# memstore hook (post-commit): old\n/some/venv/bin/python -m memstore hook post-commit\n"
    )
    assert hooks.status(st)["post-commit"].startswith("outdated")


def test_writes_commit_on_packed_refs_a_linked_worktree_and_a_detached_head(tmp_path):
    """HEAD is read from git's ref files (loose, packed, a worktree's own HEAD) and the commit is made
    with git's plumbing: each layout gets its commit, its reflog entry and a clean status."""
    store = make_store(tmp_path / "s")
    root = store.root
    add(root, "first turn", "2026-11-30T08:00:00Z")
    git(root, "pack-refs", "--all")
    assert not (root / ".git" / "refs" / "heads" / "main").exists()
    add(root, "after pack-refs", "2026-11-30T08:05:00Z")
    git(root, "worktree", "add", "-q", str(tmp_path / "wt"))
    add(tmp_path / "wt", "in a linked worktree", "2026-11-30T08:10:00Z")
    git(root, "checkout", "-q", "--detach")
    quiet_read = ct("-C", root, "search", "turn")
    assert "detached" not in quiet_read.stderr  # only a commit made on it is worth a warning
    on_detached = ct("-C", root, "add", "on a detached head", "--ts", "2026-11-30T08:15:00Z")
    sha = git(root, "rev-parse", "HEAD").stdout.strip()
    assert f"HEAD is detached, so commit {sha[:10]} is on no branch" in on_detached.stderr
    assert '"git switch -c NAME"' in on_detached.stderr
    subjects = git(root, "log", "--format=%s").stdout.splitlines()
    assert subjects[:2] == ["Add user turn: on a detached head", "Add user turn: after pack-refs"]
    assert (
        git(tmp_path / "wt", "log", "-1", "--format=%s").stdout.strip()
        == "Add user turn: in a linked worktree"
    )
    assert "commit: Add user turn: on a detached head" in git(root, "reflog", "-1").stdout
    for r in (root, tmp_path / "wt"):
        assert git_clean(r)
        assert json.loads(ct("-C", r, "fsck", "--json").stdout)["ok"]


def test_a_cherry_pick_then_a_merge_of_its_branch_keeps_one_record(plain_clones):
    """git merges a line appended by a cherry-picked commit twice (union) when the original branch
    is merged later: the day log holds two identical lines. Nothing is lost, the record counts once
    in search, and fsck says what happened instead of only "also at"."""
    b, c, _ = plain_clones
    git(c, "checkout", "-q", "-b", "side")
    rid = add(c, "the boiler service is booked for the ninth", "2026-11-20T09:00:00Z")
    add(c, "and the plumber comes on the tenth", "2026-11-20T09:05:00Z")
    add(b, "a note written on main first", "2026-11-20T08:00:00Z")
    git(b, "fetch", "-q", str(c), "side")
    git(b, "cherry-pick", "FETCH_HEAD~1")  # the line lands after main's note, not where side has it
    git(b, "merge", "-q", "--no-edit", "FETCH_HEAD")
    assert committed_ids(b)[rid] == 2, "git kept both copies of the line"
    hits = json.loads(ct("-C", b, "search", "boiler service booked", "--json", "-k", "5").stdout)[
        "hits"
    ]
    assert [h["id"] for h in hits].count(rid) == 1
    rep = json.loads(ct("-C", b, "fsck", "--json", check=False).stdout)
    assert rep["ok"], rep
    [warning] = rep["warnings"]
    assert "an identical copy of the record at" in warning and "counts once" in warning, warning
    assert '"ct gc" drops it' in warning
    log_before = {p: p.read_bytes() for p in (b / "log").rglob("*.jsonl")}
    preview = ct("-C", b, "gc", "-n")
    assert "would drop 1 identical copy of record lines" in preview.stdout and git_clean(b)
    assert {p: p.read_bytes() for p in (b / "log").rglob("*.jsonl")} == log_before, (
        "a dry run changes nothing"
    )
    done = json.loads(ct("-C", b, "gc", "--json").stdout)
    assert (
        done["duplicates"] == 1 and done["logs"] == ["log/2026/2026-11-20.jsonl"] and done["commit"]
    )
    assert committed_ids(b)[rid] == 1 and git_clean(b)
    rep = json.loads(ct("-C", b, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep
    hits = json.loads(ct("-C", b, "search", "boiler service booked", "--json", "-k", "5").stdout)[
        "hits"
    ]
    assert [h["id"] for h in hits].count(rid) == 1


def test_git_revert_of_an_older_write_of_the_day_is_named_and_ct_forget_finishes_it(tmp_path):
    """`git revert` of a day's newest write undoes it cleanly. Of an older one, git deletes the
    write's pack but keeps its log line (the later lines follow it, and the log merges by union):
    fsck names the revert commit and both ways out, a read warns, `ct forget` finishes the undo,
    and restoring the pack from before the revert keeps the record instead."""
    root = make_store(tmp_path / "s").root
    first = add(root, "the harvest starts with the apples", "2026-11-30T08:00:00Z")
    middle = add(root, "then the cherries are picked", "2026-11-30T08:05:00Z")
    add(root, "the plums come last", "2026-11-30T08:10:00Z")
    newest = add(root, "a note about the tractor", "2026-11-30T08:15:00Z")

    git(root, "revert", "--no-edit", "HEAD")  # the newest write: no later line, a clean undo
    assert newest not in committed_ids(root)
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"]

    git(root, "revert", "--no-edit", "HEAD~3")  # the cherries, under the plums and the first revert
    revert = git(root, "rev-parse", "--short=10", "HEAD").stdout.strip()
    assert middle in committed_ids(root), "git kept the line"
    fs = ct("-C", root, "fsck", "--json", check=False)
    [damage] = json.loads(fs.stdout)["damage"]
    assert fs.returncode == 1 and middle in damage and f"commit {revert} (Revert " in damage
    assert "half done" in damage and f'"ct forget {middle}" finishes it' in damage
    found = ct("-C", root, "search", "cherries picked")
    assert f"record {middle}: no vector" in found.stderr and '"ct fsck"' in found.stderr

    keep = tmp_path / "keep"  # the other way out, on a copy: bring the vector back
    shutil.copytree(root, keep)
    restore = damage.split('"git checkout ')[1].split('"')[0]
    git(keep, "checkout", *restore.split())
    git(keep, "commit", "-q", "-m", "Bring back the cherries' vector")
    assert json.loads(ct("-C", keep, "fsck", "--json").stdout)["ok"]
    assert middle in [
        h["id"] for h in json.loads(ct("-C", keep, "search", "cherries", "--json").stdout)["hits"]
    ]

    ct("-C", root, "forget", middle)
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep
    assert middle not in committed_ids(root) and first in committed_ids(root)
    found = ct("-C", root, "search", "cherries picked", "--json")
    assert middle not in [h["id"] for h in json.loads(found.stdout)["hits"]] and found.stderr == ""
    assert git_clean(root)


def test_a_rebase_that_drops_an_older_write_is_named_by_fsck(tmp_path):
    """`git rebase -i` dropping a write that later lines of its day follow: the replayed appends
    bring its line back by union without its pack, and fsck says that no commit held its vector."""
    root = make_store(tmp_path / "s").root
    add(root, "the harvest starts with the apples", "2026-11-30T08:00:00Z")
    dropped = add(root, "then the cherries are picked", "2026-11-30T08:05:00Z")
    add(root, "the plums come last", "2026-11-30T08:10:00Z")
    proc = subprocess.run(
        ["git", *ID, "-C", str(root), "rebase", "-q", "-i", "HEAD~2"],
        env={**os.environ, "GIT_SEQUENCE_EDITOR": "sed -i 1s/^pick/drop/"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert dropped in committed_ids(root)
    [damage] = json.loads(ct("-C", root, "fsck", "--json", check=False).stdout)["damage"]
    assert (
        "no commit in this branch's history held its vector" in damage
        and f'"ct forget {dropped}"' in damage
    )
    ct("-C", root, "forget", dropped)
    assert json.loads(ct("-C", root, "fsck", "--json").stdout)["ok"]


def test_a_revert_git_stops_on_leaves_a_tree_entry_that_fsck_names_and_ct_forget_removes(tmp_path):
    """Reverting a write whose tree shard a later write appended to stops git on a conflict; kept
    as is, the tree names a record no day log holds. fsck warns with the command, and `ct forget`
    takes the id out of the tree (no tombstone: there is no text left) and remakes the names."""
    root = make_store(tmp_path / "s").root
    gone = add(root, "an old memory about sailing boats", "2026-11-20T10:00:00Z")
    add(root, "today we talked about sailing boats again", "2026-11-30T10:00:00Z")
    older = git(root, "log", "--format=%H", "-n1", "--skip=1").stdout.strip()
    stopped = git(root, "revert", "--no-edit", older, check=False)
    if stopped.returncode:  # the tree shard: a modify/delete conflict; keep the later write's lines
        git(root, "add", "-A", "tree")
        proc = subprocess.run(
            ["git", *ID, "-C", str(root), "revert", "--continue"],
            env={**os.environ, "GIT_EDITOR": "true"},
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
    assert gone not in committed_ids(root)
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    [warning] = [w for w in rep["warnings"] if gone in w]
    assert "which no day log holds" in warning and f'"ct forget {gone}"' in warning
    ct("-C", root, "forget", gone)
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep
    shards = "".join(p.read_text() for p in (root / "tree").rglob("*.jsonl"))
    assert gone not in shards and "old memory" not in shards
    assert not (root / "forgotten.jsonl").exists() and git_clean(root)


def test_a_shallow_clone_reads_writes_and_syncs(plain_clones, tmp_path):
    """`git clone --depth 1`: no history past one commit, and still a whole store. Search finds
    what the one commit holds, a write commits on top, fsck is clean, `ct log` shows what there is,
    and the shallow clone pushes to the remote and pulls from it."""
    b, _, remote = plain_clones
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{remote}", str(shallow))
    assert git(shallow, "rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    before = committed_ids(shallow)
    assert before and "Theseus" in ct("-C", shallow, "search", "ship of Theseus planks").stdout
    rid = add(shallow, "written in a shallow clone", "2026-11-21T09:00:00Z")
    assert json.loads(ct("-C", shallow, "fsck", "--json").stdout)["ok"]
    assert "written in a shallow clone" in ct("-C", shallow, "log").stdout
    git(shallow, "push", "-q", "origin", "HEAD:main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert committed_ids(b)[rid] == 1 and set(before) <= set(committed_ids(b))
    add(b, "written in the full clone", "2026-11-21T10:00:00Z")
    git(b, "push", "-q", "origin", "main")
    git(shallow, "pull", "-q", "--no-rebase", "origin", "main")
    assert (
        "written in the full clone"
        in ct("-C", shallow, "search", "written in the full clone").stdout
    )
    assert json.loads(ct("-C", shallow, "fsck", "--json").stdout)["ok"] and git_clean(shallow)
    head = git(shallow, "rev-parse", "HEAD").stdout
    for args in (["--purge-history", rid], ["--purge-history", "-n", rid]):
        refused = ct(
            "-C", shallow, "forget", *args, check=False
        )  # its force push would cut the remote's history
        assert (
            refused.returncode == 2
            and "is a shallow clone" in refused.stderr
            and "--unshallow" in refused.stderr
        )
    assert (
        git(shallow, "rev-parse", "HEAD").stdout == head and (shallow / ".git" / "shallow").exists()
    )
    assert (
        git_clean(shallow)
        and "written in a shallow clone" in ct("-C", shallow, "search", "shallow clone").stdout
    )


def test_a_copy_without_its_git_folder_is_read_and_says_how_to_write(tmp_path):
    """Files copied without `.git` (a backup, a sync tool that skips it): search answers, a write
    refuses with exit 8 naming the fix and changing nothing, and after `git init` + a commit of the
    files the store takes writes again."""
    src = make_store(tmp_path / "s").root
    add(src, "the greenhouse door sticks in wet weather", "2026-11-29T08:00:00Z")
    copy = tmp_path / "copy"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns(".git"))
    assert "greenhouse door" in ct("-C", copy, "search", "greenhouse door").stdout
    files = {
        p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and ".memstore" not in p.parts
    }
    refused = ct("-C", copy, "add", "a second note", check=False)
    assert refused.returncode == 8 and "is not a git repository" in refused.stderr
    assert "init -b main" in refused.stderr and "Nothing was changed" in refused.stderr
    assert {
        p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and ".memstore" not in p.parts
    } == files
    git(copy, "init", "-q", "-b", "main")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "Memory store")
    add(copy, "a second note", "2026-11-29T09:00:00Z")
    assert json.loads(ct("-C", copy, "fsck", "--json").stdout)["ok"] and git_clean(copy)


def test_a_clone_with_autocrlf_reads_writes_and_forgets(plain_clones, tmp_path):
    """`core.autocrlf=true` (git's default on Windows) checks the day logs out with CRLF line ends:
    search, a write (an LF line appended to a CRLF file), fsck, forget and `git status` still agree."""
    _, _, remote = plain_clones
    win = tmp_path / "win"
    git(tmp_path, "clone", "-q", "-c", "core.autocrlf=true", str(remote), str(win))
    logs = sorted((win / "log").rglob("*.jsonl"))
    assert logs and b"\r\n" in logs[0].read_bytes(), "checked out with CRLF"
    assert "Theseus" in ct("-C", win, "search", "ship of Theseus planks").stdout
    rid = add(win, "a note written on a CRLF checkout", logs[0].stem + "T23:00:00Z")
    assert json.loads(ct("-C", win, "fsck", "--json").stdout)["ok"] and git_clean(win)
    assert rid in [
        h["id"]
        for h in json.loads(ct("-C", win, "search", "CRLF checkout", "--json").stdout)["hits"]
    ]
    ct("-C", win, "forget", rid)
    rep = json.loads(ct("-C", win, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [] and rid not in committed_ids(win) and git_clean(win)


def test_a_write_after_git_reset_mixed_does_not_commit_the_undone_tree_lines(tmp_path):
    """`git reset --mixed HEAD~1` leaves the undone write's lines uncommitted, its tree lines in
    today's shard among them. A write to another day appends to that shard too, so it refuses
    (changing nothing) instead of committing a placement of a record no committed log holds; once
    the lines are rolled back (or committed), it writes, and fsck is clean."""
    store = make_store(tmp_path / "s")
    root = store.root
    add(root, "reset one", "2026-01-05T10:00:00Z")
    add(root, "reset two", "2026-01-05T11:00:00Z")
    git(root, "reset", "-q", "--mixed", "HEAD~1")
    head = git(root, "rev-parse", "HEAD").stdout
    refused = ct("-C", root, "add", "other day", "--ts", "2026-01-07T12:00:00Z", check=False)
    assert (
        refused.returncode == 1
        and "tree/" in refused.stderr
        and "has uncommitted changes" in refused.stderr
    )
    assert git(root, "rev-parse", "HEAD").stdout == head
    said = ct("-C", root, "fsck", "--repair").stdout
    assert (
        "Rolled back uncommitted changes (no write was running): 1 uncommitted records" in said
    ), said
    assert "uncommitted lines of the topic tree or markers" in said, (
        said
    )  # tree lines are not records
    add(root, "other day", "2026-01-07T12:00:00Z")
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [] and git_clean(root), rep


def test_a_sparse_checkout_reads_warns_and_refuses_writes(tmp_path):
    """A sparse checkout leaves some day logs and packs out: reads answer from what is here, fsck
    says up front that what it names missing may be outside the checkout, and every write (forget
    too, whose advice fsck prints) refuses with the command that checks the store out whole."""
    store = make_store(tmp_path / "s")
    root = store.root
    rid = add(root, "sparse one", "2026-01-05T10:00:00Z")
    add(root, "sparse two", "2026-01-06T10:00:00Z")
    git(
        root,
        "sparse-checkout",
        "set",
        "--no-cone",
        "/*",
        "!/log/2026/2026-01-05.jsonl",
        "!/packs/2026/2026-01-05/",
    )
    assert not (root / "log/2026/2026-01-05.jsonl").exists()
    assert "sparse two" in ct("-C", root, "search", "sparse").stdout
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["warnings"][0].startswith("this clone is a sparse checkout"), rep
    head = git(root, "rev-parse", "HEAD").stdout
    for args in (["add", "into the left-out day", "--ts", "2026-01-05T12:00:00Z"], ["forget", rid]):
        refused = ct("-C", root, *args, check=False)
        assert refused.returncode == 1 and "sparse-checkout disable" in refused.stderr, (
            refused.stderr
        )
    assert git(root, "rev-parse", "HEAD").stdout == head and git_clean(root)
    git(root, "sparse-checkout", "disable")
    add(root, "into the left-out day", "2026-01-05T12:00:00Z")
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [] and rep["records"] == 3, rep


def test_a_day_log_moved_with_git_mv_is_named_as_moved_not_as_lost(tmp_path):
    """`git mv` of a day log to another day's name: fsck says the records belong under their own day
    and to move the file back, rather than that their vectors were dropped (which would point at
    `ct forget`); moved back, the store is clean."""
    store = make_store(tmp_path / "s")
    root = store.root
    add(root, "moved one", "2026-01-05T10:00:00Z")
    git(root, "mv", "log/2026/2026-01-05.jsonl", "log/2026/2026-01-07.jsonl")
    git(root, "commit", "-qm", "mv")
    rep = json.loads(ct("-C", root, "fsck", "--json", check=False).stdout)
    said = "\n".join(rep["damage"] + rep["warnings"])
    assert "belong in log/2026/2026-01-05.jsonl" in said and '"git mv" it back' in said, said
    assert "ct forget" not in said, said
    git(root, "mv", "log/2026/2026-01-07.jsonl", "log/2026/2026-01-05.jsonl")
    git(root, "commit", "-qm", "back")
    rep = json.loads(ct("-C", root, "fsck", "--json").stdout)
    assert rep["ok"] and rep["warnings"] == [], rep
