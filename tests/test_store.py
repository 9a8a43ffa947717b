"""Foundation: init, add, import jsonl, ingest-path, stat, fsck — through the library and the real CLI."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from conftest import commits, ct, ct_process, git_clean


def test_init_creates_a_git_store(tmp_path):
    ct("init", tmp_path / "s", "--embedder", "hash", "--timezone", "Europe/Berlin")
    root = tmp_path / "s"
    toml = (root / "memstore.toml").read_text()
    assert (
        "format_version = 3" in toml
        and 'timezone = "Europe/Berlin"' in toml
        and "dim = 384" in toml
    )
    assert (root / ".gitignore").read_text().strip() == "/.memstore/"
    assert "merge=union" in (root / ".gitattributes").read_text()
    assert (root / ".git" / "hooks" / "post-merge").exists()
    assert len(commits(root)) == 1 and git_clean(root)


def test_outside_a_store_says_so(tmp_path):
    proc = ct("-C", tmp_path, "stat", check=False)
    assert proc.returncode == 3
    assert f'Not a memory store: {tmp_path}. Run "ct init" first.' in proc.stderr


def test_in_process_ct_answers_as_the_real_process(tmp_path):
    """The suite runs `ct` in-process (tests/conftest.py): same exit codes, stdout and stderr as `python -m memstore`."""
    for args in (
        ["-C", tmp_path, "stat"],
        ["--help"],
        ["add", "--role", "nobody", "hi"],
        ["search"],
    ):
        fast, real = (
            ct(*args, cwd=tmp_path, check=False),
            ct_process(*args, cwd=tmp_path, check=False),
        )
        assert (fast.returncode, fast.stdout, fast.stderr) == (
            real.returncode,
            real.stdout,
            real.stderr,
        ), args
        assert fast.args == real.args


def test_store_found_by_env_and_by_searching_upward(tmp_path, store):
    sub = store.root / "log"
    sub.mkdir(exist_ok=True)
    assert ct("stat", "--json", cwd=sub).returncode == 0
    assert (
        json.loads(
            ct("stat", "--json", cwd=tmp_path, env={"MEMSTORE_DIR": str(store.root)}).stdout
        )["records"]
        == 0
    )


def test_git_runs_on_the_store_not_an_enclosing_repo(tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    ct("init", outer / "mem", "--embedder", "hash")
    ct("-C", outer / "mem", "add", "hello there")
    assert len(commits(outer / "mem")) == 2
    assert commits(outer) == []


def test_add_writes_record_pack_and_one_commit(store):
    res = store.add(
        "We decided the budget is 40k.",
        role="assistant",
        session="plan",
        ts="2026-03-03T21:15:00+01:00",
    )
    assert res.commit and len(res.added) == 1
    rec = res.added[0]
    assert list(rec)[:7] == ["ts", "actor", "role", "type", "text", "model", "session"]
    assert rec["ts"] == "2026-03-03T20:15:00.000000Z"
    log = store.root / "log/2026/2026-03-03.jsonl"
    line = json.loads(log.read_text().splitlines()[0])
    assert line["id"] == rec["id"] and "seg" not in line and line["hash"] == rec["hash"]
    packs = sorted((store.root / "packs/2026/2026-03-03").iterdir())
    assert (
        len(packs) == 1
        and packs[0].name == hashlib.sha256(packs[0].read_bytes()).hexdigest() + ".is"
    )
    assert (
        not (store.root / "segments").exists()
        and not (store.root / ".memstore/writer.json").exists()
    )
    assert git_clean(store.root)
    assert commits(store.root)[0].startswith("Add assistant turn: We decided the budget")


def test_day_file_uses_store_timezone(tmp_path):
    from conftest import make_store

    st = make_store(tmp_path / "tokyo", timezone="Asia/Tokyo")
    st.add("late night note", ts="2026-03-03T16:30:00Z")  # 01:30 on the 4th in Tokyo
    assert (st.root / "log/2026/2026-03-04.jsonl").exists()


def test_import_jsonl_keeps_ids_and_is_idempotent(tmp_path, store):
    f = tmp_path / "turns.jsonl"
    f.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {
                    "ts": "2026-01-02T10:00:00Z",
                    "role": "user",
                    "text": "first",
                    "id": "keep-me-1",
                    "mood": "calm",
                },
                {"ts": "2026-01-02T10:01:00Z", "role": "ai", "text": "second", "id": "keep-me-2"},
                {"ts": "2026-01-02T10:02:00Z", "role": "user", "text": "third, no id"},
            ]
        )
        + "\n"
    )
    out = json.loads(ct("-C", store.root, "import", "jsonl", f, "--json").stdout)
    assert out["added"] == 3 and out["ids"][:2] == ["keep-me-1", "keep-me-2"]
    again = json.loads(ct("-C", store.root, "import", "jsonl", f, "--json").stdout)
    assert again["added"] == 0 and again["commit"] is None
    lines = [
        json.loads(x) for x in (store.root / "log/2026/2026-01-02.jsonl").read_text().splitlines()
    ]
    assert lines[0]["meta"] == {"mood": "calm"} and lines[1]["role"] == "assistant"
    assert ct("-C", store.root, "fsck").returncode == 0
    assert git_clean(store.root)


def test_import_jsonl_bad_line_names_file_and_line_and_writes_nothing(tmp_path, store):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"ts": "2026-01-02T10:00:00Z", "role": "user", "text": "ok"}\n{"ts": oops}\n')
    proc = ct("-C", store.root, "import", "jsonl", f, check=False)
    assert proc.returncode == 4 and f"{f}:2" in proc.stderr
    assert len(commits(store.root)) == 1 and git_clean(store.root)


def test_ingest_path_twice_commits_once(tmp_path, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(
        "# Title\n\nSome words about budgets.\n\n## Part\n\nMore words here.\n"
    )
    (docs / "b.txt").write_text("Plain text paragraph one.\n\nParagraph two.\n")
    ct("-C", store.root, "ingest-path", docs)
    n = len(commits(store.root))
    ct("-C", store.root, "ingest-path", docs)
    assert len(commits(store.root)) == n and git_clean(store.root)
    assert commits(store.root)[0].startswith("Ingest 2 files")


def test_changed_file_supersedes_old_chunks(tmp_path, store):
    docs = tmp_path / "docs"
    docs.mkdir()
    f = docs / "notes.md"
    f.write_text("# Notes\n\nThe launch is on Monday.\n")
    ct("-C", store.root, "ingest-path", docs)
    f.write_text("# Notes\n\nThe launch moved to Thursday.\n")
    ct("-C", store.root, "ingest-path", docs)
    hits = json.loads(ct("-C", store.root, "search", "launch", "--mode", "exact", "--json").stdout)[
        "hits"
    ]
    texts = " ".join(h["text"] for h in hits)
    assert "Thursday" in texts and "Monday" not in texts


def test_fsck_detects_flipped_byte_and_truncated_line(store):
    store.add("first turn", ts="2026-02-01T10:00:00Z")
    store.add("second turn", ts="2026-02-01T11:00:00Z")
    assert ct("-C", store.root, "fsck").returncode == 0
    pack = sorted((store.root / "packs").rglob("*.is"))[0]
    data = bytearray(pack.read_bytes())
    data[-1] ^= 0x01
    pack.write_bytes(bytes(data))
    proc = ct("-C", store.root, "fsck", check=False)
    assert proc.returncode == 1 and pack.name in proc.stdout
    subprocess.run(["git", "-C", str(store.root), "checkout", "--", "."], check=True)
    log = store.root / "log/2026/2026-02-01.jsonl"
    log.write_bytes(log.read_bytes()[:-10])
    proc = ct("-C", store.root, "fsck", check=False)
    assert proc.returncode == 1 and "2026-02-01.jsonl" in proc.stdout


def test_stat_counts(store):
    store.add("one", ts="2026-02-01T10:00:00Z")
    store.add("two", ts="2026-02-02T10:00:00Z")
    info = json.loads(ct("-C", store.root, "stat", "--json").stdout)
    assert (
        info["records"] == 2 and info["days"] == 2 and info["packs"] == 2 and info["segments"] == 0
    )


def test_version_mismatch_is_refused(store):
    toml = store.root / "memstore.toml"
    toml.write_text(toml.read_text().replace("format_version = 3", "format_version = 4"))
    proc = ct("-C", store.root, "stat", check=False)
    assert proc.returncode == 5 and "format_version 4 is not supported" in proc.stderr


def test_other_embedder_names_reembed(store):
    from memstore.errors import EmbedderMismatch
    from memstore.store import Store

    with pytest.raises(EmbedderMismatch, match="ct .*reembed"):
        Store(store.root, embedder_override="minilm")


def test_reembed_rewrites_vectors_in_one_commit(store):
    store.add("alpha beta", ts="2026-02-01T10:00:00Z")
    proc = ct("-C", store.root, "reembed", "--embedder", "hash", "--dim", "64")
    assert "Re-embedded 1 records" in proc.stderr
    assert "dim = 64" in (store.root / "memstore.toml").read_text()
    assert ct("-C", store.root, "fsck").returncode == 0
    hits = json.loads(ct("-C", store.root, "search", "alpha", "--mode", "vector", "--json").stdout)[
        "hits"
    ]
    assert hits and hits[0]["text"] == "alpha beta"
    assert git_clean(store.root)


def test_help_is_light():
    code = (
        "import sys, time; t=time.time(); from memstore.cli import cli\n"
        "try:\n    cli.main(['--help'], standalone_mode=False)\nexcept SystemExit: pass\n"
        "heavy=[m for m in ('torch','sentence_transformers','onnxruntime','numpy','git','sqlite_utils','transformers') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert out.strip().endswith("[]"), out


def test_a_store_this_user_cannot_write_is_still_searched(tmp_path, monkeypatch):
    """A read-only mount or another user's store: the disposable index goes to this user's cache
    (named after the store's path) instead of `.memstore/`, and reads work; a write says why not."""
    import os
    import shutil

    from memstore.format import layout
    from memstore.store import Store

    st = Store.init(tmp_path / "s", embedder="hash", timezone="UTC")
    ct("-C", st.root, "add", "the shared calendar lives on the team drive")
    shutil.rmtree(st.root / ".memstore")
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(layout, "_can_write", lambda path: False)
    hits = json.loads(ct("-C", st.root, "search", "team drive calendar", "--json").stdout)["hits"]
    assert [h["text"] for h in hits][:1] == ["the shared calendar lives on the team drive"]
    assert "the shared calendar" in ct("-C", st.root, "where").stdout
    assert not (st.root / ".memstore").exists(), "nothing was written into the store"
    [folder] = (cache / "memstore" / "read-only-stores").iterdir()
    assert folder.name.startswith("s-") and (folder / "index.db").exists()
    assert git_clean(st.root)
    if os.geteuid() != 0:  # permission bits bind everyone but root: the real thing, not a stand-in
        monkeypatch.undo()
        monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
        for p in [st.root, *st.root.rglob("*")]:
            if ".git" not in p.parts:
                p.chmod(p.stat().st_mode & ~0o222)
        try:
            proc = ct_process("-C", st.root, "search", "team drive", "--json")
            assert json.loads(proc.stdout)["hits"], proc.stderr
            proc = ct_process("-C", st.root, "add", "cannot be written", check=False)
            assert (
                proc.returncode != 0 and "Error:" in proc.stderr and "Traceback" not in proc.stderr
            ), proc.stderr
        finally:
            for p in [st.root, *st.root.rglob("*")]:
                p.chmod(p.stat().st_mode | 0o200)


def test_without_git_a_write_says_so_and_a_search_still_answers(tmp_path):
    """No git on the PATH: a write (or init) is refused with one sentence saying what is missing and
    leaves nothing behind (no journal, no empty folder); reading needs no git and still works."""
    from memstore.store import Store

    st = Store.init(tmp_path / "s", embedder="hash", timezone="UTC")
    ct("-C", st.root, "add", "the spare key is under the blue pot")
    head = commits(st.root)
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": str(empty)}
    proc = ct_process("-C", st.root, "add", "this needs git", env=env, check=False)
    assert (
        proc.returncode == 8
        and "git is not installed" in proc.stderr
        and "Traceback" not in proc.stderr
    ), proc.stderr
    assert not (st.root / ".memstore" / "write-journal.json").exists()
    hits = json.loads(ct_process("-C", st.root, "search", "spare key", "--json", env=env).stdout)[
        "hits"
    ]
    assert hits and hits[0]["text"] == "the spare key is under the blue pot"
    proc = ct_process("init", tmp_path / "new", "--timezone", "UTC", env=env, check=False)
    assert proc.returncode == 8 and "git is not installed" in proc.stderr, proc.stderr
    assert not (tmp_path / "new").exists()
    assert commits(st.root) == head and git_clean(st.root)
