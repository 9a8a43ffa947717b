"""The importers: Claude Code, ChatGPT and JSONL files mapped to records, read incrementally."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import ct

from memstore.errors import FormatError
from memstore.ingest import import_chatgpt, import_claude, import_jsonl
from memstore.ingest.importers import Cursor, Problem, reader, was_rewritten

FIXTURES = Path(__file__).parent / "fixtures" / "importers"
SESSION = "5f0c1a2e-7b3d-4c8e-9a61-2d4e8f1b3c70"
CLAUDE = FIXTURES / f"{SESSION}.jsonl"
CHATGPT = FIXTURES / "chatgpt_conversations.json"
JSONL = FIXTURES / "log.jsonl"
LOSSLESS_FIELDS = ["ts", "actor", "role", "type", "text", "model", "session"]


def by_id(records):
    return {r["id"]: r for r in records}


A0017 = (
    json.dumps(
        {
            "parentUuid": "u-0016",
            "isSidechain": False,
            "sessionId": SESSION,
            "type": "assistant",
            "message": {
                "id": "msg_01D",
                "role": "assistant",
                "model": "claude-opus-4-1-20250805",
                "content": [
                    {"type": "text", "text": "The fix is to pin the timezone with zoneinfo."}
                ],
            },
            "uuid": "a-0017",
            "timestamp": "2025-08-14T09:31:25.000Z",
        }
    )
    + "\n"
).encode()


def complete_lines(path: Path) -> list[bytes]:
    """The fixture's complete lines (each with its "\\n") and, last, its half-written tail."""
    return path.read_bytes().splitlines(keepends=True)


# --------------------------------------------------------------------------------------------
# Claude Code


@pytest.fixture
def claude_records():
    return import_claude.read_new(CLAUDE).records


def test_claude_records_have_the_lossless_fields_first(claude_records):
    for rec in claude_records:
        assert list(rec)[:8] == LOSSLESS_FIELDS + ["id"]
        assert rec["role"] in ("user", "assistant", "system", "tool")
        assert rec["type"] in ("text", "action", "meta")
        assert isinstance(rec["text"], str) and rec["text"].strip()


def test_claude_text_blocks_are_verbatim_text_records(claude_records):
    recs = by_id(claude_records)
    question = recs["cc:u-0004"]
    assert question["text"] == "Why does test_export_budget fail on CI but not on my laptop?"
    assert (question["role"], question["actor"], question["type"], question["model"]) == (
        "user",
        "user",
        "text",
        None,
    )
    assert question["ts"] == "2025-08-14T09:01:12.345Z"
    assert question["session"] == SESSION
    assert question["cwd"] == "/home/ana/src/budget" and question["git_branch"] == "main"
    answer = recs["cc:a-0006"]
    assert answer["role"] == "assistant" and answer["type"] == "text"
    assert answer["actor"] == answer["model"] == "claude-opus-4-1-20250805"
    assert recs["cc:u-0016"]["text"] == "Use zoneinfo, not pytz. 日本時間でもテストして。"


def test_claude_tool_use_is_an_action_and_its_result_a_tool_text(claude_records):
    recs = by_id(claude_records)
    call = recs["cc:a-0007"]
    assert call["type"] == "action" and call["role"] == "assistant"
    name, _, payload = call["text"].partition(": ")
    assert name == "Bash" and call["tool_name"] == "Bash"
    assert json.loads(payload) == {
        "command": "pytest tests/test_export.py -x -q",
        "description": "Run the export tests",
    }
    result = recs["cc:u-0008"]
    assert (result["role"], result["actor"], result["type"]) == ("tool", "tool", "text")
    assert result["text"].startswith("F\n=== FAILURES ===\n") and result["is_error"] is True
    assert result["tool_use_id"] == "toolu_01Bash"
    listed = recs["cc:u-0010"]  # content given as a list of text blocks
    assert (
        listed["text"]
        == "     1\timport datetime\n     2\t\n     3\tdef day_of(ts):\n     4\t    return ts.date().isoformat()"
    )
    assert "is_error" not in listed


def test_claude_thinking_is_kept_as_meta(claude_records):
    thinking = by_id(claude_records)["cc:a-0005"]
    assert (
        thinking["type"] == "meta"
        and thinking["kind"] == "thinking"
        and thinking["role"] == "assistant"
    )
    assert thinking["text"].startswith("CI runs in UTC")


def test_claude_harness_and_compaction_rows_are_meta(claude_records):
    recs = by_id(claude_records)
    for harness in ("cc:u-0001", "cc:u-0002", "cc:u-0003", "cc:u-0015"):
        assert recs[harness]["type"] == "meta" and recs[harness]["kind"] == "harness", harness
    compaction = recs["cc:u-0014"]
    assert compaction["type"] == "meta" and compaction["kind"] == "compaction"
    boundary = recs["cc:y-0013"]
    assert (boundary["role"], boundary["type"], boundary["kind"]) == (
        "system",
        "meta",
        "compact_boundary",
    )


def test_claude_summary_row_is_meta_dated_by_the_next_row(claude_records):
    summary = claude_records[0]
    assert summary["text"] == "Fix flaky budget export test"
    assert (summary["role"], summary["type"], summary["kind"]) == ("system", "meta", "summary")
    assert summary["id"].startswith("cc:summary:9d1e2f30-0000-4000-8000-00000000c0de:")
    assert summary["ts"] == "2025-08-14T09:00:00.000Z"


def test_claude_sidechain_and_multi_block_rows(claude_records):
    recs = by_id(claude_records)
    assert recs["cc:s-0011"]["sidechain"] is True and recs["cc:s-0011"]["agent_id"] == "a1b2c3"
    assert "sidechain" not in recs["cc:a-0006"]
    # One row, two blocks: two records, ids by block position.
    assert recs["cc:a-0012:0"]["type"] == "text"
    assert recs["cc:a-0012:1"]["type"] == "action" and recs["cc:a-0012:1"]["text"].startswith(
        "Edit: {"
    )
    assert "cc:a-0012" not in recs


def test_claude_skips_other_row_kinds_and_keeps_the_half_written_line(claude_records):
    ids = [r["id"] for r in claude_records]
    assert len(ids) == len(set(ids)) == 18
    assert not any("msg_01D" in json.dumps(r) for r in claude_records)  # the truncated last line
    result = import_claude.read_new(CLAUDE)
    assert result.problems == []
    assert result.cursor.offset == len(b"".join(complete_lines(CLAUDE)[:-1]))
    assert result.cursor.line == 18


def test_claude_ids_and_records_are_stable_across_runs():
    assert import_claude.read_new(CLAUDE).records == import_claude.read_new(CLAUDE).records


def test_claude_incremental_reading(tmp_path):
    lines = complete_lines(CLAUDE)
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(b"".join(lines[:6]))
    first = import_claude.read_new(path)
    assert first.cursor.line == 6

    half = A0017[:100]  # half written: not consumed, not a problem
    path.write_bytes(b"".join(lines[:13]) + half)
    second = import_claude.read_new(path, first.cursor)
    assert [r["id"] for r in second.records] == [
        "cc:a-0006",
        "cc:a-0007",
        "cc:u-0008",
        "cc:a-0009",
        "cc:u-0010",
        "cc:s-0011",
        "cc:a-0012:0",
        "cc:a-0012:1",
    ]
    assert second.problems == [] and second.cursor.line == 13

    again = import_claude.read_new(path, second.cursor)
    assert again.records == [] and again.cursor == second.cursor

    path.write_bytes(b"".join(lines[:-1]) + A0017)  # the line is now complete
    third = import_claude.read_new(path, second.cursor)
    assert [r["id"] for r in third.records][-1] == "cc:a-0017" and third.problems == []
    assert import_claude.read_new(path, third.cursor).records == []

    # Everything read piecewise equals one read of the whole file.
    whole = import_claude.read_new(path).records
    assert first.records + second.records + third.records == whole


def test_claude_rewritten_or_shrunk_file_is_read_from_the_start(tmp_path):
    lines = complete_lines(CLAUDE)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:-1]))
    done = import_claude.read_new(path)

    path.write_bytes(b"".join(lines[:5]))  # shorter than the cursor
    assert was_rewritten(path, done.cursor)
    shrunk = import_claude.read_new(path, done.cursor)
    assert [r["id"] for r in shrunk.records] == [r["id"] for r in done.records[:5]]
    assert shrunk.cursor.offset == path.stat().st_size

    # Same length or longer, but the start changed: also a rewrite.
    path.write_bytes(b"".join(lines[1:-1]) + lines[0])
    assert was_rewritten(path, shrunk.cursor)
    rewritten = import_claude.read_new(path, shrunk.cursor)
    assert len(rewritten.records) == len(done.records)


def test_claude_cursor_survives_json_and_accepts_a_bare_offset(tmp_path):
    lines = complete_lines(CLAUDE)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:8]))
    first = import_claude.read_new(path)
    saved = Cursor.from_dict(json.loads(json.dumps(first.cursor.to_dict())))
    assert saved == first.cursor
    path.write_bytes(b"".join(lines[:-1]))
    assert (
        import_claude.read_new(path, saved).records
        == import_claude.read_new(path, first.cursor.offset).records
    )
    assert import_claude.read_new(path, first.cursor.offset).cursor.line == 18


def test_claude_malformed_json_is_a_problem_with_its_absolute_line(tmp_path):
    lines = complete_lines(CLAUDE)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(lines[:10]))
    first = import_claude.read_new(path)
    path.write_bytes(
        b"".join(lines[:10]) + b'{"type": "user", "message": \n[1, 2]\n\n\xff\xfe\n' + lines[10]
    )
    result = import_claude.read_new(path, first.cursor)
    assert [(p.line, p.message.split(" (")[0]) for p in result.problems] == [
        (11, "not valid JSON"),
        (12, "not a JSON object"),
        (14, "not valid UTF-8"),
    ]
    assert str(result.problems[0]).startswith(f"{path}:11: not valid JSON")
    assert [r["id"] for r in result.records] == [
        "cc:u-0010"
    ]  # good lines around bad ones still count


def test_claude_undated_summary_waits_for_a_dated_row(tmp_path):
    lines = complete_lines(CLAUDE)
    path = tmp_path / "s.jsonl"
    path.write_bytes(lines[0])
    waiting = import_claude.read_new(path)
    assert waiting.records == [] and waiting.cursor.offset == 0
    path.write_bytes(lines[0] + lines[4])
    dated = import_claude.read_new(path, waiting.cursor)
    assert [r["ts"] for r in dated.records] == ["2025-08-14T09:01:12.345Z"] * 2
    # A summary appended after dated rows takes the previous row's time, even in a later read.
    path.write_bytes(lines[0] + lines[4] + lines[0].replace(b"Fix flaky", b"Fixed flaky"))
    later = import_claude.read_new(path, dated.cursor)
    assert [r["ts"] for r in later.records] == ["2025-08-14T09:01:12.345Z"]


def test_read_claude_code_walks_a_projects_folder(tmp_path):
    project = tmp_path / "projects" / "-home-ana-src-budget"
    project.mkdir(parents=True)
    shutil.copy(CLAUDE, project / CLAUDE.name)
    (project / "notes.txt").write_text("not a session")
    (project / "loop").symlink_to(tmp_path / "projects", target_is_directory=True)
    other = tmp_path / "projects" / "-home-ana-src-other" / "nested"
    other.mkdir(parents=True)
    (other / "abc.jsonl").write_text(
        '{"type": "user", "uuid": "x-1", "timestamp": "2025-09-01T10:00:00Z", '
        '"message": {"role": "user", "content": "hello from another project"}}\nnot json\n'
    )
    batch = import_claude.read_claude_code(tmp_path / "projects")
    ids = [r["id"] for r in batch.records]
    assert len(ids) == 19 and ids[-1] == "cc:x-1"
    assert by_id(batch.records)["cc:x-1"]["session"] == "abc"  # no sessionId: the file's name
    assert [(Path(p.path).name, p.line) for p in batch.problems] == [("abc.jsonl", 2)]


# --------------------------------------------------------------------------------------------
# ChatGPT


@pytest.fixture
def chatgpt():
    return import_chatgpt.read_chatgpt(CHATGPT)


def test_chatgpt_follows_the_current_branch(chatgpt):
    budget = [r for r in chatgpt.records if r["conversation_title"] == "Budget planning for Q3"]
    assert {r["session"] for r in budget} == {
        "6667a1b0-1111-4000-8000-aaaaaaaaaaaa"
    }  # the id, not the title
    assert [r["id"] for r in budget] == [
        "chatgpt:m-u1",
        "chatgpt:m-a1",
        "chatgpt:m-u2",
        "chatgpt:m-a2",
        "chatgpt:m-a3",
    ]
    assert "Put everything into hiring." not in [
        r["text"] for r in chatgpt.records
    ]  # the replaced reply
    assert chatgpt.problems == []


def test_chatgpt_message_mapping(chatgpt):
    recs = by_id(chatgpt.records)
    question = recs["chatgpt:m-u1"]
    assert list(question)[:8] == LOSSLESS_FIELDS + ["id"]
    assert question["ts"] == "2024-06-10T06:13:30.500000+00:00"
    assert (question["role"], question["actor"], question["model"]) == ("user", "user", None)
    assert question["conversation_id"] == "6667a1b0-1111-4000-8000-aaaaaaaaaaaa"
    reply = recs["chatgpt:m-a1"]
    assert (reply["role"], reply["actor"], reply["model"], reply["type"]) == (
        "assistant",
        "gpt-4o",
        "gpt-4o",
        "text",
    )
    assert reply["parent"] == "m-u1"
    assert recs["chatgpt:m-a2"]["text"] == "Noted. \nThen hiring gets 6,500 EUR."
    recap = recs["chatgpt:m-a3"]  # no create_time of its own: the previous message's
    assert recap["ts"] == recs["chatgpt:m-a2"]["ts"] and recap["type"] == "meta"


def test_chatgpt_hidden_nodes_are_skipped(chatgpt):
    ids = {r["id"] for r in chatgpt.records}
    assert "chatgpt:m-sys" not in ids and "chatgpt:n-ctx" not in ids
    assert not any("accountant" in r["text"] for r in chatgpt.records)


def test_chatgpt_code_execution_and_images(chatgpt):
    recs = by_id(chatgpt.records)
    image = recs["chatgpt:n-u1"]
    assert (
        image["text"]
        == "[image: file-service://file-9XyZ 800x600]\nSum the amount column of this table."
    )
    assert image["attachments"] == ["table.png"]
    code = recs["chatgpt:n-code"]
    assert (code["type"], code["role"], code["recipient"]) == ("action", "assistant", "python")
    assert code["text"].startswith("import pandas as pd\n")
    output = recs["chatgpt:n-out"]
    assert (output["type"], output["role"], output["actor"], output["text"]) == (
        "text",
        "tool",
        "python",
        "4312.5",
    )
    assert recs["chatgpt:n-a2"]["session"] == "6667b2c0-2222-4000-8000-bbbbbbbbbbbb"
    assert recs["chatgpt:n-a2"]["conversation_title"] == "CSV totals with Python"


def test_chatgpt_reads_the_export_zip_and_folder(tmp_path, chatgpt):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(CHATGPT, "conversations.json")
        zf.writestr("chat.html", "<html></html>")
    assert import_chatgpt.read_chatgpt(archive).records == chatgpt.records
    folder = tmp_path / "export"
    folder.mkdir()
    shutil.copy(CHATGPT, folder / "conversations.json")
    assert import_chatgpt.read_chatgpt(folder).records == chatgpt.records


def test_chatgpt_bad_input(tmp_path):
    broken = tmp_path / "conversations.json"
    broken.write_text('[{"title": "cut off", "mapping": {')
    with pytest.raises(FormatError, match="not valid JSON"):
        import_chatgpt.read_chatgpt(broken)
    data = json.loads(CHATGPT.read_text())
    data.insert(0, {"id": "c-0", "title": "no messages"})
    broken.write_text(json.dumps(data))
    batch = import_chatgpt.read_chatgpt(broken)
    assert len(batch.records) == 9
    assert [str(p) for p in batch.problems] == [
        f"{broken}: conversation 1 (c-0): no 'mapping' of messages"
    ]


def test_chatgpt_without_current_node_takes_the_newest_branch(tmp_path):
    data = json.loads(CHATGPT.read_text())
    del data[0]["current_node"]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    ids = [r["id"] for r in import_chatgpt.read_chatgpt(path).records]
    assert "chatgpt:m-a1" in ids and "chatgpt:m-a1-old" not in ids


def _conv(cid: str, nodes: list[tuple[str, str | None, str]], current: str) -> dict:
    """A ChatGPT conversation of (node id, parent id, text) user messages."""
    mapping = {}
    for i, (node, parent, text) in enumerate(nodes):
        mapping[node] = {
            "id": node,
            "parent": parent,
            "children": [n for n, p, _ in nodes if p == node],
            "message": {
                "id": node,
                "author": {"role": "user"},
                "create_time": 1767261600 + i,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
    return {"id": cid, "title": cid, "mapping": mapping, "current_node": current}


def test_chatgpt_names_every_message_a_missing_parent_cut_off(tmp_path, store):
    """A message whose parent is not in the export is said aloud, never dropped in silence: the
    branch shown that starts at one is imported from it on with a note; one off that branch is
    named with the messages not imported. Every bad conversation of the run is named too."""
    path = tmp_path / "conversations.json"
    data = [
        _conv("c-1", [("a", None, "first"), ("b", "a", "second"), ("x", "gone-1", "lost")], "b"),
        _conv("c-2", [("m", "gone-2", "middle"), ("n", "m", "end of it")], "n"),
        {"id": "c-3", "title": "no messages"},
        {"id": "c-4", "mapping": "not a mapping"},
    ]
    path.write_text(json.dumps(data))
    said = [str(p) for p in import_chatgpt.read_chatgpt(path).problems]
    assert said == [
        f"{path}: conversation 1 (c-1): message x's parent gone-1 is not in the export and the "
        "branch shown does not reach it: 1 message from it on not imported",
        f"{path}: conversation 2 (c-2): message m's parent gone-2 is not in the export: the "
        "conversation is imported from that message on (what came before it is missing)",
        f"{path}: conversation 3 (c-3): no 'mapping' of messages",
        f"{path}: conversation 4 (c-4): no 'mapping' of messages",
    ]
    proc = ct("-C", store.root, "import", "chatgpt", path)
    out = proc.stdout + proc.stderr
    assert "Imported 4" in out or "4 records" in out, out
    for why in ("gone-1", "gone-2", "skipped " + f"{path}: conversation 3", "conversation 4"):
        assert why in out, (why, out)


# --------------------------------------------------------------------------------------------
# JSONL


def test_jsonl_mapping():
    batch = import_jsonl.read_jsonl(JSONL)
    first, ai, action, resumed = batch.records
    assert first == {
        "ts": "2026-03-02T08:15:00+09:00",
        "actor": "ana",
        "role": "user",
        "type": "text",
        "text": "What did we decide about the budget?",
        "model": None,
        "session": "2026-03-02-morning",
    }
    assert ai["role"] == "assistant" and ai["actor"] == "assistant"  # lossless-memory's "ai"
    assert "id" not in first  # the store derives one
    assert action["id"] == "turn-0003" and action["type"] == "action"
    assert (
        action["actor"] == "assistant" and action["session"] == "log"
    )  # defaults: role, file name
    assert action["source"] == "cli" and action["tags"] == ["budget"]  # unknown fields kept
    assert resumed["ts"] == 1772439540 and resumed["type"] == "meta"


def test_jsonl_problems_name_file_line_and_field():
    problems = import_jsonl.read_jsonl(JSONL).problems
    assert [(p.path, p.line) for p in problems] == [(str(JSONL), 4), (str(JSONL), 5)]
    assert problems[0].message == "missing required field 'text'"
    assert problems[1].message.startswith("not valid JSON")
    error = problems[0].to_error()
    assert (
        isinstance(error, FormatError) and str(error) == f"{JSONL}:4: missing required field 'text'"
    )


@pytest.mark.parametrize(
    "line, message",
    [
        ({"role": "user", "text": "hi"}, "missing required field 'ts'"),
        (
            {"ts": "yesterday", "role": "user", "text": "hi"},
            "field 'ts': not an ISO-8601 timestamp",
        ),
        ({"ts": "2026-01-01", "role": "bot", "text": "hi"}, "field 'role': 'bot' is not one of"),
        (
            {"ts": "2026-01-01", "role": "user", "text": "hi", "type": "note"},
            "field 'type': 'note'",
        ),
        ({"ts": "2026-01-01", "role": "user", "text": "   "}, "field 'text' is empty"),
        ({"ts": "2026-01-01", "role": "user", "text": 5}, "field 'text' must be a string"),
        ({"ts": "2026-01-01", "role": "user", "text": "hi", "model": 3}, "field 'model'"),
    ],
)
def test_jsonl_field_checks(tmp_path, line, message):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(line) + "\n")
    (problem,) = import_jsonl.read_jsonl(path).problems
    assert problem.line == 1 and problem.message.startswith(message)


def test_jsonl_reads_lossless_memory_day_files(tmp_path):
    path = tmp_path / "2026-09-01.jsonl"
    rows = [
        {
            "ts": "2026-09-01T09:02:00+00:00",
            "actor": "user",
            "role": "user",
            "type": "text",
            "text": "予算は？",
            "model": None,
            "session": "abc",
        },
        {
            "ts": "2026-09-01T09:02:05+00:00",
            "actor": "assistant",
            "role": "ai",
            "type": "thinking",
            "text": "look it up",
            "model": "unknown",
            "session": "abc",
        },
    ]
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    user, thinking = import_jsonl.read_jsonl(path).records
    assert user["text"] == "予算は？" and user["session"] == "abc"
    assert (thinking["role"], thinking["type"], thinking["kind"]) == (
        "assistant",
        "meta",
        "thinking",
    )


def test_jsonl_incremental_reading(tmp_path):
    path = tmp_path / "live.jsonl"
    rows = [
        json.dumps(
            {"ts": f"2026-01-01T10:0{i}:00Z", "role": "user", "text": f"turn {i}", "id": f"t{i}"}
        )
        + "\n"
        for i in range(6)
    ]
    path.write_text(rows[0] + rows[1])
    first = import_jsonl.read_new(path)
    assert [r["id"] for r in first.records] == ["t0", "t1"]

    path.write_text("".join(rows[:4]) + rows[4][:20])
    second = import_jsonl.read_new(path, first.cursor)
    assert [r["id"] for r in second.records] == ["t2", "t3"]

    path.write_text("".join(rows[:5]) + '{"ts": "2026-01-01T10:09:00Z", "role": "user"}\n')
    third = import_jsonl.read_new(path, second.cursor)
    assert [r["id"] for r in third.records] == ["t4"]
    assert [(p.line, p.message) for p in third.problems] == [(6, "missing required field 'text'")]

    path.write_text(rows[5])  # truncated and rewritten
    assert [r["id"] for r in import_jsonl.read_new(path, third.cursor).records] == ["t5"]


def test_jsonl_last_line_without_newline(tmp_path):
    path = tmp_path / "hand.jsonl"
    path.write_text(
        '{"ts": "2026-01-01", "role": "user", "text": "a"}\n{"ts": "2026-01-01", "role": "user", "text": "b"}'
    )
    assert [r["text"] for r in import_jsonl.read_new(path).records] == [
        "a"
    ]  # may still be being written
    assert [r["text"] for r in import_jsonl.read_jsonl(path).records] == [
        "a",
        "b",
    ]  # one-shot: the end is the end
    done = import_jsonl.read_new(path, final=True)
    with path.open("a") as f:
        f.write('\n{"ts": "2026-01-01", "role": "user", "text": "c"}\n')
    # The cursor ended mid-line, so the next read starts over; ids dedupe in the store.
    assert [r["text"] for r in import_jsonl.read_new(path, done.cursor).records] == ["a", "b", "c"]


def test_jsonl_byte_order_mark_and_blank_lines(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"ts": "2026-01-01", "role": "user", "text": "a"}\n\n  \n')
    batch = import_jsonl.read_jsonl(path)
    assert [r["text"] for r in batch.records] == ["a"] and batch.problems == []


# --------------------------------------------------------------------------------------------
# Registry


def test_registry_names_every_importer():
    assert reader("claude-code") is import_claude.read_claude_code
    assert reader("claude-code", incremental=True) is import_claude.read_new
    assert reader("jsonl", incremental=True) is import_jsonl.read_new
    assert reader("chatgpt") is import_chatgpt.read_chatgpt
    with pytest.raises(ValueError, match="read whole"):
        reader("chatgpt", incremental=True)
    with pytest.raises(ValueError, match="unknown import kind"):
        reader("slack")


def test_problem_reads_like_a_compiler_message():
    assert str(Problem("a.jsonl", 3, "bad")) == "a.jsonl:3: bad"
    assert str(Problem("c.json", None, "bad")) == "c.json: bad"


def test_chatgpt_reasoning_search_and_quotes():
    def node(id_, parent, role, content, **message):
        msg = {
            "id": id_,
            "author": {"role": role, "name": "browser" if role == "tool" else None},
            "create_time": 1718200000.0 + len(id_),
            "content": content,
            **message,
        }
        return id_, {"id": id_, "parent": parent, "children": [], "message": msg}

    mapping = dict(
        [
            node("q", None, "user", {"content_type": "text", "parts": ["Latest EUR/USD rate?"]}),
            node(
                "th",
                "q",
                "assistant",
                {
                    "content_type": "thoughts",
                    "thoughts": [
                        {
                            "summary": "Checking rates",
                            "content": "I should search for today's rate.",
                        }
                    ],
                },
            ),
            node(
                "srch",
                "th",
                "assistant",
                {"content_type": "text", "parts": ['search("EUR USD rate")']},
                recipient="browser",
            ),
            node(
                "quote",
                "srch",
                "tool",
                {
                    "content_type": "tether_quote",
                    "url": "https://example.org/fx",
                    "title": "FX rates",
                    "text": "EUR/USD 1.08",
                },
            ),
        ]
    )
    conv = {
        "title": "FX",
        "id": "c-fx",
        "create_time": 1718200000.0,
        "current_node": "quote",
        "mapping": mapping,
    }
    _, thinking, search, quote = import_chatgpt.conversation_records(conv)
    assert (thinking["type"], thinking["kind"]) == ("meta", "thinking")
    assert thinking["text"] == "Checking rates\nI should search for today's rate."
    assert (search["type"], search["recipient"]) == ("action", "browser")
    assert (quote["role"], quote["actor"], quote["text"]) == ("tool", "browser", "EUR/USD 1.08")
    assert (quote["url"], quote["title"]) == ("https://example.org/fx", "FX rates")
