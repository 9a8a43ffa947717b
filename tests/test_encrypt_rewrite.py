"""Encrypted stores, the parts that rewrite (issue 30): `ct encrypt` of a plaintext store (and its
history), `ct forget --purge-history` and `ct keys rotate --rewrite` on an encrypted store, and
what `ct fsck` and `fsck --repair` can do with sealed files."""

from __future__ import annotations

import json
import re
import os
import subprocess
from pathlib import Path

from test_encrypt import as_, git, new_identity, people, sealed_clones  # noqa: F401 (fixtures)

WORDS = ["quokka", "marzipan", "zeppelin", "thimbleberry", "narwhal", "origami", "ocelot"]
FORGOTTEN = "pterodactyl"
LINE_FILE = ("log/", "tree/", "markers.jsonl", "forgotten.jsonl", "purged-history.jsonl")


def reachable(root: Path) -> list[tuple[str, str]]:
    """(object id, path or '') of every object reachable from a ref."""
    out = []
    for line in git(root, "rev-list", "--objects", "--all").stdout.splitlines():
        sha, _, path = line.partition(" ")
        out.append((sha, path))
    return out


def reachable_bytes(root: Path) -> bytes:
    ids = "".join(sha + "\n" for sha, _ in reachable(root))
    return subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch"], input=ids.encode(), capture_output=True
    ).stdout.lower()


def all_object_bytes(root: Path) -> bytes:
    return subprocess.run(
        ["git", "-C", str(root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True
    ).stdout.lower()


def blob(root: Path, sha: str) -> bytes:
    return subprocess.run(
        ["git", "-C", str(root), "cat-file", "blob", sha], capture_output=True, check=True
    ).stdout


def epoch_key(ident: Path, root: Path, epoch: int) -> bytes:
    from memstore import keyring

    path = root / f"keys/epoch-{epoch:04d}.age"
    return keyring.unwrap_epoch(path, epoch, keyring.load_identities(ident))[0]


def reachable_line_blobs(root: Path):
    """(path, bytes) of every version of a line file reachable from a ref."""
    seen = set()
    for sha, path in reachable(root):
        if path.startswith(LINE_FILE) and path.endswith(".jsonl") and sha not in seen:
            seen.add(sha)
            yield path, blob(root, sha)


def plain_store(tmp_path: Path, ident: Path) -> Path:
    """A plaintext store with adds on two days, a mark, an import and a forgotten record."""
    root = tmp_path / "plain"
    as_(ident, tmp_path, "init", root, "--embedder", "hash", "--timezone", "UTC")
    as_(ident, root, "add", f"the {WORDS[0]} ate {WORDS[1]}", "--ts", "2026-11-02T09:00:00Z")
    as_(ident, root, "add", f"a {WORDS[2]} over the {WORDS[3]} field", "--ts",
        "2026-11-02T09:05:00Z")  # fmt: skip
    src = tmp_path / "chat.jsonl"
    src.write_text(
        "".join(
            json.dumps({"ts": f"2026-11-03T10:0{i}:00Z", "role": "user", "text": f"{w} folding"})
            + "\n"
            for i, w in enumerate(WORDS[4:6])
        ),
        encoding="utf-8",
    )
    as_(ident, root, "import", "jsonl", src)
    as_(ident, root, "mark", f"feed the {WORDS[6]}")
    as_(ident, root, "add", f"my {FORGOTTEN} hint", "--ts", "2026-11-03T11:00:00Z")
    as_(ident, root, "forget", "--match", FORGOTTEN)
    return root


def pushed_to_new_remote(tmp_path: Path, root: Path) -> Path:
    """A bare remote `origin` of `root` (tmp_path/remote.git), with main pushed to it."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    git(root, "remote", "add", "origin", str(remote))
    git(root, "push", "-q", "-u", "origin", "main")
    return remote


def searchable(ident: Path, root: Path, words) -> None:
    for w in words:
        assert w in as_(ident, root, "search", w).stdout, (root, w)


def test_encrypt_rewrite_history_leaves_no_plain_word_in_any_reachable_object(tmp_path, people):
    alice, _ra, bob, rb = people
    root = plain_store(tmp_path, alice)
    pushed_to_new_remote(tmp_path, root)
    before = int(git(root, "rev-list", "--count", "HEAD").stdout)
    assert all(w.encode() in reachable_bytes(root) for w in WORDS)  # the words were there

    got = as_(alice, root, "encrypt", "--recipient", rb, "--rewrite-history")
    assert "git -C" in got.stdout and re.search(
        r"push --force-with-lease=main:[0-9a-f]{40} origin main", got.stdout
    )

    data = reachable_bytes(root)
    assert [w for w in WORDS + [FORGOTTEN] if w.encode() in data] == []
    everything = all_object_bytes(root)  # the old history was expired and pruned
    assert [w for w in WORDS + [FORGOTTEN] if w.encode() in everything] == []
    # Every commit is there (plus the encrypt commit and its purge record), every message sealed.
    subjects = git(root, "log", "--format=%s", "main").stdout.splitlines()
    assert len(subjects) == before + 2
    assert all(s.endswith("(encrypted store)") for s in subjects), subjects
    # Every version of every line file holds sealed lines only.
    versions = list(reachable_line_blobs(root))
    assert len(versions) >= 6
    for path, body in versions:
        assert all(ln.startswith(b"ms1.") for ln in body.splitlines() if ln), path
    # The old history is not kept under a remote-tracking ref either.
    assert git(root, "for-each-ref", "refs/remotes").stdout == ""
    # Everything is read back, by both readers.
    for ident in (alice, bob):
        searchable(ident, root, WORDS[:6])
        assert WORDS[6] in as_(ident, root, "where").stdout
        assert FORGOTTEN not in as_(ident, root, "search", FORGOTTEN).stdout
    fs = as_(alice, root, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout
    # An old commit checked out is an encrypted store too (keys/ is in every commit).
    first = git(root, "rev-list", "--max-parents=0", "HEAD").stdout.strip()
    assert "keys/recipients" in git(root, "ls-tree", "-r", "--name-only", first).stdout


def test_encrypt_seals_the_last_commit_like_init_encrypt(tmp_path, people):
    """Without --rewrite-history: one commit; lines sealed, pack keys remade under the epoch
    (packs resealed), new writes work; history still holds the plain text (and says so)."""
    from memstore.format import log as logfmt
    from memstore.format import seal
    from memstore.store import Store

    alice, _ra, _bob, _rb = people
    root = plain_store(tmp_path, alice)
    head = git(root, "rev-parse", "HEAD").stdout
    got = as_(alice, root, "encrypt")
    assert "rotate --rewrite" in got.stderr + got.stdout
    assert git(root, "rev-parse", "HEAD~1").stdout == head  # one commit on top
    assert git(root, "status", "--porcelain").stdout == ""
    for rel in ("log/2026/2026-11-02.jsonl", "markers.jsonl", "forgotten.jsonl"):
        assert all(ln.startswith(b"ms1.1.") for ln in (root / rel).read_bytes().splitlines())
    head_bytes = subprocess.run(
        ["git", "-C", str(root), "archive", "HEAD"], capture_output=True, check=True
    ).stdout.lower()
    assert [w for w in WORDS if w.encode() in head_bytes] == []
    os.environ["MEMSTORE_IDENTITY"] = str(alice)
    try:
        st = Store.open(root)
        recs = [ln.record for ln in logfmt.read_lines(root / "log/2026/2026-11-02.jsonl")]
        for rec in recs:
            assert rec["vkey"] == seal.record_key(rec["id"], rec["text"], st.sealer.vkey_secret())
    finally:
        del os.environ["MEMSTORE_IDENTITY"]
    searchable(alice, root, WORDS[:6])
    as_(alice, root, "add", "after the encryption", "--ts", "2026-11-02T12:00:00Z")
    searchable(alice, root, ["encryption", WORDS[0]])
    fs = as_(alice, root, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout
    assert WORDS[0].encode() in all_object_bytes(root)  # the history was not rewritten


def test_encrypt_refuses_an_encrypted_store_and_uncommitted_changes(
    tmp_path, people, sealed_clones
):
    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    head = git(b, "rev-parse", "HEAD").stdout
    again = as_(alice, b, "encrypt", check=False)
    assert again.returncode == 2 and "already an encrypted store" in again.stderr
    assert git(b, "rev-parse", "HEAD").stdout == head

    root = plain_store(tmp_path, alice)
    head = git(root, "rev-parse", "HEAD").stdout
    log = root / "log/2026/2026-11-02.jsonl"
    before = log.read_bytes()
    (root / "notes.txt").write_text("mine\n")
    dirty = as_(alice, root, "encrypt", "--rewrite-history", check=False)
    assert dirty.returncode == 2 and "notes.txt has uncommitted changes" in dirty.stderr
    assert "Nothing was changed" in dirty.stderr
    assert git(root, "rev-parse", "HEAD").stdout == head and log.read_bytes() == before
    assert not (root / "keys").exists()
    # A committed line that does not parse is named; nothing is sealed.
    (root / "notes.txt").unlink()
    log.write_bytes(before + b"not json\n")
    git(root, "commit", "-qam", "a damaged line")
    head = git(root, "rev-parse", "HEAD").stdout
    bad = as_(alice, root, "encrypt", check=False)
    assert bad.returncode == 1 and f"{log}:{len(before.splitlines()) + 1}:" in bad.stderr
    assert (
        git(root, "rev-parse", "HEAD").stdout == head
        and git(root, "status", "--porcelain").stdout == ""
    )
    assert not (root / "keys").exists() and log.read_bytes().startswith(b"{")
    # A damaged pack of a later day: the earlier day was already resealed when it is met, and all
    # of it is rolled back.
    log.write_bytes(before)
    pack = sorted((root / "packs/2026/2026-11-03").glob("*.is"))[0]
    data = bytearray(pack.read_bytes())
    data[-3] ^= 1
    pack.write_bytes(bytes(data))
    git(root, "commit", "-qam", "a damaged pack")
    head, files = git(root, "rev-parse", "HEAD").stdout, git(root, "ls-files", "-s").stdout
    bad = as_(alice, root, "encrypt", check=False)
    assert bad.returncode == 4 and pack.name in bad.stderr and "Traceback" not in bad.stderr
    assert (
        git(root, "rev-parse", "HEAD").stdout == head
        and git(root, "status", "--porcelain").stdout == ""
    )
    assert git(root, "ls-files", "-s").stdout == files and not (root / "keys").exists()


def test_purge_history_on_an_encrypted_store_removes_the_sealed_line_everywhere(
    tmp_path, people, sealed_clones
):
    from memstore.format.sealed_lines import open_one, parse

    alice, _ra, bob, _rb = people
    b, c, _remote = sealed_clones
    rc = new_identity(tmp_path / "carol.key")
    as_(alice, b, "keys", "add", rc)  # a change of recipients the rewrite must keep in history
    as_(alice, b, "add", f"keep the {WORDS[0]}", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "add", f"my {FORGOTTEN} password hint", "--ts", "2026-11-02T09:05:00Z")
    as_(alice, b, "add", f"and the {WORDS[1]}", "--ts", "2026-11-02T09:10:00Z")
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    as_(bob, c, "add", f"bob's {WORDS[2]}", "--ts", "2026-11-02T10:00:00Z")  # not pushed yet
    lines = (b / "log/2026/2026-11-02.jsonl").read_bytes().splitlines()
    sealed = lines[1]  # the record to forget, as every commit since its write holds it
    key = epoch_key(alice, b, 1)
    rec = json.loads(open_one(key, 1, "log/2026/2026-11-02.jsonl", parse(sealed)[1]))
    assert rec["text"] == f"my {FORGOTTEN} password hint"
    assert sealed.lower() in reachable_bytes(b)

    got = as_(alice, b, "forget", "--match", FORGOTTEN, "--purge-history")
    assert "push --force" in got.stdout + got.stderr

    assert sealed.lower() not in all_object_bytes(b)
    for path, body in reachable_line_blobs(b):
        for ln in body.splitlines():
            epoch, ct_ = parse(ln)
            plain = open_one(key, epoch, path, ct_)
            assert plain is not None, path
            assert FORGOTTEN.encode() not in plain and rec["vkey"].encode() not in plain, path
    assert FORGOTTEN not in as_(alice, b, "search", FORGOTTEN).stdout
    searchable(alice, b, WORDS[:2])
    fs = as_(alice, b, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout
    notes = json.loads(fs.stdout)["notes"]
    assert len(notes) == 2 and f"added {rc}" in notes[1], notes
    # The other clone follows the rewritten remote with ct sync, keeping its own unpushed record.
    assert "purged-history.jsonl" in git(b, "ls-files").stdout
    git(b, "push", "-q", "--force", "origin", "main")
    synced = as_(bob, c, "sync", check=False)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert sealed.lower() not in all_object_bytes(c)
    searchable(bob, c, [WORDS[0], WORDS[1], WORDS[2]])
    assert FORGOTTEN not in as_(bob, c, "search", FORGOTTEN).stdout
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    searchable(alice, b, [WORDS[2]])


def test_keys_rotate_rewrite_leaves_nothing_the_old_key_opens(people, sealed_clones):
    from memstore.format.sealed_lines import open_one, parse

    alice, _ra, bob, _rb = people
    b, c, _remote = sealed_clones
    as_(alice, b, "add", f"the {WORDS[0]} note", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "mark", f"feed the {WORDS[6]}")
    as_(alice, b, "keys", "rotate")  # epoch 2, then a line under it
    as_(alice, b, "add", f"the {WORDS[2]} note", "--ts", "2026-11-03T09:00:00Z")
    old = {1: epoch_key(alice, b, 1), 2: epoch_key(alice, b, 2)}

    got = as_(alice, b, "keys", "rotate", "--rewrite")
    assert "epoch 3" in got.stdout + got.stderr and "push --force" in got.stdout
    assert sorted(p.name for p in (b / "keys").iterdir()) == [
        "epoch-0003.age", "epoch-0003.recipients", "recipients"]  # fmt: skip
    new = epoch_key(alice, b, 3)
    versions = list(reachable_line_blobs(b))
    assert len(versions) >= 4
    for path, body in versions:
        for ln in body.splitlines():
            epoch, ct_ = parse(ln)
            assert epoch == 3, path
            assert open_one(new, 3, path, ct_) is not None
            for e, k in old.items():
                assert open_one(k, e, path, ct_) is None and open_one(k, 3, path, ct_) is None
    paths = {p for _, p in reachable(b)}
    assert not {"keys/epoch-0001.age", "keys/epoch-0002.age"} & paths
    for ident in (alice, bob):
        searchable(ident, b, [WORDS[0], WORDS[2]])
        assert WORDS[6] in as_(ident, b, "where").stdout
    fs = as_(alice, b, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout
    as_(alice, b, "add", "after the rotation", "--ts", "2026-11-03T10:00:00Z")
    assert (b / "log/2026/2026-11-03.jsonl").read_bytes().splitlines()[-1].startswith(b"ms1.3.")


def test_fsck_without_a_key_checks_the_form_and_says_what_it_could_not(
    tmp_path, people, sealed_clones
):
    from conftest import ct

    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    as_(alice, b, "add", f"the {WORDS[0]} note", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "mark", f"feed the {WORDS[6]}")
    carol = tmp_path / "carol.key"
    rc = new_identity(carol)
    as_(alice, b, "keys", "add", rc)
    added_in = git(b, "rev-parse", "HEAD").stdout.strip()

    got = ct("-C", b, "fsck", "--json", check=False)  # no identity at all
    assert got.returncode == 10, got.stdout + got.stderr
    rep = json.loads(got.stdout)
    assert rep["ok"] and rep["damage"] == [] and rep["records"] == 1 and rep["packs"] == 1
    assert any("no identity of yours opens this store" in u for u in rep["unchecked"])
    assert any("opens under its epoch key" in u for u in rep["unchecked"])
    changed = [n for n in rep["notes"] if f"commit {added_in[:10]}" in n]
    who = git(b, "log", "-1", "--format=%an <%ae>", added_in).stdout.strip()
    assert changed and f"added {rc}" in changed[0] and f"by {who} at" in changed[0]
    assert len(rep["notes"]) == 2  # made with alice and bob, then carol added
    text = ct("-C", b, "fsck", check=False)
    assert "not checked:" in text.stdout and "form ok (not opened)" in text.stdout
    # The keyed fsck names the recipients' history too.
    keyed = json.loads(as_(alice, b, "fsck", "--json").stdout)
    assert keyed["ok"] and "unchecked" not in keyed and len(keyed["notes"]) == 2

    # Damage it can see: a plain line, a line of an epoch the store lacks, a pack that changed.
    log = b / "log/2026/2026-11-02.jsonl"
    sealed = log.read_bytes()
    log.write_bytes(sealed + b'{"id":"x","ts":"2026-11-02T09:02:00Z","role":"user","text":"hi"}\n'
                    + b"ms1.9.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n")  # fmt: skip
    (pack,) = (b / "packs/2026/2026-11-02").glob("*.is")
    data = bytearray(pack.read_bytes())
    data[-3] ^= 1
    pack.write_bytes(bytes(data))
    bad = ct("-C", b, "fsck", "--json", check=False)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    damage = "\n".join(json.loads(bad.stdout)["damage"])
    assert "log/2026/2026-11-02.jsonl:2: not a sealed line" in damage
    assert "log/2026/2026-11-02.jsonl:3: sealed under key epoch 9" in damage
    assert pack.name in damage
    assert ct("-C", b, "fsck", "--repair", check=False).returncode == 10  # repair needs a key
    assert log.read_bytes().startswith(sealed)


def test_repair_keeps_new_sealed_lines_aside_when_a_sealed_day_log_was_cut(people, sealed_clones):
    """fsck --repair of a day log that was cut short and then got a new (sealed) line: the committed
    lines come back and the new one is kept under .memstore/rolled-back/, as in a plain store."""
    from memstore.format.sealed_lines import open_one, parse, seal_one

    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    as_(alice, b, "add", "first line", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "add", "second line", "--ts", "2026-11-02T09:01:00Z")
    rel = "log/2026/2026-11-02.jsonl"
    log = b / rel
    committed = log.read_bytes()
    key = epoch_key(alice, b, 1)
    first = committed.splitlines()[0]
    rec = json.loads(open_one(key, 1, rel, parse(first)[1]))
    rec.update(id="01NEWRECORD0000000000000000", text="third line")
    new_line = seal_one(key, 1, rel, json.dumps(rec).encode())
    log.write_bytes(committed[: len(first) + 1 + 30] + b"\n" + new_line + b"\n")

    got = as_(alice, b, "fsck", "--repair")
    assert "differs from its committed version" not in got.stdout, got.stdout
    assert log.read_bytes() == committed
    kept = b"".join(p.read_bytes() for p in (b / ".memstore/rolled-back").rglob("*") if p.is_file())
    assert new_line in kept
    fs = as_(alice, b, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout


def _plain_and_another_with_a_record(tmp_path, alice):
    """(root, remote, other): a plain store pushed to a new remote, and another clone of it holding
    one unpushed record ("the other clone's saxophone")."""
    root = plain_store(tmp_path, alice)
    remote = pushed_to_new_remote(tmp_path, root)
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    as_(alice, other, "add", "the other clone's saxophone", "--ts", "2026-11-04T09:00:00Z")
    return root, remote, other


def test_a_plaintext_clone_follows_a_remote_encrypted_elsewhere_with_ct_sync(tmp_path, people):
    alice, _ra, _bob, _rb = people
    root, _remote, other = _plain_and_another_with_a_record(tmp_path, alice)

    as_(alice, root, "encrypt", "--rewrite-history")
    git(root, "push", "-q", "--force", "origin", "main")

    synced = as_(alice, other, "sync", check=False)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert (other / "keys/recipients").is_file()
    for rel in ("log/2026/2026-11-02.jsonl", "log/2026/2026-11-04.jsonl"):
        assert all(ln.startswith(b"ms1.") for ln in (other / rel).read_bytes().splitlines()), rel
    searchable(alice, other, ["saxophone", WORDS[0], WORDS[4]])
    fs = as_(alice, other, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout
    assert [w for w in WORDS + ["saxophone"] if w.encode() in all_object_bytes(other)] == []
    git(root, "pull", "-q", "--no-rebase", "origin", "main")
    searchable(alice, root, ["saxophone"])


def test_a_plaintext_clone_with_unpushed_records_follows_an_encrypt_that_kept_history(
    tmp_path, people
):
    """`ct encrypt` without --rewrite-history on one clone while another holds unpushed records:
    before, the other's ct sync merged its plain lines into the sealed day logs (refused to push,
    then every command stopped on that clone; its records reached no one). Now it moves onto the
    encrypted remote and writes its records again, sealed, and no plain copy of them is pushed."""
    alice, _ra, _bob, _rb = people
    root, remote, other = _plain_and_another_with_a_record(tmp_path, alice)
    as_(alice, root, "encrypt")
    as_(alice, root, "sync")
    synced = as_(alice, other, "sync", check=False)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "encrypted on another clone: this clone moved onto it" in synced.stdout + synced.stderr
    for rel in ("log/2026/2026-11-04.jsonl",):
        assert all(ln.startswith(b"ms1.") for ln in (other / rel).read_bytes().splitlines()), rel
    searchable(alice, other, ["saxophone"])
    fs = as_(alice, other, "fsck", "--json", check=False)
    assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout
    assert b"saxophone" not in all_object_bytes(remote)
    as_(alice, root, "sync")
    searchable(alice, root, ["saxophone"])


def test_a_reader_without_every_epoch_cannot_rewrite_history(tmp_path, people, sealed_clones):
    """An identity that opens the newest epoch but not an older one (wrapped to it by hand here)
    could write, but its purge or rotate --rewrite would have to drop the lines it cannot open:
    both refuse before changing anything."""
    from memstore import keyring

    alice, ra, _bob, rb = people
    b, c, _remote = sealed_clones
    as_(alice, b, "add", "an old line", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "keys", "rotate")
    as_(alice, b, "add", f"a {FORGOTTEN} line", "--ts", "2026-11-02T09:10:00Z")
    carol = tmp_path / "carol.key"
    rc = new_identity(carol)
    keyring.wrap_epoch(b, 2, epoch_key(alice, b, 2), [ra, rb, rc])  # epoch 2 only
    keyring.write_recipients(b / keyring.RECIPIENTS, [ra, rb, rc])
    git(b, "commit", "-qam", "carol reads epoch 2 only")
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")  # carol's clone
    assert FORGOTTEN in as_(carol, c, "search", FORGOTTEN).stdout
    head = git(c, "rev-parse", "HEAD").stdout
    for args in (
        ["forget", "--match", FORGOTTEN, "--purge-history"],
        ["keys", "rotate", "--rewrite"],
    ):
        got = as_(carol, c, *args, check=False)
        assert got.returncode == 2, got.stdout + got.stderr
        assert "does not open key epoch(s) 1" in got.stderr and "Traceback" not in got.stderr
        assert git(c, "rev-parse", "HEAD").stdout == head
        assert git(c, "status", "--porcelain").stdout == ""
    assert FORGOTTEN in as_(carol, c, "search", FORGOTTEN).stdout
