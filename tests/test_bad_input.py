"""Bad input: every malformed, corrupt, huge or hostile input gives a clear error naming the file and
changes nothing (git stays clean, no commit is made); damage inside a store is named by `ct fsck`."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import time
from contextlib import contextmanager

import pytest

from conftest import commits, ct, git_clean

SECRET_FREE_WORDS = "The train to Kyoto leaves at nine; the hotel is by the river."


@contextmanager
def unchanged(root):
    """Assert that the block leaves the store's history and working tree exactly as they were."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    n = len(commits(root))
    yield
    assert subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout == head
    assert len(commits(root)) == n
    assert git_clean(root)


def _line(**kw) -> str:
    rec = {"ts": "2026-11-30T10:00:00Z", "role": "user", "text": SECRET_FREE_WORDS}
    rec.update(kw)
    return json.dumps(rec, ensure_ascii=False) + "\n"


# ----- input files ------------------------------------------------------------------------------


@pytest.mark.parametrize("content, where, words", [
    (_line() + '{"ts": "2026-11-30T10:01:00Z", "role": broken\n', ":2:", "not valid JSON"),
    (_line() + "[1, 2, 3]\n", ":2:", "object"),
    (_line(text=42), ":1:", "text"),
    (_line(role="wizard"), ":1:", "role"),
    (_line(ts="the day after never"), ":1:", "ts"),
    (_line().encode() + b'{"ts":"2026-11-30T10:00:00Z","role":"user","text":"caf\xe9"}\n', ":2:", "UTF-8"),
    ('{"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "' + "x" * 3_000_000 + "\n", ":1:", "JSON"),
])
def test_bad_jsonl_is_refused_naming_file_and_line(store, tmp_path, content, where, words):
    f = tmp_path / "in.jsonl"
    f.write_bytes(content if isinstance(content, bytes) else content.encode())
    with unchanged(store.root):
        t0 = time.monotonic()
        proc = ct("-C", store.root, "import", "jsonl", f, check=False)
        assert time.monotonic() - t0 < 30
    assert proc.returncode == 4, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert f"{f}{where}" in first and words in first, first
    assert "Nothing was imported." in proc.stderr


def test_large_valid_line_is_kept_verbatim(store, tmp_path):
    text = ("Section %d: " + SECRET_FREE_WORDS + " ") * 1 + "".join(f"paragraph {i} of the long note. " for i in range(3000))
    f = tmp_path / "big.jsonl"
    f.write_text(_line(text=text, id="big-1"))
    ct("-C", store.root, "import", "jsonl", f)
    line = (store.root / "log/2026/2026-11-30.jsonl").read_text().splitlines()[0]
    assert json.loads(line)["text"] == text and git_clean(store.root)


def test_an_input_record_cannot_point_its_segment_outside_the_store(store, tmp_path):
    f = tmp_path / "evil.jsonl"
    f.write_text(_line(id="evil-1", seg={"shard": "../../etc", "text": 0, "vec": 1}, hash="0" * 64))
    ct("-C", store.root, "import", "jsonl", f)
    rec = json.loads((store.root / "log/2026/2026-11-30.jsonl").read_text())
    assert "seg" not in rec  # format 2: a record names no file; its vector is found by day and id
    assert rec["hash"] != "0" * 64
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"]


def test_binary_and_giant_files_are_refused_or_skipped_never_truncated(store, tmp_path):
    binary = tmp_path / "blob.md"
    binary.write_bytes(os.urandom(4096) + b"\x00" * 100)
    giant = tmp_path / "giant.txt"
    with open(giant, "wb") as fh:
        fh.truncate(11 * 1024 * 1024)  # sparse: 11 MiB of NULs, over the 10 MiB default
    with unchanged(store.root):
        for f in (binary, giant):
            proc = ct("-C", store.root, "ingest-path", f, check=False)
            assert proc.returncode == 4 and str(f) in proc.stderr, proc.stderr
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\n" + SECRET_FREE_WORDS + "\n")
    os.rename(binary, folder / "blob.md")
    proc = ct("-C", store.root, "ingest-path", folder, "--json")
    out = json.loads(proc.stdout)
    assert out["added"] == 1
    assert any("blob.md" in n for n in out["notes"])
    assert git_clean(store.root)


def test_symlink_loop_is_reported_not_followed_forever(store, tmp_path):
    folder = tmp_path / "loop"
    (folder / "a").mkdir(parents=True)
    (folder / "a" / "note.md").write_text("# Loop\n\n" + SECRET_FREE_WORDS + "\n")
    os.symlink("..", folder / "a" / "up")
    os.symlink("self", folder / "self")
    proc = subprocess.run([*__import__("conftest").CT, "-C", str(store.root), "ingest-path", str(folder),
                           "--follow-symlinks", "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["added"] == 1 and git_clean(store.root)


def test_garbage_memstore_toml_names_the_file(store):
    (store.root / "memstore.toml").write_text("format_version = [[[ nonsense\n")
    subprocess.run(["git", "-C", str(store.root), "commit", "-qam", "break the config"], check=True)
    with unchanged(store.root):
        proc = ct("-C", store.root, "add", "hello", check=False)
    assert proc.returncode == 4 and "memstore.toml" in proc.stderr.splitlines()[0], proc.stderr


# ----- damage inside a store: named by fsck, survived by readers, nothing rewritten -------------------


def _store_with_two_records(store):
    store.add("first note about the budget", ts="2026-11-30T08:00:00Z")
    store.add("second note about the river", ts="2026-11-30T09:00:00Z")
    log = store.root / "log/2026/2026-11-30.jsonl"
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    return log, recs


def _commit_all(root, msg):
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", msg], check=True,
                   env={**os.environ, "MEMSTORE_COMMITTING": "1"})


def _pack_of(store, rec):
    """The pack that holds a record's vector (found by day and id, as readers find it)."""
    from memstore.format import pack as packfmt

    for p in packfmt.pack_files(packfmt.day_dir(store.root, rec["ts"][:10])):
        if rec["id"] in packfmt.read(p).vectors():
            return p
    raise AssertionError(f"no pack holds {rec['id']}")


def _fsck_and_search_name(store, needle):
    """fsck exits 1 naming `needle`; search still answers; neither changes anything."""
    with unchanged(store.root):
        proc = ct("-C", store.root, "fsck", check=False)
        assert proc.returncode == 1 and needle in proc.stdout, proc.stdout
        found = ct("-C", store.root, "search", "note", "--mode", "exact", "--json", check=False)
        assert found.returncode == 0, found.stderr
    return proc.stdout


def test_truncated_pack(store):
    log, recs = _store_with_two_records(store)
    p = _pack_of(store, recs[0])
    p.write_bytes(p.read_bytes()[:-5])
    _commit_all(store.root, "truncate a pack")
    out = _fsck_and_search_name(store, str(p.name))
    assert "impossible header" in out and "do not hash to the file name" in out


def test_garbage_pack(store):
    log, recs = _store_with_two_records(store)
    p = _pack_of(store, recs[1])
    p.write_bytes(b"\xff" * 10)
    _commit_all(store.root, "garbage pack")
    _fsck_and_search_name(store, "header is 10 bytes")


def test_wrong_vector_dimension(store):
    import numpy as np

    from memstore.format import pack as packfmt

    log, recs = _store_with_two_records(store)
    w = packfmt.PackWriter("2026-11-30", 3)
    w.add_vector(recs[0]["id"], recs[0]["hash"], np.ones(3, np.float32), "float32", 0)
    _pack_of(store, recs[0]).unlink()
    w.write(store.root)
    _commit_all(store.root, "wrong dimension")
    _fsck_and_search_name(store, "has 3 dimensions, the store uses 384")


def test_a_record_whose_text_changed_no_longer_matches_its_vector(store):
    from memstore.format import record as recordfmt

    log, recs = _store_with_two_records(store)
    recs[1]["text"] = "second note about the sea"
    recs[1]["hash"] = recordfmt.text_hash(recs[1]["text"])
    log.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
    _commit_all(store.root, "edited text")
    out = _fsck_and_search_name(store, f"vector of record {recs[1]['id']} was made from other text")
    assert _pack_of(store, recs[1]).name in out


def test_malformed_and_invalid_utf8_log_lines(store):
    log, recs = _store_with_two_records(store)
    with open(log, "ab") as fh:
        fh.write(b'{"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "caf\xe9 cr\xe8me", "id": "x"}\n')
        fh.write(b"this is not json\n")
    _commit_all(store.root, "damaged lines")
    out = _fsck_and_search_name(store, "log/2026/2026-11-30.jsonl:3: invalid UTF-8")
    assert "log/2026/2026-11-30.jsonl:4: not valid JSON" in out


def test_tree_ops_edited_into_nonsense(store):
    """A damaged op line: readers skip it with a warning naming file and line, fsck names it as damage."""
    _store_with_two_records(store)
    shard = next((store.root / "tree").rglob("*.jsonl"))
    rel = shard.relative_to(store.root).as_posix()
    for junk in ('{"format": 1, "topics": [1, 2, 3]}', "not json at all {", '{"at": "2026-11-30T10:00:00.000000Z", "op": 99}'):
        with open(shard, "a") as fh:
            fh.write(junk + "\n")
        n = len(shard.read_text().splitlines())
        _commit_all(store.root, "nonsense tree")
        with unchanged(store.root):
            proc = ct("-C", store.root, "tree", check=False)
            assert proc.returncode == 0 and f"{rel}:{n}: " in proc.stderr, proc.stderr
            fs = ct("-C", store.root, "fsck", check=False)
            assert fs.returncode == 1 and f"{rel}:{n}: " in fs.stdout, fs.stdout


def test_format1_tree_json_edited_into_nonsense(store):
    _store_with_two_records(store)
    store.git.run("rm", "-r", "-q", "tree")
    for junk in ('{"format": 1, "topics": [1, 2, 3]}', "not json at all {", '{"format": 99}'):
        (store.root / "tree.json").write_text(junk)
        _commit_all(store.root, "nonsense tree")
        with unchanged(store.root):
            proc = ct("-C", store.root, "tree", check=False)
            assert proc.returncode == 4 and "tree.json" in proc.stderr.splitlines()[0], proc.stderr
            fs = ct("-C", store.root, "fsck", check=False)
            assert fs.returncode == 1 and "tree.json" in fs.stdout


def test_write_into_a_store_with_damage_changes_only_its_own_files(store):
    """A writer meeting committed damage adds its record and touches nothing else."""
    log, recs = _store_with_two_records(store)
    p = _pack_of(store, recs[0])
    p.write_bytes(p.read_bytes()[:-3])
    _commit_all(store.root, "damage")
    before = p.read_bytes()
    ct("-C", store.root, "add", "third note", "--ts", "2026-11-30T11:00:00Z")
    changed = subprocess.run(["git", "-C", str(store.root), "diff", "--name-only", "HEAD~1", "HEAD"],
                             capture_output=True, text=True).stdout.split()
    assert p.read_bytes() == before
    assert "log/2026/2026-11-30.jsonl" in changed
    assert all(c.startswith(("log/", "packs/", "tree/")) for c in changed)
    assert not any(c.endswith(p.name) for c in changed)


# ----- secrets: refused end to end unless --allow-secrets -----------------------------------------

# Assembled at run time so this file never holds a literal that looks like a key.
_RANDOM = "q8Zr2LmX4vTn7KpW1sYd9FhB3cJg6NtA5eUo0iRk"
AWS_ID = "AKIA" + "Q7ZR2LMX4VTN7KPW"
OPENAI = "sk-" + "proj-" + _RANDOM + "_x-Y9"
GITHUB = "ghp_" + _RANDOM[:36]
PRIVATE_KEY = "-----BEGIN " + "OPENSSH PRIVATE KEY-----\n" + _RANDOM * 2 + "\n-----END OPENSSH PRIVATE KEY-----\n"


def test_ingest_refuses_keys_listing_file_and_line(store, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "setup.md").write_text(f"# Setup\n\nFirst install.\n\nexport OPENAI_API_KEY={OPENAI}\n")
    (docs / "notes.md").write_text(f"# Notes\n\n{SECRET_FREE_WORDS}\n\ntoken: {GITHUB}\n")
    with unchanged(store.root):
        proc = ct("-C", store.root, "ingest-path", docs, check=False)
    assert proc.returncode == 9, proc.stderr
    assert f"{docs / 'setup.md'}:5: openai" in proc.stderr and f"{docs / 'notes.md'}:5: github" in proc.stderr
    assert OPENAI not in proc.stderr and GITHUB not in proc.stderr  # listed, never echoed
    assert "--allow-secrets" in proc.stderr
    out = json.loads(ct("-C", store.root, "ingest-path", docs, "--allow-secrets", "--json").stdout)
    assert out["added"] >= 2 and git_clean(store.root)


def test_import_refuses_keys_unless_allowed(store, tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text(_line(id="ok-1") + _line(id="leak-1", text=f"my key is {AWS_ID} and\n{PRIVATE_KEY}"))
    with unchanged(store.root):
        proc = ct("-C", store.root, "import", "jsonl", f, check=False)
    assert proc.returncode == 9
    assert str(f) in proc.stderr and "leak-1" in proc.stderr and "line 1: aws" in proc.stderr
    assert "private-key" in proc.stderr and AWS_ID not in proc.stderr
    out = json.loads(ct("-C", store.root, "import", "jsonl", f, "--allow-secrets", "--json").stdout)
    assert out["added"] == 2 and git_clean(store.root)


def test_env_and_key_files_are_skipped_by_default(store, tmp_path):
    docs = tmp_path / "project"
    docs.mkdir()
    (docs / "README.md").write_text("# Project\n\n" + SECRET_FREE_WORDS + "\n")
    (docs / ".env").write_text(f"OPENAI_API_KEY={OPENAI}\n")
    (docs / "id_ed25519").write_text(PRIVATE_KEY)
    (docs / "server.pem").write_text(PRIVATE_KEY)
    out = json.loads(ct("-C", store.root, "ingest-path", docs, "--exts", ".md,.txt,.pem,.env,", "--json").stdout)
    assert out["added"] == 1
    sources = [json.loads(x)["source"]["path"] for x in (store.root / "log/2026").glob("*.jsonl").__next__().read_text().splitlines()]
    assert sources == ["project/README.md"]  # portable: the ingested folder's name, never an absolute path
    skipped = " ".join(out["notes"])
    assert ".env" in skipped and "server.pem" in skipped
    assert git_clean(store.root)
