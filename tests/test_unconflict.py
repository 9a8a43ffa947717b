"""Conflict markers a person's merge committed into a line file (a day log merged with another
driver, or resolved by hand and committed as it stood) are removed by `ct sync` and `ct fsck
--repair`, as the push guard's refusal says; sync pushes nothing its guard would refuse; and a
plain `git pull` of another clone's re-embed is re-embedded by the next `ct sync` before it
pushes (memstore/upkeep/unconflict.py, memstore/upkeep/sync.py). Also what fsck and sync say
when a pull changed the timezone or --set-upstream was given a path."""

from __future__ import annotations

import json

from conftest import ct, git_clean
from test_sync import clones, git  # noqa: F401 (the fixture)

DAY = "2026-11-30"
LOG = f"log/2026/{DAY}.jsonl"


def _texts(root, rev="HEAD") -> list[str]:
    out = git(root, "show", f"{rev}:{LOG}").stdout
    return [json.loads(line)["text"] for line in out.splitlines()]


def _mark_conflict(root) -> list[str]:
    """Commit the day log as a hand-resolved merge would leave it: markers around the last line."""
    path = root / LOG
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(
        "".join(lines[:-1])
        + "<<<<<<< HEAD\n"
        + lines[-1]
        + "||||||| merged common ancestors\n=======\n>>>>>>> origin/main\n"
    )
    git(root, "commit", "-qam", "Merge by hand", "--no-verify")
    return [json.loads(x)["text"] for x in lines]


def test_without_markers_keeps_both_sides_and_drops_a_diff3_base():
    from memstore.upkeep.unconflict import without_markers

    data = b"a\n<<<<<<< HEAD\nours\n||||||| base\nold\n=======\ntheirs\n>>>>>>> other\nz\n"
    assert without_markers(data) == b"a\nours\ntheirs\nz\n"
    assert without_markers(b"=======x\n<<<<<<<<\n") == b"=======x\n<<<<<<<<\n"  # no markers


def _two_turns_marked(b) -> list[str]:
    """b (a plain clone) given an identity and two turns of DAY, then its day log committed with
    conflict markers; the texts, in order."""
    git(b, "config", "user.name", "b")
    git(b, "config", "user.email", "b@example.invalid")
    ct("-C", b, "add", "b's first turn", "--ts", f"{DAY}T09:00:00Z")
    ct("-C", b, "add", "b's second turn", "--ts", f"{DAY}T10:00:00Z")
    return _mark_conflict(b)


def test_sync_removes_committed_markers_and_pushes_a_clean_log(clones):
    a, b, remote = clones
    texts = _two_turns_marked(b)
    ct("-C", b, "hooks", "install")
    refused = git(b, "push", check=False)  # the pre-push hook names the marker
    assert refused.returncode != 0 and "conflict marker" in refused.stderr
    out = ct("-C", b, "sync")
    assert "removed the git conflict markers a merge left in " + LOG in out.stderr, out.stderr
    assert _texts(remote, "main") == texts and git_clean(b)
    ct("-C", a, "sync")
    assert _texts(a) == texts
    assert json.loads(ct("-C", a, "fsck", "--json").stdout)["ok"]


def test_fsck_repair_removes_committed_markers(clones):
    _a, b, _remote = clones
    texts = _two_turns_marked(b)
    assert ct("-C", b, "fsck", check=False).returncode != 0
    out = ct("-C", b, "fsck", "--repair")
    assert "Removed the git conflict markers a merge left in " + LOG in out.stdout + out.stderr
    assert _texts(b) == texts and git_clean(b)
    assert json.loads(ct("-C", b, "fsck", "--json").stdout)["ok"]


def test_sync_pushes_nothing_its_guard_would_refuse(clones):
    """A committed line memstore cannot read (not a conflict marker: nothing can say what it
    should be) stops the push: the remote and every other clone never get it."""
    _a, b, remote = clones
    git(b, "config", "user.name", "b")
    git(b, "config", "user.email", "b@example.invalid")
    ct("-C", b, "add", "one", "--ts", f"{DAY}T09:00:00Z")
    with open(b / LOG, "a") as f:
        f.write("not a record\n")
    git(b, "commit", "-qam", "a damaged line", "--no-verify")
    before = git(remote, "rev-parse", "main").stdout
    out = ct("-C", b, "sync", check=False)
    assert out.returncode != 0 and "Not pushing to 'origin'" in out.stderr, out.stderr
    assert f"{LOG}:2: not a record memstore can read" in out.stderr
    assert git(remote, "rev-parse", "main").stdout == before


def test_sync_re_embeds_what_a_plain_pull_of_a_re_embed_left(clones):
    a, b, remote = clones
    git(b, "config", "user.name", "b")
    git(b, "config", "user.email", "b@example.invalid")
    ct("-C", a, "reembed", "--dim", "64")
    ct("-C", a, "sync")
    ct("-C", b, "add", "b wrote with the old size", "--ts", f"{DAY}T09:00:00Z")
    git(b, "pull", "-q", "--no-rebase", "--no-edit")  # the merge is git's, not ct's
    out = ct("-C", b, "sync")
    assert "re-embedded 1 records" in out.stderr, out.stderr
    assert json.loads(ct("-C", b, "fsck", "--json").stdout)["ok"]
    ct("-C", a, "sync")
    assert json.loads(ct("-C", a, "fsck", "--json").stdout)["ok"]


def test_fsck_names_a_timezone_changed_by_a_pull_instead_of_a_moved_file(clones):
    """Another clone changes memstore.toml's timezone; after a plain pull every older record is
    off its file's day in the new zone. fsck used to say the file was moved ("git mv it back");
    it names the change, the commit and its author, and what to put back."""
    a, b, _remote = clones
    git(b, "config", "user.name", "b")
    git(b, "config", "user.email", "b@example.invalid")
    ct("-C", a, "add", "late in the UTC day", "--ts", f"{DAY}T23:30:00Z")
    ct("-C", a, "sync")
    toml = a / "memstore.toml"
    toml.write_text(toml.read_text().replace('timezone = "UTC"', 'timezone = "Pacific/Kiritimati"'))
    git(a, "-c", "user.name=alice", "-c", "user.email=a@x", "commit", "-qam", "tz")
    git(a, "push", "-q", "--no-verify")
    git(b, "pull", "-q", "--no-rebase", "--no-edit")
    damage = json.loads(ct("-C", b, "fsck", "--json", check=False).stdout)["damage"]
    assert damage and all("which memstore.toml named until commit" in d for d in damage), damage
    assert "(alice) changed it" in damage[0] and 'put timezone = "UTC" back' in damage[0]
    assert not any("git mv" in d for d in damage)


def test_set_upstream_given_a_path_says_to_name_a_remote(tmp_path):
    """`ct sync --set-upstream /path/r.git` printed `git remote add /path/r.git URL`: the hint now
    adds the path as "origin" and says --set-upstream takes a remote's name."""
    from conftest import make_store

    st = make_store(tmp_path / "s")
    out = ct("-C", st.root, "sync", "--set-upstream", str(tmp_path / "r.git"), check=False)
    assert out.returncode != 0 and "takes a remote's name" in out.stderr, out.stderr
    assert f"remote add origin {tmp_path / 'r.git'}" in out.stderr
    assert "--set-upstream origin" in out.stderr
