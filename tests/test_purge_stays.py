"""A purge stays purged (issue 26, A4): after `ct forget --purge-history` and the force push, a
stale clone's plain `git pull` merges the old history back, but its `ct sync` refuses to push it
and names `ct sync --drop-purged`, which moves it onto the rewritten history keeping its own
records; its fsck names the purged commit; and no object of any clone (reflogs included) nor
the remote's history holds the text afterwards."""

from __future__ import annotations

import json
import subprocess

from conftest import ct
from disk_scan import copies
from test_forget import TEXT, WORDS, git, in_history, three_clones  # noqa: F401 (a fixture)


def objects_with_text(root, text=TEXT) -> int:
    """How many objects of the repository (every one, reachable or not) hold the text."""
    out = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    return sum(
        1 for chunk in out.split(b"\n") if text.encode() in chunk or text[:40].encode() in chunk
    )


def reachable_objects_with_text(root, text=TEXT) -> int:
    ids = subprocess.run(
        ["git", "-C", str(root), "rev-list", "--objects", "--all"], capture_output=True, text=True
    )
    names = "".join(line.split()[0] + "\n" for line in ids.stdout.splitlines())
    out = subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch"],
        input=names.encode(),
        capture_output=True,
        check=True,
    ).stdout
    return out.count(text.encode()) + out.count(text[:40].encode())


def purge_and_publish(a):
    rid = ct("-C", a, "forget", "--match", WORDS, "-n").stdout.split()[2]
    ct("-C", a, "forget", "--purge-history", rid)
    git(a, "push", "-q", "--force", "origin", "main")
    return rid


def test_a_stale_clone_s_plain_pull_cannot_push_a_purge_back(three_clones):
    origin, a, b, c = three_clones
    rid = purge_and_publish(a)
    assert not in_history(origin) and reachable_objects_with_text(origin) == 0

    ct("-C", c, "add", "--session", "c-only", "A note the stale desktop never pushed about kites")
    git(
        c, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main"
    )  # plain git: the old history stays in
    assert in_history(c)
    rep = json.loads(ct("-C", c, "fsck", "--json", check=False).stdout)
    assert not rep["ok"] and any(rid in d for d in rep["damage"]), (
        rep
    )  # the merge brought its line back too
    said = "\n".join(rep["warnings"])
    assert "of the old history that ct forget --purge-history rewrote" in said, said
    assert '"ct sync --drop-purged"' in said and f"ct forget --purge-history {rid}" in said, said

    refused = ct("-C", c, "sync", check=False)
    assert refused.returncode == 1 and "sync --drop-purged" in refused.stderr, refused.stderr
    assert reachable_objects_with_text(origin) == 0, "nothing of the old history was pushed"

    ct("-C", c, "sync", "--drop-purged")
    assert objects_with_text(c) == 0, (
        "no object of the clone keeps the text (reflog expired, pruned)"
    )
    assert copies([c / ".memstore"], TEXT, ("boathouse",)) == []
    assert "kites" in ct("-C", c, "search", "stale desktop kites").stdout, (
        "its own unpushed record kept"
    )
    assert json.loads(ct("-C", c, "fsck", "--json").stdout)["ok"]
    ct("-C", a, "sync")
    assert "kites" in ct("-C", a, "search", "kites").stdout and not in_history(a)
    # every clone learnt the purged commits from the committed file, which holds ids, never text
    record = [json.loads(x) for x in (c / "purged-history.jsonl").read_text().splitlines()]
    assert record[0]["ids"] == [rid] and record[0]["commits"] and record[0]["tips"]
    assert "boathouse" not in (c / "purged-history.jsonl").read_text()


def test_sync_onto_a_rewritten_remote_leaves_no_object_with_the_text(three_clones):
    """The advice used to be "git gc --prune=now", which keeps what the reflog still names."""
    origin, a, b, c = three_clones
    purge_and_publish(a)
    assert objects_with_text(b) > 0
    res = ct("-C", b, "sync")
    assert objects_with_text(b) == 0 and not in_history(b)
    assert "rewritten" in res.stderr and "pruned" in res.stderr
    assert objects_with_text(a) == 0


def test_a_guarded_remote_refuses_a_stale_clone_s_plain_push_of_the_purged_history(three_clones):
    """With `ct -C REMOTE.git hooks install`, even plain git cannot publish a purge back: a stale
    clone's `git pull` + `git push`, or its `git push --force`, is refused by the remote's guard."""
    origin, a, b, c = three_clones
    ct("-C", origin, "hooks", "install")
    purge_and_publish(a)  # the purging clone's force push passes: its tip holds no purged commit
    assert reachable_objects_with_text(origin) == 0
    ct(
        "-C", c, "hooks", "uninstall"
    )  # a clone without memstore's hooks: only the remote stands in the way
    ct("-C", c, "add", "--session", "c-only", "A note the stale desktop never pushed about kites")
    forced = git_proc(c, "push", "--force", "origin", "main")
    assert forced.returncode != 0 and "--purge-history rewrote" in forced.stderr, forced.stderr
    git(c, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    pushed = git_proc(c, "push", "origin", "main")
    assert pushed.returncode != 0 and "sync --drop-purged" in pushed.stderr, pushed.stderr
    assert reachable_objects_with_text(origin) == 0, (
        "the remote's history never holds the text again"
    )
    ct("-C", c, "sync", "--drop-purged")
    assert "kites" in ct("-C", a, "sync").stderr + ct("-C", a, "search", "kites").stdout


def git_proc(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)


def test_a_sync_killed_after_its_fetch_still_follows_the_rewrite_next_time(
    three_clones, monkeypatch
):
    """The fetch moves the remote-tracking ref before the sync sees the rewrite; a sync that died
    there left the next one comparing the remote with itself: it never followed, and the clone
    kept the purged text. The tip it last merged is kept in its git folder until it is done."""
    import pytest

    from memstore.errors import MemstoreError
    from memstore.forget import purge
    from memstore.store import Store

    origin, a, b, c = three_clones
    purge_and_publish(a)

    def died(*_a, **_k):
        raise MemstoreError("killed")

    with monkeypatch.context() as m:
        m.setattr(purge, "follow_rewritten_remote", died)
        with pytest.raises(MemstoreError):
            Store(b).sync()
    assert (b / ".git" / "memstore-sync-from").is_file()
    res = ct("-C", b, "sync")
    assert "rewritten" in res.stderr and objects_with_text(b) == 0 and not in_history(b)
    assert not (b / ".git" / "memstore-sync-from").exists()
