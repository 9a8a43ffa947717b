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
import stat
import zipfile
import zlib
from pathlib import Path

from memstore.errors import FormatError
from memstore.ingest.importers import ROLES, Batch, Problem, parse_json, record, unix_time

FILE_NAME = "conversations.json"
# The most of conversations.json read into memory (on disk, or uncompressed in the export's zip).
# Real exports' conversations.json reach a few hundred MB; a bigger one is refused, not read.
MAX_EXPORT_BYTES = 2 * 1024**3


def read_chatgpt(path: str | os.PathLike) -> Batch:
    """Every conversation's current branch; a conversation that cannot be read is a Problem."""
    conversations = load_conversations(path)
    records, problems = [], []
    for index, conv in enumerate(conversations, start=1):
        name = _conversation_name(conv)
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


def _conversation_name(conv) -> str:
    if isinstance(conv, dict):
        for key in ("id", "conversation_id", "title"):
            if isinstance(conv.get(key), str) and conv[key]:
                return conv[key]
    return "no id"


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
    if path.is_dir():
        path = path / FILE_NAME
    data = _read_export(path)
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


def _read_export(path: Path) -> bytes:
    """The bytes of conversations.json (or of the one in the export's zip), at most
    MAX_EXPORT_BYTES; FormatError naming the file for anything that cannot be read."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise FormatError(path, f"cannot read the export ({exc})") from exc
    if not stat.S_ISREG(info.st_mode):  # a FIFO would hang, a device never ends
        raise FormatError(
            path,
            f"cannot read the export: not a regular file ({_file_kind(info.st_mode)})",
            hint="Pass the export's conversations.json, its folder or its .zip.",
        )
    try:
        if zipfile.is_zipfile(path):  # the zip itself may be far bigger (the export's images)
            return _read_from_zip(path)
        if info.st_size > MAX_EXPORT_BYTES:
            raise FormatError(path, _too_big(info.st_size, "the file"))
        with open(path, "rb") as f:
            data = f.read(MAX_EXPORT_BYTES + 1)
    except _READ_ERRORS as exc:
        raise FormatError(path, f"cannot read the export ({_why(exc)})") from exc
    if len(data) > MAX_EXPORT_BYTES:  # it grew since it was looked at
        raise FormatError(path, _too_big(len(data), "the file"))
    return data


# What reading a hostile zip raises: encrypted (RuntimeError), a compression method Python lacks
# (NotImplementedError), corrupt deflate/bzip2/lzma data (zlib.error, OSError, LZMAError), a bad CRC
# or header (BadZipFile), data cut short (EOFError).
_READ_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    RuntimeError,
    NotImplementedError,
    zipfile.BadZipFile,
    zlib.error,
)
try:
    import lzma

    _READ_ERRORS += (lzma.LZMAError,)
except ImportError:  # a Python built without lzma cannot open such zips anyway
    pass


def _why(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _too_big(size: int, what: str) -> str:
    return (
        f"{what} is {_bytes(size)}, over the {_bytes(MAX_EXPORT_BYTES)} cap on an export's "
        f"{FILE_NAME}: not read"
    )


def _bytes(n: int) -> str:
    size, unit = float(n), "bytes"
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{n} bytes" if unit == "bytes" else f"{size:.1f} {unit}"


def _file_kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return kind
    return "not a plain file"


def _read_from_zip(path: Path) -> bytes:
    with zipfile.ZipFile(path) as zf:
        members = [
            i
            for i in zf.infolist()
            if i.filename == FILE_NAME or i.filename.endswith("/" + FILE_NAME)
        ]
        if not members:
            raise FormatError(path, f"the zip holds no {FILE_NAME}")
        member = min(members, key=lambda i: len(i.filename))  # the top-most one
        if member.file_size > MAX_EXPORT_BYTES:  # checked before a byte is inflated
            raise FormatError(
                path, _too_big(member.file_size, f"its {member.filename} (uncompressed)")
            )
        if member.flag_bits & 0x1:  # zipfile would say so with its ZipInfo's repr
            raise FormatError(path, f"cannot read the export (its {member.filename} is encrypted)")
        with zf.open(member) as f:
            data = f.read(MAX_EXPORT_BYTES + 1)
        if len(data) > MAX_EXPORT_BYTES:
            raise FormatError(path, _too_big(len(data), f"its {member.filename} (uncompressed)"))
        return data


def conversation_records(conv) -> list[dict]:
    """The records of one conversation's current branch, in order; ValueError (saying what is
    wrong) for a conversation whose tree or messages are not the shape an export has."""
    if not isinstance(conv, dict) or not isinstance(conv.get("mapping"), dict):
        raise ValueError("no 'mapping' of messages")
    mapping = conv["mapping"]
    _check_tree(mapping, conv.get("current_node"))
    conv_id = _str(conv.get("conversation_id")) or _str(conv.get("id"))
    title = _str(conv.get("title"))
    context = {
        "session": conv_id or title or "untitled",
        "conversation_id": conv_id,
        "conversation_title": title,
        "gizmo_id": _str(conv.get("gizmo_id")),
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


def _check_tree(mapping: dict, current_node) -> None:
    """ValueError naming the first link of a conversation's tree that is not what an export
    writes: current_node and every `parent` an id (a string) or null, every node an object (or
    null), every `children` a list of ids."""
    if current_node is not None and not isinstance(current_node, str):
        raise ValueError(f"current_node is {_kind(current_node)}, not a message id")
    for key, node in mapping.items():
        if node is None:
            continue
        if not isinstance(node, dict):
            raise ValueError(f"message node {key} is {_kind(node)}, not an object")
        parent = node.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise ValueError(f"message {key}'s parent is {_kind(parent)}, not a message id")
        children = node.get("children")
        if children is not None and (
            not isinstance(children, list) or not all(isinstance(c, str) for c in children)
        ):
            raise ValueError(f"message {key}'s children are {_kind(children)}, not a list of ids")


def _kind(value) -> str:
    """What a JSON value is, in words, for a note."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return "null" if value is None else type(value).__name__


def _str(value) -> str | None:
    """A string field's value; None when it is missing, empty or not a string."""
    return value if isinstance(value, str) and value else None


def _loop(path: list[str], again: str) -> str:
    """The ids around a loop in the tree, from `again` back to it: "a -> b -> a"."""
    ids = path[path.index(again) :] + [again]
    if len(ids) > 6:
        ids = ids[:3] + [f"... ({len(ids) - 4} more)"] + ids[-1:]
    return " -> ".join(ids)


def current_branch(mapping: dict, current_node) -> list[str]:
    """Node ids from the root down to `current_node` (or to the newest leaf when it is missing);
    ValueError when the `parent` links loop."""
    node = current_node if current_node in mapping else _last_leaf(mapping)
    branch, seen = [], set()
    while node in mapping:
        if node in seen:
            if node == branch[-1]:
                raise ValueError(f"message {node} is its own parent (a loop)")
            raise ValueError(f"the messages' parent links loop ({_loop(branch, node)})")
        seen.add(node)
        branch.append(node)
        node = (mapping[node] or {}).get("parent")
    return branch[::-1]


def _last_leaf(mapping: dict) -> str | None:
    """Following the last child from the root: the branch ChatGPT shows when none is recorded.
    ValueError when the `children` links loop, or every message has a parent (no root)."""
    roots = [k for k, n in mapping.items() if (n or {}).get("parent") not in mapping]
    if mapping and not roots:
        raise ValueError("every message's parent is another of its messages: the parent links loop")
    node = roots[0] if roots else None
    path, seen = [node], {node}
    while node is not None and (mapping[node] or {}).get("children"):
        children = [c for c in mapping[node]["children"] if c in mapping]
        if not children:
            break
        node = children[-1]
        if node in seen:
            raise ValueError(f"the messages' children links loop ({_loop(path, node)})")
        seen.add(node)
        path.append(node)
    return node


def _hidden(message: dict) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and bool(metadata.get("is_visually_hidden_from_conversation"))


def _object(message: dict, field: str, message_id: str) -> dict:
    """A message's `author`, `content` or `metadata`: {} when missing or null, ValueError when it
    is not an object."""
    value = message.get(field)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"message {message_id}'s {field} is {_kind(value)}, not an object")
    return value


def message_record(
    message: dict, node_id: str, parent, last_ts: str | None, context: dict
) -> dict | None:
    """The record for one visible message, or None when it has no text worth keeping; ValueError
    when its author, content or metadata is not an object."""
    message_id = _str(message.get("id")) or node_id
    author = _object(message, "author", message_id)
    content = _object(message, "content", message_id)
    metadata = _object(message, "metadata", message_id)
    if not isinstance(content.get("content_type", "text"), str):
        raise ValueError(
            f"message {message_id}'s content_type is {_kind(content['content_type'])}, not a name"
        )
    role = author.get("role") if author.get("role") in ROLES else "tool"
    type_, role, text, extra = _content(content, role)
    recipient = _str(message.get("recipient"))
    if role == "assistant" and recipient not in (None, "all") and type_ == "text":
        type_ = "action"  # the model talking to a tool (a search, a plugin call), not to the user
    if not isinstance(text, str) or not text.strip():
        return None
    model = _str(metadata.get("model_slug")) if role in ("assistant", "tool") else None
    ts = _iso(message.get("create_time"), f"message {message_id}: create_time") or last_ts
    if ts is None:
        raise ValueError(f"message {message_id} has no create_time, nor has its conversation")
    attachments = metadata.get("attachments")  # anything but a list of objects is ignored
    return record(
        ts,
        _actor(role, author, model),
        role,
        type_,
        text,
        model,
        context["session"],
        id_=f"chatgpt:{message_id}",
        conversation_id=context["conversation_id"],
        conversation_title=context["conversation_title"],
        parent=parent,
        recipient=recipient if recipient not in (None, "all") else None,
        attachments=[
            a["name"]
            for a in (attachments if isinstance(attachments, list) else [])
            if isinstance(a, dict) and _str(a.get("name"))
        ]
        or None,
        gizmo_id=context["gizmo_id"],
        **extra,
    )


def _actor(role: str, author: dict, model: str | None) -> str:
    if role == "assistant":
        return model or "assistant"
    if role == "tool":
        return _str(author.get("name")) or "tool"
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
            {**extra, "language": _str(content.get("language"))},
        )
    if ctype == "execution_output":
        return "text", "tool", content.get("text"), extra
    if ctype == "tether_quote":
        text = content.get("text") or content.get("title")
        return (
            "text",
            "tool",
            text,
            {**extra, "url": _str(content.get("url")), "title": _str(content.get("title"))},
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
