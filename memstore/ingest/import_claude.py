"""Claude Code session transcripts (~/.claude/projects/<project>/<session>.jsonl) as records.

Mapping (each row of the transcript is one JSON object; `message.content` is a string or blocks):

    text block            type text, role user/assistant; harness echoes and compaction
                          summaries become type meta (kind "harness" / "compaction")
    tool_use block        type action, role assistant, text "<tool name>: <input as JSON>"
    tool_result block     type text, role tool, actor "tool", the result verbatim (it is what the
                          tool said, not something done, so it is searchable as text)
    thinking block        type meta, kind "thinking", role assistant (kept, but not shown as said)
    image/document block  type meta, kind "image"/"document", a placeholder naming the media type
    "summary" row         type meta, kind "summary", role system: Claude Code's title for the
                          conversation ending at `leafUuid`; it has no timestamp of its own
    "system" row          type meta, role system, kind = the row's subtype
    other rows            skipped (file-history snapshots, queue operations, progress ...)

Ids are "cc:<uuid>" for a row with a single block (or string content) and "cc:<uuid>:<i>" (i the
block's position) when a row holds several; summaries are "cc:summary:<leafUuid>:<text hash>".
Redacted thinking (opaque ciphertext) is dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from memstore.ingest.importers import (
    Batch,
    Line,
    Lines,
    Problem,
    ReadResult,
    at_line,
    decode_line,
    parse_json,
    printable,
    read_lines,
    record,
)

HARNESS_PREFIXES = (
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<task-notification>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
)
COMPACTION_PREFIX = "This session is being continued from a previous conversation"


def read_claude_code(path: str | os.PathLike) -> Batch:
    """Every record of one session file, or of every *.jsonl under a folder (recursively)."""
    records, problems = [], []
    for file in session_files(path):
        result = read_new(file)
        records.extend(result.records)
        problems.extend(result.problems)
    return Batch(records, problems)


def session_files(path: str | os.PathLike) -> list[Path]:
    """The session files at `path`: itself when a file, else every *.jsonl below it, sorted."""
    path = Path(path)
    if path.is_file():
        return [path]
    found = []
    # os.walk does not follow symlinked folders, so a link loop cannot trap us.
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        found.extend(Path(folder, name) for name in sorted(files) if name.endswith(".jsonl"))
    return found


def read_new(path: str | os.PathLike, cursor=None, final: bool = False) -> ReadResult:
    """Records from the complete lines after `cursor` (a Cursor, a byte offset or None).

    Rows of unknown shape are skipped; lines that are not JSON objects are problems. A title row
    with no timestamp takes the previous row's, or the next one's; when the file has neither yet,
    reading stops before it so that it is dated once more of the file exists.
    """
    lines = read_lines(path, cursor, final)
    session = printable(Path(path).stem)
    last_ts = lines.start.last_ts
    per_line: list[tuple[list[dict], Problem | None]] = []
    undated: list[dict] = []
    first_undated = None
    for i, line in enumerate(lines.lines):
        records, problem = _parse_line(lines, line, session)
        per_line.append((records, problem))
        for rec in records:
            if rec["ts"] is None and last_ts is None:
                undated.append(rec)
                first_undated = i if first_undated is None else first_undated
            elif rec["ts"] is None:
                rec["ts"] = last_ts
            else:
                last_ts = rec["ts"]
                for waiting in undated:
                    waiting["ts"] = last_ts
                undated, first_undated = [], None
    consumed = len(per_line) if first_undated is None else first_undated
    records = [rec for recs, _ in per_line[:consumed] for rec in recs]
    problems = [p for _, p in per_line[:consumed] if p is not None]
    # Undated rows waiting means no row had a time yet, so last_ts is still the start's.
    return ReadResult(records, lines.cursor_after(consumed, last_ts), problems)


def _parse_line(lines: Lines, line: Line, session: str) -> tuple[list[dict], Problem | None]:
    text, problem = decode_line(lines, line)
    if problem is not None:
        return [], problem
    if not text.strip():
        return [], None
    row, why = parse_json(text)
    if why is not None:
        return [], Problem(str(lines.path), line.number, why)
    if not isinstance(row, dict):
        return [], Problem(str(lines.path), line.number, "not a JSON object")
    return [at_line(r, line.number) for r in row_records(row, session)], None


def row_records(row: dict, default_session: str) -> list[dict]:
    """The records one transcript row yields (none for rows of other kinds)."""
    kind = row.get("type")
    if kind in ("user", "assistant") and isinstance(row.get("message"), dict):
        return _message_records(row, kind, default_session)
    if kind == "summary" and _nonempty(row.get("summary")):
        return [_summary_record(row, default_session)]
    if kind == "system" and _nonempty(row.get("content")):
        return [_system_record(row, default_session)]
    return []


def _row_context(row: dict, default_session: str) -> dict:
    """The fields every record of a row shares: time, session and where it was said."""
    ts = row.get("timestamp")
    return {
        "ts": ts if isinstance(ts, str) and ts else None,
        "session": row.get("sessionId") or default_session,
        "extra": {
            "sidechain": row.get("isSidechain") is True,
            "parent": row.get("parentUuid"),
            "cwd": row.get("cwd"),
            "git_branch": row.get("gitBranch"),
            "agent_id": row.get("agentId"),
        },
    }


def _message_records(row: dict, kind: str, default_session: str) -> list[dict]:
    ctx = _row_context(row, default_session)
    message = row["message"]
    role = message.get("role") if message.get("role") in ("user", "assistant") else kind
    model = message.get("model") if role == "assistant" else None
    speaker = {
        "role": role,
        "actor": (model or "assistant") if role == "assistant" else "user",
        "model": model,
    }
    if role == "assistant" and message.get("id"):
        ctx["extra"]["message_id"] = message["id"]
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    if not isinstance(blocks, list):
        return []
    uuid = row.get("uuid")
    out = []
    for i, block in enumerate(blocks):
        fields = _block_fields(block, speaker, row) if isinstance(block, dict) else None
        if fields is None:
            continue
        id_ = None if not uuid else f"cc:{uuid}" if len(blocks) == 1 else f"cc:{uuid}:{i}"
        extra = {**ctx["extra"], **fields.pop("extra", {})}
        out.append(record(ctx["ts"], session=ctx["session"], id_=id_, **fields, **extra))
    return out


def _block_fields(block: dict, speaker: dict, row: dict) -> dict | None:
    """actor/role/type_/text/model (+ extra) for one content block, or None to skip it."""
    kind = block.get("type")
    if kind == "text" and _nonempty(block.get("text")):
        text = block["text"]
        meta_kind = _meta_kind(text, row)
        return {
            **speaker,
            "type_": "meta" if meta_kind else "text",
            "text": text,
            "extra": {"kind": meta_kind},
        }
    if kind == "tool_use":
        name = block.get("name") or "tool"
        return {
            **speaker,
            "type_": "action",
            "text": f"{name}: {_json(block.get('input', {}))}",
            "extra": {"tool_name": name, "tool_use_id": block.get("id")},
        }
    if kind == "tool_result":
        text = _result_text(block.get("content"))
        if not text.strip():
            return None
        return {
            "actor": "tool",
            "role": "tool",
            "model": None,
            "type_": "text",
            "text": text,
            "extra": {
                "tool_use_id": block.get("tool_use_id"),
                "is_error": block.get("is_error") is True,
            },
        }
    if kind == "thinking" and _nonempty(block.get("thinking")):
        return {
            **speaker,
            "type_": "meta",
            "text": block["thinking"],
            "extra": {"kind": "thinking"},
        }
    if kind in ("image", "document"):
        return {**speaker, "type_": "meta", "text": _placeholder(block), "extra": {"kind": kind}}
    return None


def _meta_kind(text: str, row: dict) -> str | None:
    """Why a text block is not something a person or the model said, or None when it is."""
    if row.get("isCompactSummary") is True or text.startswith(COMPACTION_PREFIX):
        return "compaction"
    if row.get("isMeta") is True or text.lstrip().startswith(HARNESS_PREFIXES):
        return "harness"
    return None


def _result_text(content) -> str:
    """A tool result's content verbatim: a string, or its text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            parts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") in ("image", "document"):
            parts.append(_placeholder(block))
    return "\n".join(parts)


def _placeholder(block: dict) -> str:
    """A one-line stand-in for an attachment; the bytes themselves do not belong in a text log."""
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    what = source.get("media_type") or source.get("type") or "unknown type"
    title = f" {block['title']!r}" if isinstance(block.get("title"), str) else ""
    return f"[{block.get('type')}{title}: {what}]"


def _summary_record(row: dict, default_session: str) -> dict:
    text = row["summary"]
    leaf = row.get("leafUuid") or "none"
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    return record(
        None,
        "system",
        "system",
        "meta",
        text,
        None,
        row.get("sessionId") or default_session,
        id_=f"cc:summary:{leaf}:{digest}",
        kind="summary",
        leaf=row.get("leafUuid"),
    )


def _system_record(row: dict, default_session: str) -> dict:
    ctx = _row_context(row, default_session)
    uuid = row.get("uuid")
    return record(
        ctx["ts"],
        "system",
        "system",
        "meta",
        row["content"],
        None,
        ctx["session"],
        id_=f"cc:{uuid}" if uuid else None,
        kind=row.get("subtype") or "system",
        **ctx["extra"],
    )


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _nonempty(value) -> bool:
    return isinstance(value, str) and bool(value.strip())
