"""Two clones that change an encrypted store's keys at once (memstore/upkeep/keyclash.py). Before,
the second clone's `ct sync` named the first one's honest lines as forged (each of them fails
under the other key), or stopped on a conflict in keys/ whose documented resolution stranded that
clone's records; now the remote's keys win, the clone writes its records again under them and
makes its change of readers again on top."""

from __future__ import annotations

import re
import subprocess

from test_encrypt import as_, git, new_identity, people  # noqa: F401 (fixtures)
from test_encrypt_planted_keys import first_turn

from memstore import keyring

DAY = "2026-11-30"


def _team(tmp_path, people):
    """(a, b, remote, dave, rd): alice's and bob's clones of a store sealed to alice, bob and dave."""
    alice, ra, bob, rb = people
    dave = tmp_path / "dave.key"
    rd = new_identity(dave)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    a = tmp_path / "a"
    as_(alice, tmp_path, "init", a, "--embedder", "hash", "--timezone", "UTC", "--encrypt",
        "--recipient", rb, "--recipient", rd)  # fmt: skip
    git(a, "remote", "add", "origin", str(remote))
    git(a, "push", "-q", "-u", "origin", "main")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(remote), str(b))
    first_turn(people, a, b, "first words", f"{DAY}T08:00:00Z")
    return a, b, remote, dave, rd


def _texts(who, root) -> str:
    return as_(who, root, "search", "--mode", "exact", "-k", "50", "words").stdout


def test_a_removal_and_a_rotation_at_once(tmp_path, people):
    alice, _ra, bob, _rb = people
    a, b, _remote, dave, rd = _team(tmp_path, people)
    as_(alice, a, "keys", "remove", rd)
    as_(alice, a, "add", "alice words after removing dave", "--ts", f"{DAY}T09:00:00Z")
    as_(bob, b, "keys", "rotate")
    as_(bob, b, "add", "bob words after his rotation", "--ts", f"{DAY}T09:30:00Z")
    as_(alice, a, "sync")
    out = as_(bob, b, "sync")
    said = out.stdout + out.stderr
    assert "changed the keys at once: the remote's keys were kept" in said, said
    as_(alice, a, "sync")
    for who, root in ((alice, a), (bob, b)):
        got = _texts(who, root)
        assert "alice words after removing dave" in got and "bob words after his rotation" in got
        assert as_(who, root, "fsck", check=False).returncode == 0
    # dave opens no epoch that holds bob's words
    newest = max(keyring.epoch_files(b))
    assert keyring.unwrap_epoch(
        b / "keys" / f"epoch-{newest:04d}.age", newest, keyring.load_identities(dave)
    ) is None  # fmt: skip
    assert (
        b"bob words"
        not in subprocess.run(
            ["git", "-C", str(b), "log", "-p", "--all"], capture_output=True, check=True
        ).stdout
    )  # no plain copy in any commit either


def test_an_addition_and_a_removal_at_once(tmp_path, people):
    """Bob adds erin while alice removes dave: bob's clone takes alice's keys, then adds erin
    again, so erin reads every epoch and dave none of the new ones."""
    alice, _ra, bob, _rb = people
    a, b, _remote, dave, rd = _team(tmp_path, people)
    erin = tmp_path / "erin.key"
    re_ = new_identity(erin)
    as_(alice, a, "keys", "remove", rd)
    as_(bob, b, "keys", "add", re_)
    as_(bob, b, "add", "bob words after adding erin", "--ts", f"{DAY}T09:30:00Z")
    as_(alice, a, "sync")
    out = as_(bob, b, "sync")
    assert re.search(r"added age1\w+ again", out.stdout + out.stderr), out.stdout + out.stderr
    erin_ids, dave_ids = keyring.load_identities(erin), keyring.load_identities(dave)
    for e, f in keyring.epoch_files(b).items():
        assert keyring.unwrap_epoch(f, e, erin_ids) is not None
    assert keyring.unwrap_epoch(b / "keys" / "epoch-0002.age", 2, dave_ids) is None
    assert "bob words after adding erin" in _texts(bob, b)


def test_a_rotation_beaten_by_a_rewrite_rotation(tmp_path, people):
    """Bob rotates (epoch 2, not pushed) while alice runs `keys rotate --rewrite` and force-pushes
    as its notice says: bob's sync follows the rewrite, his epoch 2 lost, his records sealed again."""
    alice, _ra, bob, _rb = people
    a, b, _remote, _dave, _rd = _team(tmp_path, people)
    as_(bob, b, "keys", "rotate")
    as_(bob, b, "add", "bob words under his epoch", "--ts", f"{DAY}T09:30:00Z")
    notice = as_(alice, a, "keys", "rotate", "--rewrite").stdout
    push = re.search(r"git -C \S+ (push --force-with-lease=\S+ origin main)", notice)
    assert push, notice
    git(a, *push.group(1).split())
    out = as_(bob, b, "sync")
    assert "this clone now follows it" in out.stdout + out.stderr
    as_(alice, a, "sync")
    for who, root in ((alice, a), (bob, b)):
        assert "bob words under his epoch" in _texts(who, root)
        assert as_(who, root, "fsck", check=False).returncode == 0


def test_a_failed_rewrite_of_this_clones_records_leaves_them_in_gits_reflog(
    tmp_path, people, monkeypatch
):
    """Moving onto the remote's keys leaves this clone's unpushed commits out and writes their
    records again; the old objects are dropped only after that write. Before, they were pruned
    first, so a write that failed there lost the records."""
    import pytest

    from memstore.errors import MemstoreError
    from memstore.store import Store

    alice, _ra, bob, _rb = people
    a, b, _remote, _dave, rd = _team(tmp_path, people)
    as_(alice, a, "keys", "remove", rd)
    as_(alice, a, "sync")
    as_(bob, b, "keys", "rotate")
    as_(bob, b, "add", "bob words only here", "--ts", f"{DAY}T09:30:00Z")
    mine = git(b, "rev-parse", "HEAD").stdout.strip()
    monkeypatch.setenv("MEMSTORE_IDENTITY", str(bob))
    st = Store(b)

    def refuse(*_a, **_k):
        raise MemstoreError("the disk is full")

    monkeypatch.setattr(type(st), "write", refuse)
    with pytest.raises(MemstoreError):
        st.sync()
    assert git(b, "cat-file", "-e", mine).returncode == 0  # still there: git reflog finds it
    assert (b / ".git" / "memstore-reapply.json").is_file()
    monkeypatch.undo()
    monkeypatch.setenv("MEMSTORE_IDENTITY", str(bob))
    out = as_(bob, b, "sync")  # the next sync finishes what the failed one left
    assert "finished what the last ct sync left to do" in out.stdout + out.stderr
    assert "bob words only here" in _texts(bob, b)
    assert not (b / ".git" / "memstore-reapply.json").exists()


def test_a_clash_redoes_the_removal_before_sealing_again_and_keeps_a_forget(tmp_path, people):
    """Alice removes dave and forgets a record, unpushed, while bob rotates and pushes first:
    alice's sync makes the removal's new epoch BEFORE writing her records again (else they were
    sealed under bob's epoch, which dave still opened), and her forget stays."""
    alice, _ra, bob, _rb = people
    a, b, _remote, dave, rd = _team(tmp_path, people)
    as_(alice, a, "add", "a secret words line", "--ts", f"{DAY}T08:30:00Z")
    as_(alice, a, "sync")
    as_(bob, b, "sync")
    as_(alice, a, "forget", "--match", "secret words")
    as_(alice, a, "keys", "remove", rd)
    as_(alice, a, "add", "alice words after removing dave", "--ts", f"{DAY}T09:00:00Z")
    as_(bob, b, "keys", "rotate")
    as_(bob, b, "sync")
    as_(alice, a, "sync")
    got = _texts(alice, a)
    assert "alice words after removing dave" in got and "secret words" not in got
    dave_ids = keyring.load_identities(dave)
    dave_keys = {}
    for e, f in keyring.epoch_files(a).items():
        opened = keyring.unwrap_epoch(f, e, dave_ids)
        if opened is not None:
            dave_keys[e] = opened[0]
    from memstore.format import sealed_lines

    rel = f"log/2026/{DAY}.jsonl"
    for commit in git(a, "rev-list", "HEAD").stdout.split():  # every version that gets pushed
        data = subprocess.run(
            ["git", "-C", str(a), "show", f"{commit}:{rel}"], capture_output=True
        ).stdout
        for line in data.splitlines():
            parsed = sealed_lines.parse(line)
            if parsed and parsed[0] in dave_keys:
                plain = sealed_lines.open_one(dave_keys[parsed[0]], parsed[0], rel, parsed[1])
                assert b"after removing dave" not in plain, commit


def test_a_pushed_memstore_folder_is_never_merged(tmp_path, people):
    """A keyless pusher commits .memstore/ (a pending sync that would add them as a reader, an
    index): git would write it over each clone's own ignored folder on a merge. ct sync refuses,
    the push guard names it, fsck names it where a plain merge took it in."""
    import json as _json

    alice, _ra, _bob, _rb = people
    a, _b, remote, _dave, _rd = _team(tmp_path, people)
    m = tmp_path / "m"
    git(tmp_path, "clone", "-q", str(remote), str(m))
    (m / ".memstore").mkdir(exist_ok=True)
    (m / ".memstore" / "reapply.json").write_text(
        _json.dumps({"added": ["age1x"], "removed": [], "forget": [], "records": []})
    )
    git(m, "add", "-f", ".memstore/reapply.json")
    git(m, "commit", "-qm", "routine")
    git(m, "push", "-q")
    before = git(a, "rev-parse", "HEAD").stdout
    out = as_(alice, a, "sync", check=False)
    assert out.returncode == 8 and "it holds .memstore/reapply.json" in out.stderr, out.stderr
    assert git(a, "rev-parse", "HEAD").stdout == before
    git(a, "merge", "-q", "--no-edit", "origin/main")  # a plain git pull takes it in
    fsck = as_(alice, a, "fsck", check=False)
    assert fsck.returncode == 1 and ".memstore/reapply.json: committed" in fsck.stdout


def test_an_edit_of_the_plain_recipients_list_does_not_stop_a_sync(tmp_path, people):
    """Someone who can push edits keys/recipients while alice has an unpushed removal: the merge
    conflicts only there, and sync writes the list again from what the newest key file names
    (before, the sync stopped until alice merged by hand)."""
    alice, ra, _bob, rb = people
    a, _b, remote, _dave, rd = _team(tmp_path, people)
    m = tmp_path / "m"
    git(tmp_path, "clone", "-q", str(remote), str(m))
    with open(m / "keys" / "recipients", "a") as f:
        f.write("# a note, or a name\n")
    git(m, "commit", "-qam", "routine")
    git(m, "push", "-q")
    as_(alice, a, "keys", "remove", rd)
    out = as_(alice, a, "sync")
    assert "keys/recipients conflicted: written again" in out.stdout + out.stderr
    assert (a / "keys" / "recipients").read_text().split() == [ra, rb]
    assert as_(alice, a, "fsck", check=False).returncode == 0
