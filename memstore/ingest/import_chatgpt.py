"""A ChatGPT data export (conversations.json, its folder or its .zip) as records.

Each conversation is a tree of message nodes (every regenerated reply or edited prompt is a new
branch); only the branch the user last saw counts: from `current_node` up through `parent` links
to the root, then reversed. Hidden nodes (the empty system root, custom instructions) and empty
messages are skipped.

Mapping by `content.content_type`:

    text, multimodal_text   type text; parts joined by newlines, an image part as a placeholder
                            "[image: <asset pointer> <w>x<h>]", an audio part as its transcript
    code                    type action, role assistant: the code the model ran, verbatim
    execution_output        type text, role tool: what running it printed
    tether_quote, tether_browsing_display
                            type text, role tool: the quoted page text (url and title in extras)
    thoughts, reasoning_recap
                            type meta, kind "thinking" / "reasoning_recap", role assistant
    system_error            type text, role tool, is_error
    anything else           its text or parts if it has some, else its JSON, as type meta

An assistant message addressed to a tool (`recipient` not "all", e.g. a browser search) is an
action. ts is the message's `create_time` as ISO-8601 UTC; a message without one takes the
previous message's, then the conversation's. session is the conversation's id (real exports hold
many conversations titled "New chat", which must not become one session); the title is kept as
the label `conversation_title`; id is "chatgpt:<message id>"; model is `metadata.model_slug`.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from memstore.errors import FormatError
from memstore.ingest.importers import ROLES, Batch, Problem, parse_json, record, unix_time

FILE_NAME = "conversations.json"


def read_chatgpt(path: str | os.PathLike) -> Batch:
    """Every conversation's current branch; a conversation that cannot be read is a Problem."""
    conversations = load_conversations(path)
    records, problems = [], []
    for index, conv in enumerate(conversations, start=1):
        name = (conv.get("id") or conv.get("title") if isinstance(conv, dict) else None) or "no id"
        try:
            records.extend(conversation_records(conv))
        except ValueError as exc:
            problems.append(Problem(str(path), None, f"conversation {index} ({name}): {exc}"))
            continue
        problems += [
            Problem(str(path), None, f"conversation {index} ({name}): {why}", skippable=True)
            for why in broken_links(conv["mapping"], conv.get("current_node"))
        ]
    return Batch(records, problems)


def broken_links(mapping: dict, current_node) -> list[str]:
    """What a message whose `parent` is not in the export does to a conversation, said aloud: the
    branch shown starts at it, or (off that branch) its messages are not imported."""
    branch = current_branch(mapping, current_node)
    out = []
    top = mapping[branch[0]] if branch else None
    parent = top.get("parent") if isinstance(top, dict) else None
    if parent is not None:
        out.append(
            f"message {branch[0]}'s parent {parent} is not in the export: the conversation is "
            "imported from that message on (what came before it is missing)"
        )
    on_branch = set(branch)
    cut = [
        k
        for k, n in mapping.items()
        if k not in on_branch
        and isinstance(n, dict)
        and n.get("parent") is not None
        and n.get("parent") not in mapping
        and _visible_text(n)
    ]
    for k in cut:
        size = len(_subtree(mapping, k))
        out.append(
            f"message {k}'s parent {mapping[k]['parent']} is not in the export and the branch shown "
            f"does not reach it: {size} message{'s' if size != 1 else ''} from it on not imported"
        )
    return out


def _visible_text(node: dict) -> bool:
    message = node.get("message")
    return isinstance(message, dict) and not _hidden(message)


def _subtree(mapping: dict, top: str) -> set[str]:
    seen, todo = set(), [top]
    while todo:
        node = todo.pop()
        if node in seen or node not in mapping:
            continue
        seen.add(node)
        todo += [c for c in (mapping[node] or {}).get("children") or [] if isinstance(c, str)]
    return seen


def load_conversations(path: str | os.PathLike) -> list:
    """The export's list of conversations; FormatError when the file is not one."""
    path = Path(path)
    try:
        if path.is_dir():
            path = path / FILE_NAME
            data = path.read_bytes()
        elif zipfile.is_zipfile(path):
            data = _read_from_zip(path)
        else:
            data = path.read_bytes()
    except (OSError, zipfile.BadZipFile) as exc:
        raise FormatError(path, f"cannot read the export ({exc})") from exc
    conversations, why = parse_json(data)
    if why is not None:
        raise FormatError(path, why, hint="Pass the export's conversations.json.")
    if isinstance(conversations, dict) and "mapping" in conversations:
        return [conversations]  # a single conversation saved on its own
    if not isinstance(conversations, list):
        raise FormatError(
            path, "expected a list of conversations", hint="Pass the export's conversations.json."
        )
    return conversations


def _read_from_zip(path: Path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if n == FILE_NAME or n.endswith("/" + FILE_NAME)]
        if not names:
            raise FormatError(path, f"the zip holds no {FILE_NAME}")
        return zf.read(min(names, key=len))  # the top-most one


def conversation_records(conv) -> list[dict]:
    """The records of one conversation's current branch, in order; ValueError if it has none."""
    if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
        raise ValueError("no 'mapping' of messages")
    mapping = conv["mapping"]
    conv_id = conv.get("conversation_id") or conv.get("id")
    context = {
        "session": conv_id or conv.get("title") or "untitled",
        "conversation_id": conv_id,
        "conversation_title": conv.get("title") or None,
        "gizmo_id": conv.get("gizmo_id"),
    }
    last_ts = _iso(conv.get("create_time")) or _iso(conv.get("update_time"), "update_time")
    out = []
    for node_id in current_branch(mapping, conv.get("current_node")):
        node = mapping[node_id]
        message = node.get("message") if isinstance(node, dict) else None
        if not isinstance(message, dict) or _hidden(message):
            continue
        rec = message_record(message, node_id, node.get("parent"), last_ts, context)
        if rec is not None:
            out.append(rec)
            last_ts = rec["ts"]
    return out


def current_branch(mapping: dict, current_node) -> list[str]:
    """Node ids from the root down to `current_node` (or to the newest leaf when it is missing)."""
    node = current_node if current_node in mapping else _last_leaf(mapping)
    branch, seen = [], set()
    while node in mapping and node not in seen:  # `seen` guards against a corrupt parent cycle
        seen.add(node)
        branch.append(node)
        node = (mapping[node] or {}).get("parent")
    return branch[::-1]


def _last_leaf(mapping: dict) -> str | None:
    """Following the last child from the root: the branch ChatGPT shows when none is recorded."""
    roots = [k for k, n in mapping.items() if (n or {}).get("parent") not in mapping]
    node = roots[0] if roots else None
    while node is not None and (mapping[node] or {}).get("children"):
        children = [c for c in mapping[node]["children"] if c in mapping]
        if not children:
            break
        node = children[-1]
    return node


def _hidden(message: dict) -> bool:
    metadata = message.get("metadata") or {}
    return bool(metadata.get("is_visually_hidden_from_conversation"))


def message_record(
    message: dict, node_id: str, parent, last_ts: str | None, context: dict
) -> dict | None:
    """The record for one visible message, or None when it has no text worth keeping."""
    author = message.get("author") or {}
    role = author.get("role") if author.get("role") in ROLES else "tool"
    content = message.get("content") or {}
    type_, role, text, extra = _content(content, role)
    recipient = message.get("recipient")
    if role == "assistant" and recipient not in (None, "all") and type_ == "text":
        type_ = "action"  # the model talking to a tool (a search, a plugin call), not to the user
    if not isinstance(text, str) or not text.strip():
        return None
    metadata = message.get("metadata") or {}
    model = metadata.get("model_slug") if role in ("assistant", "tool") else None
    ts = (
        _iso(message.get("create_time"), f"message {message.get('id') or node_id}: create_time")
        or last_ts
    )
    if ts is None:
        raise ValueError(
            f"message {message.get('id') or node_id} has no create_time, nor has its conversation"
        )
    return record(
        ts,
        _actor(role, author, model),
        role,
        type_,
        text,
        model,
        context["session"],
        id_=f"chatgpt:{message.get('id') or node_id}",
        conversation_id=context["conversation_id"],
        conversation_title=context["conversation_title"],
        parent=parent,
        recipient=recipient if recipient not in (None, "all") else None,
        attachments=[
            a.get("name") for a in metadata.get("attachments") or [] if isinstance(a, dict)
        ]
        or None,
        gizmo_id=context["gizmo_id"],
        **extra,
    )


def _actor(role: str, author: dict, model: str | None) -> str:
    if role == "assistant":
        return model or "assistant"
    if role == "tool":
        return author.get("name") or "tool"
    return role


def _content(content: dict, role: str) -> tuple[str, str, str | None, dict]:
    """(type, role, text, extra fields) for a message's content, by its content_type."""
    ctype = content.get("content_type", "text")
    extra = {} if ctype == "text" else {"content_type": ctype}
    if ctype in ("text", "multimodal_text"):
        return "text", role, _join_parts(content.get("parts")), extra
    if ctype == "code":
        return (
            "action",
            "assistant",
            content.get("text"),
            {**extra, "language": content.get("language")},
        )
    if ctype == "execution_output":
        return "text", "tool", content.get("text"), extra
    if ctype == "tether_quote":
        text = content.get("text") or content.get("title")
        return (
            "text",
            "tool",
            text,
            {**extra, "url": content.get("url"), "title": content.get("title")},
        )
    if ctype == "tether_browsing_display":
        return "text", "tool", content.get("result") or content.get("summary"), extra
    if ctype == "thoughts":
        return (
            "meta",
            "assistant",
            _join_thoughts(content.get("thoughts")),
            {**extra, "kind": "thinking"},
        )
    if ctype == "reasoning_recap":
        return "meta", "assistant", content.get("content"), {**extra, "kind": "reasoning_recap"}
    if ctype == "system_error":
        text = ": ".join(str(x) for x in (content.get("name"), content.get("text")) if x)
        return "text", "tool", text, {**extra, "is_error": True}
    return "meta", role, _fallback_text(content), {**extra, "kind": ctype}


def _join_parts(parts) -> str:
    out = []
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict):
            out.append(_part_text(part))
    return "\n".join(p for p in out if p)


def _part_text(part: dict) -> str:
    """A non-text part of a multimodal message: the words if it has some, else a placeholder."""
    ptype = part.get("content_type", "")
    if isinstance(part.get("text"), str):  # audio_transcription and similar
        return part["text"]
    if ptype == "image_asset_pointer":
        size = (
            f" {part['width']}x{part['height']}" if part.get("width") and part.get("height") else ""
        )
        return f"[image: {part.get('asset_pointer', 'unknown')}{size}]"
    return f"[{ptype or 'attachment'}]"


def _join_thoughts(thoughts) -> str:
    out = []
    for thought in thoughts if isinstance(thoughts, list) else []:
        if isinstance(thought, dict):
            parts = (thought.get("summary"), thought.get("content"))
            out.append("\n".join(t for t in parts if isinstance(t, str) and t))
    return "\n\n".join(t for t in out if t)


def _fallback_text(content: dict) -> str:
    if isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(content.get("parts"), list):
        return _join_parts(content["parts"])
    rest = {k: v for k, v in content.items() if k != "content_type"}
    return json.dumps(rest, ensure_ascii=False) if rest else ""


def _iso(value, what: str = "create_time") -> str | None:
    """A Unix time (ChatGPT writes floats) as ISO-8601 UTC; None when there is none."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return unix_time(value, what).isoformat()
