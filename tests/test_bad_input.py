"""Bad input: every malformed, corrupt, huge or hostile input gives a clear error naming the file and
changes nothing (git stays clean, no commit is made); damage inside a store is named by `ct fsck`."""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import contextmanager

import pytest

from conftest import commits, ct, git_clean

SECRET_FREE_WORDS = "The train to Kyoto leaves at nine; the hotel is by the river."


@contextmanager
def unchanged(root):
    """Assert that the block leaves the store's history and working tree exactly as they were."""
    head = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    n = len(commits(root))
    yield
    assert (
        subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout
        == head
    )
    assert len(commits(root)) == n
    assert git_clean(root)


def _line(**kw) -> str:
    rec = {"ts": "2026-11-30T10:00:00Z", "role": "user", "text": SECRET_FREE_WORDS}
    rec.update(kw)
    return json.dumps(rec, ensure_ascii=False) + "\n"


# ----- input files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, where, words",
    [
        (_line() + '{"ts": "2026-11-30T10:01:00Z", "role": broken\n', ":2:", "not valid JSON"),
        (_line() + "[1, 2, 3]\n", ":2:", "object"),
        (_line(text=42), ":1:", "text"),
        (_line(role="wizard"), ":1:", "role"),
        (_line(ts="the day after never"), ":1:", "ts"),
        (
            _line().encode() + b'{"ts":"2026-11-30T10:00:00Z","role":"user","text":"caf\xe9"}\n',
            ":2:",
            "UTF-8",
        ),
        (
            '{"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "' + "x" * 3_000_000 + "\n",
            ":1:",
            "JSON",
        ),
    ],
)
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


def test_every_bad_line_of_a_jsonl_file_is_named_in_one_run(store, tmp_path):
    """One run names every line that refuses the file (read errors and bad fields alike, in line
    order), so a user fixes them all at once; 20 are listed, the rest counted."""
    f = tmp_path / "in.jsonl"
    bad = [_line(ts="never"), "not json\n", _line(role="wizard")] + [
        _line(text=i) for i in range(25)
    ]
    f.write_text(_line() + "".join(bad))
    with unchanged(store.root):
        proc = ct("-C", store.root, "import", "jsonl", f, check=False)
    assert proc.returncode == 4, proc.stderr
    err = proc.stderr
    assert f"{f}:2: field 'ts'" in err.splitlines()[0]
    assert "27 more lines cannot be imported either:" in err
    assert f"  {f}:3: not valid JSON" in err and f"  {f}:4: field 'role'" in err
    assert f"  {f}:22: " in err and f"{f}:23: " not in err and "… and 7 more" in err
    assert err.rstrip().endswith("Nothing was imported.")


def test_large_valid_line_is_kept_verbatim(store, tmp_path):
    text = ("Section %d: " + SECRET_FREE_WORDS + " ") * 1 + "".join(
        f"paragraph {i} of the long note. " for i in range(3000)
    )
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
    proc = subprocess.run(
        [
            *__import__("conftest").CT,
            "-C",
            str(store.root),
            "ingest-path",
            str(folder),
            "--follow-symlinks",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
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
    subprocess.run(
        ["git", "-C", str(root), "commit", "-qm", msg],
        check=True,
        env={**os.environ, "MEMSTORE_COMMITTING": "1"},
    )


def _pack_of(store, rec):
    """The pack that holds a record's vector (found by day and id, as readers find it)."""
    from memstore.format import pack as packfmt

    for p in packfmt.pack_files(packfmt.day_dir(store.root, rec["ts"][:10])):
        if packfmt.read(p).vectors(packfmt.ring([rec])):
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
    key = packfmt.ring([recs[0]])[0][1]
    w.add_vector(recs[0]["id"], key, recs[0]["hash"], np.ones(3, np.float32), "float32", 0)
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
        fh.write(
            b'{"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "caf\xe9 cr\xe8me", "id": "x"}\n'
        )
        fh.write(b"this is not json\n")
    _commit_all(store.root, "damaged lines")
    out = _fsck_and_search_name(store, "log/2026/2026-11-30.jsonl:3: invalid UTF-8")
    assert "log/2026/2026-11-30.jsonl:4: not valid JSON" in out


def test_tree_ops_edited_into_nonsense(store):
    """A damaged op line: readers skip it with a warning naming file and line, fsck names it as damage."""
    _store_with_two_records(store)
    shard = next((store.root / "tree").rglob("*.jsonl"))
    rel = shard.relative_to(store.root).as_posix()
    for junk in (
        '{"format": 1, "topics": [1, 2, 3]}',
        "not json at all {",
        '{"at": "2026-11-30T10:00:00.000000Z", "op": 99}',
    ):
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
    changed = subprocess.run(
        ["git", "-C", str(store.root), "diff", "--name-only", "HEAD~1", "HEAD"],
        capture_output=True,
        text=True,
    ).stdout.split()
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
PRIVATE_KEY = (
    "-----BEGIN "
    + "OPENSSH PRIVATE KEY-----\n"
    + _RANDOM * 2
    + "\n-----END OPENSSH PRIVATE KEY-----\n"
)


def test_ingest_refuses_keys_listing_file_and_line(store, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "setup.md").write_text(f"# Setup\n\nFirst install.\n\nexport OPENAI_API_KEY={OPENAI}\n")
    (docs / "notes.md").write_text(f"# Notes\n\n{SECRET_FREE_WORDS}\n\ntoken: {GITHUB}\n")
    with unchanged(store.root):
        proc = ct("-C", store.root, "ingest-path", docs, check=False)
    assert proc.returncode == 9, proc.stderr
    assert (
        f"{docs / 'setup.md'}:5: openai" in proc.stderr
        and f"{docs / 'notes.md'}:5: github" in proc.stderr
    )
    assert OPENAI not in proc.stderr and GITHUB not in proc.stderr  # listed, never echoed
    assert "--allow-secrets" in proc.stderr
    out = json.loads(ct("-C", store.root, "ingest-path", docs, "--allow-secrets", "--json").stdout)
    assert out["added"] >= 2 and git_clean(store.root)


def test_import_refuses_keys_unless_allowed(store, tmp_path):
    f = tmp_path / "chat.jsonl"
    f.write_text(
        _line(id="ok-1") + _line(id="leak-1", text=f"my key is {AWS_ID} and\n{PRIVATE_KEY}")
    )
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
    out = json.loads(
        ct("-C", store.root, "ingest-path", docs, "--exts", ".md,.txt,.pem,.env,", "--json").stdout
    )
    assert out["added"] == 1
    sources = [
        json.loads(x)["source"]["path"]
        for x in (store.root / "log/2026").glob("*.jsonl").__next__().read_text().splitlines()
    ]
    assert sources == [
        "project/README.md"
    ]  # portable: the ingested folder's name, never an absolute path
    skipped = " ".join(out["notes"])
    assert ".env" in skipped and "server.pem" in skipped
    assert git_clean(store.root)


# ----- issue 13: bad input in real files never blocks good input --------------------------------

SESSION_A = "3b1c2d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d"
SESSION_B = "9a8b7c6d-5e4f-4301-b2a3-c4d5e6f7a8b9"


def _cc_row(session, uuid, parent, kind, content, ts, sidechain=False, **extra):
    """A Claude Code transcript row shaped like the real ones (cwd, version, branch, sidechain flag)."""
    return {
        "parentUuid": parent,
        "isSidechain": sidechain,
        "userType": "external",
        "cwd": "/home/ana/src/app",
        "sessionId": session,
        "version": "1.0.98",
        "gitBranch": "main",
        "type": kind,
        "message": {
            "role": kind,
            "content": content,
            **({"model": "claude-opus-4-1", "id": f"msg_{uuid}"} if kind == "assistant" else {}),
        },
        "uuid": uuid,
        "timestamp": ts,
        **extra,
    }


def _claude_export(folder):
    """Two sessions: A has a tool result with a NUL byte, a sidechain and half an emoji; B is clean."""
    folder.mkdir(parents=True, exist_ok=True)
    a = [
        _cc_row(
            SESSION_A,
            "a1",
            None,
            "user",
            "List the files in the build folder please",
            "2026-03-02T09:00:00.000Z",
        ),
        _cc_row(
            SESSION_A,
            "a2",
            "a1",
            "assistant",
            [
                {"type": "text", "text": "Listing them now."},
                {
                    "type": "tool_use",
                    "id": "toolu_01",
                    "name": "Bash",
                    "input": {"command": "ls build"},
                },
            ],
            "2026-03-02T09:00:05.000Z",
        ),
        _cc_row(
            SESSION_A,
            "a3",
            "a2",
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01",
                    "content": "app.bin\u0000\u0000 header\nREADME",
                }
            ],
            "2026-03-02T09:00:06.000Z",
        ),
        _cc_row(
            SESSION_A,
            "a4",
            "a3",
            "user",
            "Summarise this ticket for me",
            "2026-03-02T09:01:00.000Z",
            sidechain=True,
            agentId="agent-7",
        ),
        _cc_row(
            SESSION_A,
            "a5",
            "a4",
            "assistant",
            [{"type": "text", "text": "Done \ud83d (cut emoji)"}],
            "2026-03-02T09:01:05.000Z",
            sidechain=True,
        ),
        _cc_row(
            SESSION_A,
            "a6",
            "a3",
            "assistant",
            [{"type": "text", "text": "The build folder holds app.bin and a README."}],
            "2026-03-02T09:01:10.000Z",
        ),
    ]
    b = [
        _cc_row(
            SESSION_B,
            "b1",
            None,
            "user",
            "Which port does the staging server use",
            "2026-03-03T10:00:00.000Z",
        ),
        _cc_row(
            SESSION_B,
            "b2",
            "b1",
            "assistant",
            [{"type": "text", "text": "Staging listens on port 8443."}],
            "2026-03-03T10:00:04.000Z",
        ),
    ]
    for sid, rows in ((SESSION_A, a), (SESSION_B, b)):
        (folder / f"{sid}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows)
        )  # \u escapes, as Claude Code writes
    return folder


def _log_records(root):
    return [
        json.loads(line)
        for p in sorted((root / "log").rglob("*.jsonl"))
        for line in p.read_text().splitlines()
    ]


def test_claude_code_export_with_nul_and_half_emoji_imports_the_rest(store, tmp_path):
    folder = _claude_export(tmp_path / "projects" / "-home-ana-src-app")
    proc = ct("-C", store.root, "import", "claude-code", tmp_path / "projects")
    a = folder / f"{SESSION_A}.jsonl"
    assert f"skipped {a}:5: field 'text' holds a lone UTF-16 surrogate" in proc.stderr, proc.stderr
    recs = _log_records(store.root)
    texts = [r["text"] for r in recs]
    assert "app.bin\x00\x00 header\nREADME" in texts, "NUL kept exactly"
    assert "Staging listens on port 8443." in texts and "Summarise this ticket for me" in texts
    assert len(recs) == 8  # 9 blocks, the half emoji one reported and left out
    raw = "".join(p.read_text() for p in (store.root / "log").rglob("*.jsonl"))
    assert "\\u0000\\u0000 header" in raw, "escaped in the log"
    hit = json.loads(
        ct("-C", store.root, "search", "--json", "--mode", "exact", "app.bin header").stdout
    )["hits"][0]
    assert hit["text"] == "app.bin\x00\x00 header\nREADME", "exact in search output"
    assert ct("-C", store.root, "fsck").returncode == 0 and git_clean(store.root)


def test_watch_keeps_importing_a_folder_with_a_nul_in_one_session(store, tmp_path):
    folder = _claude_export(tmp_path / "projects" / "-home-ana-src-app")
    ct("-C", store.root, "watch", "--once", tmp_path / "projects")
    with open(folder / f"{SESSION_B}.jsonl", "a") as f:
        f.write(
            json.dumps(
                _cc_row(
                    SESSION_B, "b3", "b2", "user", "And production?", "2026-03-03T10:01:00.000Z"
                )
            )
            + "\n"
        )
    proc = ct("-C", store.root, "watch", "--once", tmp_path / "projects")
    assert "added 1 records" in proc.stderr, proc.stderr
    assert "And production?" in [r["text"] for r in _log_records(store.root)]


def _chatgpt_conv(cid, title, t0, turns, fork_at=None):
    """A conversations.json entry: a mapping tree from a null root; an optional edited fork at `fork_at`."""
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for i, (role, text) in enumerate(turns):
        nid = f"{cid}-{i}"
        mapping[nid] = {
            "id": nid,
            "parent": parent,
            "children": [],
            "message": {
                "id": nid,
                "author": {"role": role, "name": None, "metadata": {}},
                "create_time": t0 + 10 * i,
                "update_time": None,
                "content": {"content_type": "text", "parts": [text]},
                "status": "finished_successfully",
                "end_turn": None,
                "weight": 1.0,
                "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {},
                "recipient": "all",
            },
        }
        mapping[parent]["children"].append(nid)
        if fork_at == i:  # an abandoned sibling (the user edited and re-asked)
            old = f"{cid}-old"
            mapping[old] = {
                "id": old,
                "parent": parent,
                "children": [],
                "message": {
                    "id": old,
                    "author": {"role": role},
                    "create_time": t0 + 10 * i - 5,
                    "content": {"content_type": "text", "parts": ["an abandoned branch"]},
                    "metadata": {},
                    "recipient": "all",
                },
            }
            mapping[parent]["children"].insert(0, old)
        parent = nid
    return {
        "title": title,
        "create_time": t0,
        "update_time": t0 + 100,
        "conversation_id": cid,
        "id": cid,
        "current_node": parent,
        "mapping": mapping,
        "default_model_slug": "gpt-4o",
        "is_archived": False,
    }


def test_chatgpt_same_title_conversations_stay_separate_sessions(store, tmp_path):
    f = tmp_path / "conversations.json"
    f.write_text(
        json.dumps(
            [
                _chatgpt_conv(
                    "c-aaa",
                    "New chat",
                    1772431200,
                    [
                        ("user", "Plan a birthday party for Mia"),
                        ("assistant", "A picnic in the park."),
                        ("user", "With cake?"),
                        ("assistant", "Yes, a lemon cake."),
                    ],
                    fork_at=1,
                ),
                _chatgpt_conv(
                    "c-bbb",
                    "New chat",
                    1772431205,
                    [("user", "Fix my bike chain"), ("assistant", "Oil it and check the tension.")],
                ),
            ]
        )
    )
    ct("-C", store.root, "import", "chatgpt", f)
    recs = _log_records(store.root)
    assert "an abandoned branch" not in [r["text"] for r in recs]
    sessions = {r["text"]: r["session"] for r in recs}
    assert (
        sessions["Plan a birthday party for Mia"] == "c-aaa"
        and sessions["Fix my bike chain"] == "c-bbb"
    )
    assert {r["meta"]["conversation_title"] for r in recs} == {"New chat"}
    out = json.loads(
        ct("-C", store.root, "recall", "--json", "--around", "3", "birthday party").stdout
    )
    around = json.dumps(out)
    assert "bike chain" not in around and "Oil it" not in around, (
        "context comes from the same conversation only"
    )


def test_empty_turn_is_skipped_with_a_note_and_add_refuses_empty(store, tmp_path):
    f = tmp_path / "lme.jsonl"
    rows = [
        _line(
            ts=f"2026-03-01T{10 + i // 60:02d}:{i % 60:02d}:00Z", text=f"turn {i} about the orchard"
        )
        for i in range(1, 500)
    ]
    rows.insert(250, _line(ts="2026-03-01T20:00:00Z", text=""))
    f.write_text("".join(rows))
    proc = ct("-C", store.root, "import", "jsonl", f)
    assert f"{f}:251: field 'text' is empty: an empty turn, skipped" in proc.stderr
    assert "added 499 records" in proc.stderr
    with unchanged(store.root):
        for text in ("", "   "):
            proc = ct("-C", store.root, "add", text, check=False)
            assert (
                proc.returncode == 2
                and "empty turn" in proc.stderr
                and "Traceback" not in proc.stderr
            )


def test_timestamps_out_of_range_and_type_doc_are_refused_clearly(store):
    with unchanged(store.root):
        for ts in ("0999-01-01T00:00:00Z", "9999-12-31T23:00:00Z", "10000-01-01"):
            proc = ct("-C", store.root, "add", "hello there", "--ts", ts, check=False)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
            assert "ts" in proc.stderr
        proc = ct("-C", store.root, "add", "--type", "doc", "hello there", check=False)
        assert proc.returncode == 2 and "text, action or meta" in proc.stderr
    ct(
        "-C", store.root, "add", "hello there", "--ts", "9998-06-01T00:00:00Z"
    )  # the last full year is fine


@pytest.mark.parametrize("mode", ["hybrid", "exact", "vector"])
@pytest.mark.parametrize("query", ["*", "'", '"AND OR NOT ('])
def test_queries_without_words_find_nothing_with_a_note(store, mode, query):
    store.add("The orchard needs pruning in March.")
    out = json.loads(ct("-C", store.root, "search", "--json", "--mode", mode, query).stdout)
    assert out["hits"] == [] and "no searchable words" in out["note"]
    proc = ct("-C", store.root, "search", "--mode", mode, query)
    assert "No matches: the query has no searchable words" in proc.stderr


def test_query_starting_with_a_dash(store):
    store.add("Use the -foo flag to force a rebuild.")
    for args in (["-foo"], ["--", "-foo"]):
        out = json.loads(ct("-C", store.root, "search", "--json", "--mode", "exact", *args).stdout)
        assert out["hits"] and "-foo flag" in out["hits"][0]["text"]


def test_supersedes_hides_the_old_record_from_context_and_tree(store, tmp_path):
    f = tmp_path / "a.jsonl"
    f.write_text(
        _line(id="a1", session="s", text="the launch code word is pineapple")
        + _line(
            id="a2", session="s", ts="2026-11-30T10:05:00Z", text="we should plan the garden beds"
        )
    )
    ct("-C", store.root, "import", "jsonl", f)
    assert "pineapple" in ct("-C", store.root, "tree").stdout
    # a correction of a committed record is the store's own write (an imported file's
    # `supersedes` of it stays under meta: tests/test_import_owned_fields.py)
    fix = {"id": "c1", "session": "s", "ts": "2026-11-30T11:00:00Z", "role": "user"}
    fix.update(type="meta", text="correction", supersedes=["a1"])
    store.write([store.normalize(fix)], "Correct a1")
    assert "pineapple" not in ct("-C", store.root, "tree").stdout
    assert "pineapple" not in ct("-C", store.root, "context", "launch code word").stdout
    assert git_clean(store.root)


def test_watch_detects_plain_jsonl_and_reports_unreadable_lines(store, tmp_path):
    f = tmp_path / "plain.jsonl"
    f.write_text(
        _line(text="first plain line about tulips")
        + "{not json\n"
        + _line(text="second line about roses")
    )
    proc = ct("-C", store.root, "watch", "--once", f, check=False)
    assert f"{f}:2" in proc.stderr and "not valid JSON" in proc.stderr, proc.stderr
    assert "no complete lines" not in proc.stderr
    g = tmp_path / "good.jsonl"
    g.write_text(_line(text="a clean plain log about lilies"))
    proc = ct("-C", store.root, "watch", "--once", g)
    assert "added 1 records" in proc.stderr
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"hello": "world"}\n')
    proc = ct("-C", store.root, "watch", "--once", odd, check=False)
    assert f"{odd}:1" in proc.stderr and "pass --kind" in proc.stderr


def test_log_counts_records_a_merge_brought_in(tmp_path):
    from conftest import make_store

    a = make_store(tmp_path / "a")
    a.add("first thought on the roadmap")
    b_root = tmp_path / "b"
    subprocess.run(["git", "clone", "-q", str(a.root), str(b_root)], check=True)
    subprocess.run(["git", "-C", str(b_root), "config", "user.email", "t@example.org"], check=True)
    subprocess.run(["git", "-C", str(b_root), "config", "user.name", "t"], check=True)
    ct("-C", b_root, "add", "an idea from the laptop")
    ct("-C", b_root, "add", "another idea from the laptop")
    a.add("a thought on the desktop")
    subprocess.run(
        ["git", "-C", str(a.root), "pull", "-q", "--no-rebase", "--no-edit", str(b_root), "HEAD"],
        check=True,
        capture_output=True,
    )
    first = ct("-C", a.root, "log", "-n", "1").stdout.splitlines()[0]
    assert "Merge" in first and "records +2" in first, first


def test_readme_quick_start_lines_run_as_copied():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    assert "or: cd" not in block, "a copied `cd` would break the relative paths on the next lines"


@pytest.mark.parametrize("where", ["day log", "search index"])
def test_a_full_disk_gets_a_clear_error_and_the_next_write_cleans_up(store, monkeypatch, where):
    """The machine refusing a write (a full disk) is an error with a sentence, not a traceback;
    nothing of the write is committed, and the next write rolls back what it left."""
    import errno
    from memstore.sqlitedb import sqlite3

    from memstore.format import log as logfmt
    from memstore.index import build

    ct("-C", store.root, "add", "the first note")
    before = commits(store.root)
    if where == "day log":
        real = logfmt.append_lines

        def full(path, payload, fsync=True):
            real(
                path, payload[: len(payload) // 2], fsync
            )  # half a line got out before the disk filled
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

        monkeypatch.setattr(logfmt, "append_lines", full)
    else:

        def full(self, *args, **kwargs):
            raise sqlite3.OperationalError("database or disk is full")

        monkeypatch.setattr(build.Index, "update", full)
    proc = ct("-C", store.root, "add", "a note that does not fit", check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("Error: the disk is full") and "Traceback" not in proc.stderr, (
        proc.stderr
    )
    assert "ct fsck --repair" in proc.stderr
    assert commits(store.root) == before
    monkeypatch.undo()
    ct("-C", store.root, "add", "a note once there is room")
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["warnings"] == []
    assert git_clean(store.root) and len(commits(store.root)) == len(before) + 1


@pytest.mark.parametrize(
    "args, words",
    [
        (["--timezone", "Not/AZone"], "unknown timezone 'Not/AZone'"),
        (["--embedder", "bogus"], "unknown embedder 'bogus': known are hash, minilm, openai"),
        (["--embedder", "hash", "--dim", "0"], "--dim must be a whole number of 1 or more, not 0"),
        (
            ["--embedder", "hash", "--dim", "-5"],
            "--dim must be a whole number of 1 or more, not -5",
        ),
    ],
)
def test_init_and_reembed_refuse_bad_settings_in_one_line(tmp_path, store, args, words):
    """A bad --timezone, --embedder or --dim is a usage error (exit 2, one line, no traceback) that
    makes no folder; reembed refuses the same embedder and size mistakes with the store unchanged."""
    made = ct("init", tmp_path / "new", *args, check=False)
    assert made.returncode == 2 and words in made.stderr and "Traceback" not in made.stderr, (
        made.stderr
    )
    assert not (tmp_path / "new").exists()
    if "--timezone" not in args:
        with unchanged(store.root):
            again = ct(
                "-C",
                store.root,
                "reembed",
                *args[2:] if args[0] == "--embedder" and len(args) > 2 else args,
                check=False,
            )
            assert (
                again.returncode == 2
                and words.split(":")[0] in again.stderr
                and "Traceback" not in again.stderr
            )
