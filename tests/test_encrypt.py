"""Encrypted stores (issue 30): every committed line sealed on its own, so an untrusted git remote
sees only ciphertext and plain `git pull` still merges two clones without a conflict."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ct

ID = ["-c", "user.name=tester", "-c", "user.email=tester@example.org"]

# Words that appear only in the records, markers and topics these tests write.
B_WORDS = ["quokka", "marzipan", "zeppelin", "thimbleberry"]
C_WORDS = ["axolotl", "saxophone", "glacier", "bergamot"]
IMPORTED = ["narwhal", "origami"]
MARK = "ocelot"
FORGOTTEN = "pterodactyl"


def git(root, *args, check=True):
    proc = subprocess.run(["git", *ID, "-C", str(root), *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise AssertionError(f"git {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def new_identity(path: Path) -> str:
    out = ct("keys", "new", path).stdout.strip().splitlines()
    assert out[-1].startswith("age1")
    return out[-1]


def as_(ident: Path, root: Path, *args, check=True):
    return ct("--identity", ident, "-C", root, *args, check=check)


@pytest.fixture
def people(tmp_path):
    """(alice's identity, her recipient, bob's identity, his recipient)."""
    a, b = tmp_path / "alice.key", tmp_path / "bob.key"
    return a, new_identity(a), b, new_identity(b)


@pytest.fixture
def sealed_clones(tmp_path, people):
    """(alice's clone, bob's clone, the bare remote) of a store sealed to both."""
    alice, _ra, bob, rb = people
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "--initial-branch=main", str(remote))
    origin = tmp_path / "origin"
    ct("--identity", alice, "init", origin, "--embedder", "hash", "--timezone", "UTC",
       "--encrypt", "--recipient", rb)  # fmt: skip
    git(origin, "remote", "add", "origin", str(remote))
    git(origin, "push", "-q", "-u", "origin", "main")
    b, c = tmp_path / "b", tmp_path / "c"
    git(tmp_path, "clone", "-q", str(remote), str(b))
    git(tmp_path, "clone", "-q", str(remote), str(c))
    return b, c, remote


def words_in_objects(remote: Path, words) -> dict[str, int]:
    """How often each word occurs (any case) in every object of the repository."""
    data = subprocess.run(
        ["git", "-C", str(remote), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout.lower()
    return {w: data.count(w.lower().encode()) for w in words if w.lower().encode() in data}


def test_the_untrusted_remote_holds_no_word_topic_or_vector(tmp_path, people, sealed_clones):
    alice, _ra, bob, _rb = people
    b, c, remote = sealed_clones
    as_(alice, b, "add", f"the {B_WORDS[0]} ate {B_WORDS[1]} aboard a {B_WORDS[2]}", "--ts",
        "2026-11-02T09:00:00Z")  # fmt: skip
    as_(alice, b, "add", f"{B_WORDS[3]} jam recipe from the {B_WORDS[0]}", "--ts",
        "2026-11-02T09:05:00Z")  # fmt: skip
    as_(alice, b, "add", f"my {FORGOTTEN} password hint", "--ts", "2026-11-02T09:06:00Z")
    src = tmp_path / "chat.jsonl"
    src.write_text(
        "".join(
            json.dumps({"ts": f"2026-11-03T10:0{i}:00Z", "role": "user", "text": f"{w} folding"})
            + "\n"
            for i, w in enumerate(IMPORTED)
        ),
        encoding="utf-8",
    )
    as_(alice, b, "import", "jsonl", src)
    as_(alice, b, "mark", f"feed the {MARK}")
    as_(alice, b, "forget", "--match", FORGOTTEN)
    git(b, "push", "-q", "origin", "main")
    as_(bob, c, "add", f"{C_WORDS[0]} plays the {C_WORDS[1]} on a {C_WORDS[2]}", "--ts",
        "2026-11-02T11:00:00Z")  # fmt: skip
    as_(bob, c, "add", f"{C_WORDS[3]} tea for the {C_WORDS[0]}", "--ts", "2026-11-04T08:00:00Z")
    as_(bob, c, "mark", f"tune the {C_WORDS[1]}")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    git(c, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")

    # Both read everything but the forgotten record.
    for ident, root in ((alice, b), (bob, c)):
        for w in B_WORDS + C_WORDS + IMPORTED:
            hits = json.loads(as_(ident, root, "search", w, "--json").stdout)
            texts = (
                [h["text"] for h in hits["hits"]]
                if isinstance(hits, dict)
                else [h["text"] for h in hits]
            )
            assert any(w in t for t in texts), (root, w, texts)
        assert FORGOTTEN not in as_(ident, root, "search", FORGOTTEN).stdout
        assert MARK in as_(ident, root, "where").stdout
        fs = as_(ident, root, "fsck", "--json", check=False)
        assert fs.returncode == 0, fs.stdout + fs.stderr

    # Topic names and vectors, as the trusted clone knows them.
    from memstore.format import tree as treefmt
    from memstore.store import Store

    os.environ["MEMSTORE_IDENTITY"] = str(alice)
    try:
        st = Store.open(b)
        tree = treefmt.read(st.root)
        names = {w for t in tree.topics.values() for w in (t.name or "").replace(",", " ").split()}
        index = st.index()
        n = len(index.matrix()[0])
        from memstore.index import exact

        rows, problems = exact.rows(index, range(n))  # every vector, as the packs hold it
        assert problems == []
    finally:
        del os.environ["MEMSTORE_IDENTITY"]
    assert {w.lower() for w in names} & set(B_WORDS + C_WORDS), names  # topics were named

    leaks = words_in_objects(
        remote, B_WORDS + C_WORDS + IMPORTED + [MARK, FORGOTTEN] + [n for n in names if len(n) > 4]
    )
    assert leaks == {}, leaks
    raw = subprocess.run(
        ["git", "-C", str(remote), "cat-file", "--batch-all-objects", "--batch"],
        capture_output=True,
        check=True,
    ).stdout
    assert len(rows) >= 5
    checked = 0
    for row in rows:
        vec = row.tobytes()
        for i in range(0, len(vec) - 12, 4):
            window = vec[i : i + 12]
            if window.count(0) <= 8:  # a run of the stored bytes that holds a non-zero value
                assert window not in raw
                checked += 1
    assert checked > 20
    # The day logs are sealed lines; the commit subjects name no words.
    for line in (b / "log/2026/2026-11-02.jsonl").read_bytes().splitlines():
        assert line.startswith(b"ms1.")
    subjects = git(remote, "log", "--format=%s", "main").stdout
    assert "encrypted store" in subjects and not any(w in subjects for w in B_WORDS + C_WORDS)


@pytest.mark.parametrize("rebase", [False, True])
def test_same_day_writes_on_two_clones_merge_with_plain_git(people, sealed_clones, rebase):
    alice, _ra, bob, _rb = people
    b, c, _remote = sealed_clones
    as_(alice, b, "add", f"{B_WORDS[0]} on the roof", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "add", f"{B_WORDS[1]} in the oven", "--ts", "2026-11-02T09:30:00Z")
    git(b, "push", "-q", "origin", "main")
    as_(bob, c, "add", f"{C_WORDS[0]} in the pond", "--ts", "2026-11-02T10:00:00Z")
    as_(bob, c, "add", f"{C_WORDS[1]} lessons", "--ts", "2026-11-02T10:30:00Z")
    pulled = git(c, "pull", "--rebase" if rebase else "--no-rebase", "origin", "main")
    assert "CONFLICT" not in pulled.stdout + pulled.stderr
    git(c, "push", "-q", "origin", "main")
    git(b, "pull", "-q", "--no-rebase", "origin", "main")
    assert git(b, "rev-parse", "HEAD").stdout == git(c, "rev-parse", "HEAD").stdout
    day = (b / "log/2026/2026-11-02.jsonl").read_bytes()
    assert b"<<<<<<<" not in day and all(ln.startswith(b"ms1.") for ln in day.splitlines())
    for ident, root in ((alice, b), (bob, c)):
        for w in (B_WORDS[0], B_WORDS[1], C_WORDS[0], C_WORDS[1]):
            assert w in as_(ident, root, "search", w).stdout, (root, w)
        fs = as_(ident, root, "fsck", "--json", check=False)
        assert fs.returncode == 0 and json.loads(fs.stdout)["ok"], fs.stdout


def test_the_same_record_on_two_clones_seals_to_the_same_line(people, sealed_clones, tmp_path):
    alice, _ra, bob, _rb = people
    b, c, _remote = sealed_clones
    src = tmp_path / "same.jsonl"
    src.write_text(
        json.dumps({"ts": "2026-11-05T10:00:00Z", "role": "user", "text": "same words"}) + "\n"
    )
    as_(alice, b, "import", "jsonl", src)
    as_(bob, c, "import", "jsonl", src)
    lb = (b / "log/2026/2026-11-05.jsonl").read_bytes()
    assert lb == (c / "log/2026/2026-11-05.jsonl").read_bytes() and lb.startswith(b"ms1.")


def test_a_removed_recipient_cannot_read_what_is_written_after(people, sealed_clones):
    alice, _ra, bob, rb = people
    b, c, _remote = sealed_clones
    as_(alice, b, "add", f"before: {B_WORDS[0]}", "--ts", "2026-11-02T09:00:00Z")
    assert rb in as_(alice, b, "keys", "list").stdout
    as_(alice, b, "keys", "remove", rb)
    assert rb not in as_(alice, b, "keys", "list").stdout
    as_(alice, b, "add", f"after: {B_WORDS[1]}", "--ts", "2026-11-02T09:30:00Z")
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    assert B_WORDS[0] in as_(bob, c, "search", B_WORDS[0]).stdout  # what he could read, he keeps
    got = as_(bob, c, "search", B_WORDS[1], check=False)
    assert B_WORDS[1] not in got.stdout
    assert "epoch" in got.stderr  # said, not silently skipped
    # His key does not open the new epoch's file at all.
    import pyrage
    from pyrage import x25519

    ident = x25519.Identity.from_str(bob.read_text().splitlines()[-1])
    with pytest.raises(pyrage.DecryptError):
        pyrage.decrypt((c / "keys/epoch-0002.age").read_bytes(), [ident])
    # And he cannot write to it.
    w = as_(bob, c, "add", "may I", check=False)
    assert w.returncode == 10 and "newest key epoch" in w.stderr
    assert B_WORDS[1] in as_(alice, b, "search", B_WORDS[1]).stdout


def test_keys_add_lets_a_new_reader_read_the_history(tmp_path, people, sealed_clones):
    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    carol = tmp_path / "carol.key"
    rc = new_identity(carol)
    as_(alice, b, "add", f"old {B_WORDS[2]}", "--ts", "2026-11-02T09:00:00Z")
    assert as_(carol, b, "search", B_WORDS[2], check=False).returncode == 10
    as_(alice, b, "keys", "add", rc)
    assert rc in as_(alice, b, "keys", "list").stdout
    assert B_WORDS[2] in as_(carol, b, "search", B_WORDS[2]).stdout


def test_errors_no_identity_no_epoch_and_a_tampered_line(tmp_path, people, sealed_clones):
    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    as_(alice, b, "add", "one line", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "add", "two lines", "--ts", "2026-11-02T09:01:00Z")
    none = ct("-C", b, "search", "line", check=False)  # no --identity, no default identity
    assert none.returncode == 10 and "no identity" in none.stderr and "Traceback" not in none.stderr
    stranger = tmp_path / "stranger.key"
    new_identity(stranger)
    other = as_(stranger, b, "search", "line", check=False)
    assert other.returncode == 10 and "opens none" in other.stderr
    log = b / "log/2026/2026-11-02.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    body = bytearray(lines[1])
    body[20] = ord("A") if body[20] != ord("A") else ord("B")
    log.write_bytes(lines[0] + bytes(body))
    bad = as_(alice, b, "search", "line", "--json", check=False)
    assert bad.returncode == 4 and "Traceback" not in bad.stderr
    assert f"{log}:2" in bad.stderr and "fails authentication" in bad.stderr
    fs = as_(alice, b, "fsck", "--json", check=False)
    assert fs.returncode != 0 and "2026-11-02.jsonl:2" in fs.stdout + fs.stderr
    # A plain line slipped into a sealed file is refused the same way.
    log.write_bytes(
        lines[0] + b'{"id":"x","ts":"2026-11-02T09:02:00Z","role":"user","text":"hi"}\n'
    )
    plain = as_(alice, b, "search", "line", check=False)
    assert plain.returncode == 4 and "not a sealed line" in plain.stderr


def test_epoch_files_are_age_files_and_an_ssh_key_is_an_identity(tmp_path):
    import pyrage
    from pyrage import ssh

    key = tmp_path / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "t@example", "-f", str(key)],
        check=True,
    )
    root = tmp_path / "s"
    ct("--identity", key, "init", root, "--embedder", "hash", "--encrypt")
    body = pyrage.decrypt(
        (root / "keys/epoch-0001.age").read_bytes(), [ssh.Identity.from_buffer(key.read_bytes())]
    )
    assert body.decode().splitlines()[:2] == ["memstore epoch key 1", "epoch: 1"]
    assert (root / "keys/recipients").read_text().startswith("ssh-ed25519 ")
    ct("--identity", key, "-C", root, "add", "hello sealed world")
    assert "sealed world" in ct("--identity", key, "-C", root, "search", "sealed").stdout
    assert (root / ".memstore").stat().st_mode & 0o777 == 0o700
    ident = tmp_path / "config" / "memstore" / "age-identity.txt"
    assert not ident.exists()


def test_keys_new_writes_a_private_file_and_never_overwrites(tmp_path):
    path = tmp_path / "k" / "id.txt"
    rcpt = new_identity(path)
    assert path.stat().st_mode & 0o777 == 0o600 and rcpt in path.read_text()
    again = ct("keys", "new", path, check=False)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert rcpt in path.read_text()


def test_a_plain_store_is_untouched(store):
    from conftest import write_turns

    write_turns(store, [("2026-11-02T09:00:00Z", "user", "plain words", "s", "me")])
    line = (store.root / "log/2026/2026-11-02.jsonl").read_bytes()
    assert line.startswith(b"{") and b"plain words" in line
    assert not (store.root / "keys").exists() and store.sealer is None


def test_pack_keys_need_the_epoch_key_to_make(people, sealed_clones):
    """A record's pack key (vkey) is keyed by the epoch: guessing its id and text does not make it,
    so the remote cannot confirm a guess against a sealed vector."""
    from memstore.format import log as logfmt
    from memstore.format import seal
    from memstore.store import Store

    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    as_(alice, b, "add", "a guessable sentence", "--ts", "2026-11-02T09:00:00Z")
    os.environ["MEMSTORE_IDENTITY"] = str(alice)
    try:
        st = Store.open(b)
        (ln,) = list(logfmt.read_lines(b / "log/2026/2026-11-02.jsonl"))
    finally:
        del os.environ["MEMSTORE_IDENTITY"]
    rec = ln.record
    assert rec["text"] == "a guessable sentence" and st.sealer is not None
    assert rec["vkey"] != seal.record_key(rec["id"], rec["text"])
    assert rec["vkey"] == seal.record_key(rec["id"], rec["text"], st.sealer.vkey_secret())


def test_the_remote_guard_checks_sealed_files_by_form(people, sealed_clones):
    alice, _ra, _bob, _rb = people
    b, _c, remote = sealed_clones
    ct("-C", remote, "hooks", "install")
    as_(alice, b, "add", "sealed and fine", "--ts", "2026-11-02T09:00:00Z")
    git(b, "push", "-q", "--no-verify", "origin", "main")  # a sealed push passes the guard
    with open(b / "log/2026/2026-11-02.jsonl", "ab") as f:
        f.write(b'{"id":"x","ts":"2026-11-02T09:02:00Z","role":"user","text":"plain"}\n')
    git(b, "commit", "-qam", "a plain line")
    pushed = git(b, "push", "--no-verify", "origin", "main", check=False)
    assert pushed.returncode != 0
    assert "2026-11-02.jsonl:2: a plain or damaged line in an encrypted store" in pushed.stderr


def test_keys_rotate_starts_an_epoch_both_still_read(people, sealed_clones):
    alice, _ra, bob, _rb = people
    b, c, _remote = sealed_clones
    as_(alice, b, "add", f"old {B_WORDS[3]}", "--ts", "2026-11-02T09:00:00Z")
    as_(alice, b, "keys", "rotate")
    as_(alice, b, "add", f"new {C_WORDS[3]}", "--ts", "2026-11-02T09:30:00Z")
    lines = (b / "log/2026/2026-11-02.jsonl").read_bytes().splitlines()
    assert [ln.split(b".")[1] for ln in lines] == [b"1", b"2"]
    git(b, "push", "-q", "origin", "main")
    git(c, "pull", "-q", "--no-rebase", "origin", "main")
    for w in (B_WORDS[3], C_WORDS[3]):
        got = as_(bob, c, "search", w)
        assert w in got.stdout and "epoch" not in got.stderr


def test_a_cut_last_sealed_line_is_an_unfinished_write_not_a_forgery(people, sealed_clones):
    alice, _ra, _bob, _rb = people
    b, _c, _remote = sealed_clones
    as_(alice, b, "add", "whole line", "--ts", "2026-11-02T09:00:00Z")
    log = b / "log/2026/2026-11-02.jsonl"
    data = log.read_bytes()
    log.write_bytes(data + data[:40])  # a writer killed halfway through its line
    fs = as_(alice, b, "fsck", "--json", check=False)
    assert "2026-11-02.jsonl:2" in fs.stdout and "fails authentication" not in fs.stdout
    assert "whole line" in as_(alice, b, "search", "whole").stdout


def test_init_encrypt_without_an_identity_or_with_a_bad_recipient_changes_nothing(tmp_path):
    root = tmp_path / "s"
    none = ct("init", root, "--embedder", "hash", "--encrypt", check=False)
    assert none.returncode == 2 and "ct keys new" in none.stderr and not root.exists()
    ident = tmp_path / "me.key"
    new_identity(ident)
    bad = ct("--identity", ident, "init", root, "--embedder", "hash", "--encrypt",
             "--recipient", "age1nope", check=False)  # fmt: skip
    assert bad.returncode == 2 and "not a recipient" in bad.stderr and not root.exists()
