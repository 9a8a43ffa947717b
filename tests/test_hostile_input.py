"""Hostile input never gives a traceback (issue 26): every importer, walk and `ct add` meets JSON nested
100k deep, 5,000-digit numbers, lone surrogates in any field, times out of any calendar, cut-off
last lines, non-UTF-8 file names and links to `/`, and answers with a one-line error naming the file
and line (exit 4, nothing changed) or imports the good items and names each bad one."""

from __future__ import annotations

import json
import os
import struct
import subprocess

import pytest

from conftest import commits, ct, git_clean

GOOD = {"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "The train to Kyoto leaves at nine."}
DEEP = "[" * 100_000 + "]" * 100_000
BIG_INT = "9" * 5000


def _line(**kw) -> str:
    return json.dumps({**GOOD, **kw}, ensure_ascii=True) + "\n"  # \u escapes carry lone surrogates


def _head(root) -> tuple[str, int]:
    sha = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout
    return sha, len(commits(root))


def _log_lines(root) -> list[bytes]:
    return [
        ln for p in sorted((root / "log").rglob("*.jsonl")) for ln in p.read_bytes().splitlines()
    ]


def _texts(root) -> list[str]:
    return sorted(json.loads(ln)["text"] for ln in _log_lines(root))


def _refused(proc, root, before, where: str, words: str = ""):
    """Exit 4, a first line naming `where` (and saying `words`), no traceback, the store exactly
    as it was."""
    assert proc.returncode == 4, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert where in first and words in first, proc.stderr
    assert _head(root) == before and git_clean(root)


# ----- JSON the parser cannot take -------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, words",
    [
        (DEEP, "nested too deep"),
        ('{"ts": "2026-11-30T10:00:00Z", "n": ' + BIG_INT + "}", "too many digits"),
    ],
)
def test_jsonl_line_nested_too_deep_or_with_a_huge_number_is_named(store, tmp_path, bad, words):
    f = tmp_path / "in.jsonl"
    f.write_text(_line() + bad + "\n")
    before = _head(store.root)
    proc = ct("-C", store.root, "import", "jsonl", f, check=False)
    _refused(proc, store.root, before, f"{f}:2: ")
    assert words in proc.stderr


@pytest.mark.parametrize("bad", [DEEP, '{"type": "user", "n": ' + BIG_INT + "}"])
def test_claude_code_bad_line_is_skipped_and_named(store, tmp_path, bad):
    f = tmp_path / "sess.jsonl"
    row = {
        "type": "user",
        "sessionId": "s1",
        "uuid": "u1",
        "timestamp": "2026-11-30T10:00:00Z",
        "message": {"role": "user", "content": "Which platform for Kyoto?"},
    }
    f.write_text(json.dumps(row) + "\n" + bad + "\n")
    proc = ct("-C", store.root, "import", "claude-code", f)
    assert f"skipped {f}:2: " in proc.stderr and "Traceback" not in proc.stderr
    assert _texts(store.root) == ["Which platform for Kyoto?"]
    f.write_text(bad + "\n")  # nothing good at all: exit 4, nothing changed
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "claude-code", f, check=False),
        store.root,
        before,
        f"{f}:1: ",
    )


@pytest.mark.parametrize("bad", [DEEP, '{"tree": ' + BIG_INT + "}"])
def test_trace_file_nested_too_deep_or_with_a_huge_number_is_refused(store, tmp_path, bad):
    f = tmp_path / "save.json"
    f.write_text(bad)
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "trace", f, check=False),
        store.root,
        before,
        f"{f}: not valid JSON",
    )


@pytest.mark.parametrize("bad", [DEEP, "[" + BIG_INT + "]"])
def test_chatgpt_export_nested_too_deep_or_with_a_huge_number_is_refused(store, tmp_path, bad):
    f = tmp_path / "conversations.json"
    f.write_text(bad)
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "chatgpt", f, check=False), store.root, before, f"{f}: "
    )


# ----- lone surrogates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, name",
    [
        ({"session": "plan\ud800"}, "session"),
        ({"actor": "\udcff"}, "actor"),
        ({"model": "gpt\ud83d"}, "model"),
        ({"note": "half \ud83d emoji"}, "note"),
        ({"tags": ["ok", {"deep": "\udc00"}]}, "tags[1].deep"),
        ({"meta": {"\ud800key": 1}}, "meta key"),
    ],
)
def test_lone_surrogate_outside_the_text_skips_that_record_only(store, tmp_path, fields, name):
    f = tmp_path / "in.jsonl"
    f.write_text(_line(id="good-1") + _line(id="bad-1", text="Second line.", **fields))
    proc = ct("-C", store.root, "import", "jsonl", f)
    assert f"skipped {f}:2: field '{name}' holds a lone UTF-16 surrogate" in proc.stderr, (
        proc.stderr
    )
    assert _texts(store.root) == [GOOD["text"]]
    for raw in _log_lines(store.root):
        json.loads(raw.decode("utf-8"))  # the day log stays UTF-8 JSON
    assert git_clean(store.root)


def test_a_file_of_only_unstorable_records_exits_4_and_changes_nothing(store, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(_line(session="\ud800") + _line(text="half \ud83d"))
    before = _head(store.root)
    proc = ct("-C", store.root, "import", "jsonl", f, check=False)
    _refused(proc, store.root, before, f"{f}:1: field 'session'")
    assert "Nothing was imported (1 more item could not be read either)." in proc.stderr


def test_add_and_mark_refuse_text_that_was_not_utf8(store):
    before = _head(store.root)
    bad = b"caf\xe9".decode("utf-8", "surrogateescape")  # what a shell hands over for Latin-1 bytes
    for args in (("add", "--session", bad, "hello"), ("add", bad), ("mark", bad)):
        proc = ct("-C", store.root, *args, check=False)
        assert proc.returncode == 2 and "lone UTF-16 surrogate" in proc.stderr, proc.stderr
    assert _head(store.root) == before and git_clean(store.root)


# ----- ct watch ----------------------------------------------------------------------------------


def test_watch_skips_a_poison_line_once_and_goes_on(store, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    f = logs / "chat.jsonl"
    f.write_text(
        _line(id="a") + _line(id="b", session="\ud800") + _line(id="c", text=DEEP[:10]) + "[[[\n"
    )
    first = ct("-C", store.root, "watch", "--once", "--kind", "jsonl", logs)
    assert f"{f}:2: field 'session'" in first.stderr and f"{f}:4: not valid JSON" in first.stderr
    with open(f, "a") as fh:
        fh.write(_line(id="d", text="The hotel is by the river."))
    again = ct("-C", store.root, "watch", "--once", "--kind", "jsonl", logs)
    assert "added 1 records" in again.stderr, again.stderr
    assert (
        f"{f}:2" not in again.stderr and f"{f}:4" not in again.stderr
    )  # said once, not on every batch
    assert "The hotel is by the river." in _texts(store.root) and git_clean(store.root)


def test_watch_waits_for_a_cut_off_last_line_in_silence(store, tmp_path):
    f = tmp_path / "chat.jsonl"
    whole = _line(id="z", text="The hotel is by the river.")
    f.write_text(_line(id="y") + whole[:20])
    proc = ct("-C", store.root, "watch", "--once", "--kind", "jsonl", f)
    assert "cut off" not in proc.stderr and _texts(store.root) == [GOOD["text"]]
    f.write_text(_line(id="y") + whole)
    ct("-C", store.root, "watch", "--once", "--kind", "jsonl", f)
    assert "The hotel is by the river." in _texts(store.root)


# ----- a cut-off last line of a one-shot import ------------------------------------------------------


def test_one_shot_import_names_a_cut_off_last_line(store, tmp_path):
    f = tmp_path / "in.jsonl"
    whole = _line(id="late", text="The hotel is by the river.")
    f.write_text(_line(id="early") + whole[:25])
    proc = ct("-C", store.root, "import", "jsonl", f)
    assert f"skipped {f}:2: the last line is cut off" in proc.stderr, proc.stderr
    assert _texts(store.root) == [GOOD["text"]]
    with open(f, "a") as fh:  # finished later: the next import takes it
        fh.write(whole[25:])
    ct("-C", store.root, "import", "jsonl", f)
    assert "The hotel is by the river." in _texts(store.root)


def test_a_file_that_is_only_a_cut_off_line_exits_4(store, tmp_path):
    f = tmp_path / "in.jsonl"
    f.write_text(_line()[:30])
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "jsonl", f, check=False),
        store.root,
        before,
        f"{f}:1: the last line",
    )


def test_a_long_last_line_without_a_newline_is_imported_whole(store, tmp_path):
    f = tmp_path / "in.jsonl"
    text = "A long note about the river. " * 60_000  # 1.7 MB: longer than any fixed tail window
    f.write_text(_line(id="short") + _line(id="long", text=text).rstrip("\n"))
    ct("-C", store.root, "import", "jsonl", f)
    assert text in _texts(store.root)


# ----- times out of any calendar -------------------------------------------------------------------


def _conversation(cid, when, text):
    msg = {
        "id": f"{cid}-m",
        "author": {"role": "user"},
        "create_time": when,
        "content": {"parts": [text]},
    }
    return {
        "id": cid,
        "title": cid,
        "create_time": when,
        "current_node": f"{cid}-m",
        "mapping": {f"{cid}-m": {"id": f"{cid}-m", "parent": None, "children": [], "message": msg}},
    }


@pytest.mark.parametrize("when", [1e30, -1e30, 1e20])
def test_chatgpt_time_out_of_range_skips_that_conversation(store, tmp_path, when):
    f = tmp_path / "conversations.json"
    f.write_text(
        json.dumps(
            [_conversation("bad", when, "Never said."), _conversation("ok", 1.78e9, "Said.")]
        )
    )
    proc = ct("-C", store.root, "import", "chatgpt", f)
    assert (
        f"skipped {f}: conversation 1 (bad): create_time: " in proc.stderr
        and "not a Unix time" in proc.stderr
    )
    assert _texts(store.root) == ["Said."]
    f.write_text(json.dumps([_conversation("bad", when, "Never said.")]))
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "chatgpt", f, check=False),
        store.root,
        before,
        f"{f}: conversation 1",
    )


def test_trace_time_out_of_range_is_taken_as_none_given(store, tmp_path):
    f = tmp_path / "save.json"
    topic = {
        "type": "topic",
        "node_id": "n",
        "topic_name": "T",
        "summary": "",
        "start_index": 0,
        "end_index": 1,
    }
    root = {
        **topic,
        "node_id": "root",
        "created_at": 1e30,
        "children": [{**topic, "created_at": 1e300}],
    }
    conv = [{"role": "user", "content": "Book the hotel by the river."}]
    f.write_text(json.dumps({"tree": root, "conversation": conv, "archived": []}))
    proc = ct("-C", store.root, "import", "trace", f, check=False)
    assert proc.returncode in (0, 4) and "Traceback" not in proc.stderr, proc.stderr


def _mp4_with_creation_time(created: int) -> bytes:
    body = b"\x01\x00\x00\x00" + struct.pack(">QQIQ", created, 0, 1000, 5000) + b"\x00" * 80
    mvhd = struct.pack(">I", 8 + len(body)) + b"mvhd" + body
    moov = struct.pack(">I", 8 + len(mvhd)) + b"moov" + mvhd
    return struct.pack(">I", 16) + b"ftypisom\x00\x00\x02\x00" + moov


def test_an_mp4_time_past_year_9999_keeps_the_folder_and_its_duration(store, tmp_path):
    from memstore.ingest.media import describe_media

    data = _mp4_with_creation_time(2**64 - 1)
    assert describe_media("clip.mp4", data)["duration_s"] == 5.0
    folder = tmp_path / "media"
    folder.mkdir()
    (folder / "clip.mp4").write_bytes(data)
    (folder / "note.txt").write_text("A note about the clip from Kyoto.\n")
    out = json.loads(ct("-C", store.root, "ingest-any", folder, "--json").stdout)
    assert out["added"] == 2 and git_clean(store.root)


# ----- file names and walks ---------------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_skipped_and_named(store, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    bad = os.fsdecode(b"caf\xe9.md")
    (folder / bad).write_text("# Cafe\n\nA note whose name is Latin-1.\n")
    (folder / "good.md").write_text("# Good\n\nA note about the river.\n")
    for cmd in ("ingest-path", "ingest-any"):
        proc = ct("-C", store.root, cmd, folder)
        assert f"skipped {folder}/caf\\xe9.md: file name is not valid UTF-8" in proc.stderr, (
            proc.stderr
        )
    before = _head(store.root)
    proc = ct("-C", store.root, "ingest-path", folder / bad, check=False)
    _refused(proc, store.root, before, "caf\\xe9.md: file name is not valid UTF-8")
    latin = tmp_path / os.fsdecode(b"d\xe9j\xe0")
    latin.mkdir()
    (latin / "n.md").write_text("# N\n\nIn a folder whose name is Latin-1.\n")
    proc = ct("-C", store.root, "ingest-path", latin, check=False)
    _refused(proc, store.root, before, "d\\xe9j\\xe0: the folder's name is not valid UTF-8")


def test_an_import_file_named_in_latin1_imports_and_is_named_with_escapes(store, tmp_path):
    f = tmp_path / os.fsdecode(b"caf\xe9.jsonl")
    f.write_text(_line())
    ct("-C", store.root, "import", "jsonl", f)
    assert [json.loads(ln)["session"] for ln in _log_lines(store.root)] == [
        "caf\\xe9"
    ]  # a derived name
    f.write_text(_line() + "[\n")
    before = _head(store.root)
    _refused(
        ct("-C", store.root, "import", "jsonl", f, check=False),
        store.root,
        before,
        "caf\\xe9.jsonl:2: not valid",
    )


def test_follow_symlinks_through_a_link_to_the_root_of_the_disk_is_a_loop(store, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nA note about the river.\n")
    os.symlink("/", folder / "everything")
    proc = ct("-C", store.root, "ingest-path", folder, "--follow-symlinks")
    assert f"skipped {folder}/everything: symlink loop (points back to /" in proc.stderr, (
        proc.stderr
    )
    assert (
        _texts(store.root) == ["# A\n\nA note about the river."] or len(_log_lines(store.root)) == 1
    )


def test_a_folder_that_vanishes_mid_walk_is_a_skip(tmp_path):
    from memstore.ingest.walk import Skip, walk

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.md").write_text("one\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "two.md").write_text("two\n")
    items = walk(tmp_path)
    first = next(items)  # a/one.md: the root's entries (a, b) are listed already
    assert first.rel == "a/one.md"
    (tmp_path / "b" / "two.md").unlink()
    (tmp_path / "b").rmdir()
    rest = list(items)
    assert [type(i) for i in rest] == [Skip] and "b" in str(rest[0].path), rest


# ----- ct add and ct search --------------------------------------------------------------------------


def test_a_nul_read_by_add_from_stdin_is_stored_and_committed(store):
    proc = ct("-C", store.root, "add", "-", input="before\x00after")
    assert proc.returncode == 0 and _texts(store.root) == ["before\x00after"]
    assert commits(store.root)[0] == "Add user turn: before\\0after" and git_clean(store.root)


def test_search_k_of_10_to_the_18_is_a_usage_error(store):
    proc = ct("-C", store.root, "search", "river", "-k", str(10**18), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "-k" in proc.stderr


# ----- every importer against a set of malformed inputs ------------------------------------------------

MALFORMED = [
    b"",
    b"\n\n",
    b"\xff\xfe\x00garbage",
    DEEP.encode(),
    ("[" + BIG_INT + "]").encode(),
    b'{"ts": 1e999, "role": "user", "text": "x"}\n',
    b'{"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "x", "id": "' + b"i" * 500 + b'"}\n',
    b'{"ts": "9999-99-99", "role": "user", "text": "x"}\n',
    b'{"ts": "2026-11-30T10:00:00Z", "role": "user", "text": "\\ud800"}\n',
    b'{"ts": "2026-11-30T10:00:00Z", "role": ["user"], "text": {"a": 1}}\n',
    b'{"type": "user", "timestamp": 1e30, "message": {"role": "user", "content": [{"type": "text"}]}}\n',
    b'{"type": "assistant", "message": {"content": [null, 5, {"type": "tool_use", "input": "\\udc00"}]}}\n',
    b'[{"mapping": {"a": {"message": {"author": {"role": "user"}, "create_time": "soon",'
    b' "content": {"parts": [1e400]}}}}, "current_node": "a"}]',
    b'[{"mapping": {"a": {"parent": "a", "children": ["a"]}}, "create_time": -1e300}]',
    b'{"tree": {"type": "topic", "children": [{"type": "message", "message_index": 99}]},'
    b' "conversation": [{"role": "wizard", "content": null}]}',
    b'{"tree": [], "conversation": "x"}',
    b'{"ts": "2026-11-30T10:00:00Z", "role": "user", "te',
]


def _place(kind: str, tmp_path, data: bytes):
    if kind == "lossless-memory":
        (tmp_path / "lm" / "main").mkdir(parents=True)
        (tmp_path / "lm" / "main" / "2026-11-30.jsonl").write_bytes(data)
        return tmp_path / "lm"
    name = {"chatgpt": "conversations.json", "trace": "save.json"}.get(kind, "in.jsonl")
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


@pytest.mark.parametrize("kind", ["jsonl", "claude-code", "chatgpt", "trace", "lossless-memory"])
def test_every_importer_answers_malformed_input_with_exit_0_or_4(store, tmp_path, kind):
    for i, data in enumerate(MALFORMED):
        where = tmp_path / f"case{i}"
        where.mkdir()
        path = _place(kind, where, data)
        before = _head(store.root)
        proc = ct("-C", store.root, "import", kind, path, check=False)
        assert proc.returncode in (0, 4), (i, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr, (i, proc.stderr)
        if proc.returncode == 4:
            assert str(path.name) in proc.stderr.splitlines()[0] or str(where) in proc.stderr, (
                i,
                proc.stderr,
            )
            assert _head(store.root) == before, i
        assert git_clean(store.root), i
