"""What an import reads: regular files only, and in a folder the user named, nothing that a link
takes outside it (memstore/ingest/importers.py `not_importable`). A FIFO given or found used to
hang `ct import` (trace, claude-code), /dev/zero to fill memory, and claude-code and
lossless-memory imports followed links out of the folder without a word."""

from __future__ import annotations

import json
import os

import pytest

from conftest import commits, ct, log_records, make_store
from test_import_chatgpt_hostile import _ct_bounded

ROW = {
    "type": "user",
    "sessionId": "s1",
    "timestamp": "2026-11-02T10:00:00.000Z",
    "message": {"role": "user", "content": "a turn inside the folder"},
    "uuid": "u1",
}


@pytest.mark.parametrize("kind", ["trace", "jsonl", "claude-code", "chatgpt"])
def test_a_pipe_or_device_given_is_refused_naming_it(tmp_path, kind):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    fifo = tmp_path / "export.jsonl"
    os.mkfifo(fifo)
    for source in (fifo, "/dev/zero"):
        out = _ct_bounded("-C", st.root, "import", kind, source)
        assert out.returncode == 4, (kind, source, out.stderr)
        assert "not a regular file" in out.stderr and "Traceback" not in out.stderr
    assert commits(st.root) == before


def test_a_folder_s_pipes_and_links_out_are_skipped_and_named(tmp_path):
    st = make_store(tmp_path / "s")
    folder, outside = tmp_path / "projects", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    (folder / "in.jsonl").write_text(json.dumps(ROW) + "\n")
    secret = {**ROW, "uuid": "u2", "message": {"role": "user", "content": "from outside"}}
    (outside / "s.jsonl").write_text(json.dumps(secret) + "\n")
    os.symlink(outside / "s.jsonl", folder / "out.jsonl")
    os.mkfifo(folder / "pipe.jsonl")
    os.symlink("/dev/zero", folder / "zero.jsonl")
    out = _ct_bounded("-C", st.root, "import", "claude-code", folder)
    assert out.returncode == 0, out.stderr
    assert f"out.jsonl: a link to {outside / 's.jsonl'}" in out.stderr
    assert "pipe.jsonl: not a regular file" in out.stderr
    assert "zero.jsonl: not a regular file" in out.stderr
    assert [r["text"] for r in log_records(st.root)] == ["a turn inside the folder"]


def test_lossless_memory_corpus_linked_outside_is_not_followed(tmp_path):
    st = make_store(tmp_path / "s")
    data, outside = tmp_path / "data", tmp_path / "elsewhere"
    (data / "main").mkdir(parents=True)
    (data / "corpus").mkdir()
    outside.mkdir()
    line = {"ts": "2026-11-02T10:00:00Z", "role": "user", "text": "kept in main"}
    (data / "main" / "2026-11-02.jsonl").write_text(json.dumps(line) + "\n")
    other = {**line, "text": "a file outside the data folder"}
    (outside / "c.jsonl").write_text(json.dumps(other) + "\n")
    os.symlink(outside, data / "corpus" / "c1")
    out = ct("-C", st.root, "import", "lossless-memory", data)
    assert "not followed" in out.stderr
    assert [r["text"] for r in log_records(st.root)] == ["kept in main"]
