"""A TRACE (trace-memory) saved tree with its conversation as records, its topics mapped into tree.json.

TRACE's `save(path, save_conversation=True)` writes `{"tree": <ROOT topic>, "conversation": [...],
"archived": [<message node>...]}`. Topic nodes carry `node_id`, `topic_name`, `summary`,
`created_at` (Unix seconds) and `children`; message nodes carry `message_index`, the position of the
first message of their exchange in `conversation` (the only full copy of the text: the tree keeps
200 characters). Mapping:

    conversation[i]     one record, id "trace:<root node_id>:<i>" (re-importing a longer save of
                        the same tree adds only the new messages), role as given, session = file stem
    time                TRACE keeps no per-message time, so a message is dated by the creation time
                        of the topic that holds it, kept strictly increasing in conversation order;
                        such records carry ts_approx = true and trace_index = i
    message node        owns conversation[message_index .. next message node's index)
    topic node          a memstore topic (id "t" + hash of node_id), same name, summary and nesting;
                        ROOT is the tree's implicit root
    "archived"          those messages' records become the tree's archived records
    current topic       TRACE's rule: follow the last child from ROOT

A save without its conversation is refused: memstore never stores a truncated copy as verbatim text.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
from pathlib import Path

from ..errors import FormatError, UsageError
from ..format import tree as treefmt
from ..format.record import RecordError
from ..format.timeutil import UTC, to_iso
from ..format.tree import Topic
from .importers import as_imported, printable, unix_time

ROLES = {"user", "assistant", "system", "tool"}
RECORD_KEYS = {
    "ts",
    "actor",
    "role",
    "type",
    "text",
    "model",
    "session",
    "id",
    "hash",
    "seg",
    "source",
    "supersedes",
    "meta",
}
HINT = "Nothing was imported."
UNPLACED = {"unplaced": True}  # the owner of messages that hang directly under ROOT: no topic


class TraceFile:
    """A parsed TRACE save: its topics (parent first), message ownership and the conversation."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data
        root = data.get("tree")
        if not isinstance(root, dict) or root.get("type", "topic") != "topic":
            raise FormatError(path, 'no "tree" topic node: not a TRACE save', hint=HINT)
        conv = data.get("conversation")
        if conv is None:
            raise FormatError(
                path,
                "saved without its conversation: the tree holds only the first 200 characters "
                "of each message, which memstore will not store as verbatim text",
                hint="Save it again from TRACE with save(path, save_conversation=True) "
                "(auto_save_path always does). Nothing was imported.",
            )
        if not isinstance(conv, list):
            raise FormatError(
                path, '"conversation" must be a list of {role, content} messages', hint=HINT
            )
        self.root = root
        self.conversation = conv
        self.root_id = (
            str(root.get("node_id") or "")
            or hashlib.sha256(printable(path.name).encode()).hexdigest()[:16]
        )
        # (topic node, parent topic node or None for ROOT's children), parents before children
        self.topics: list[tuple[dict, dict | None]] = []
        self.owner: dict[
            int, dict | None
        ] = {}  # message_index -> topic node, UNPLACED, or None (archived)
        self._walk()

    def _walk(self) -> None:
        # Iterative: TRACE deepens the tree by one level per continuation, so a long talk is deep.
        stack: list[tuple[dict, dict | None, bool]] = [(self.root, None, True)]
        while stack:
            node, parent, is_root = stack.pop()
            if not is_root:
                self.topics.append((node, parent))
            children = node.get("children") or []
            if not isinstance(children, list):
                raise FormatError(
                    self.path,
                    f'topic {node.get("topic_name")!r}: "children" must be a list',
                    hint=HINT,
                )
            for child in reversed(children):
                if not isinstance(child, dict):
                    raise FormatError(self.path, "a tree node must be an object", hint=HINT)
                if child.get("type") == "message":
                    self._own(child, None if is_root else node)
                elif child.get("type") == "topic":
                    stack.append((child, None if is_root else node, False))
                else:
                    raise FormatError(
                        self.path, f"unknown node type {child.get('type')!r}", hint=HINT
                    )
        for child in self.data.get("archived") or []:
            if isinstance(child, dict) and child.get("type") == "message":
                self._own(child, None, archived=True)

    def _own(self, msg: dict, topic: dict | None, archived: bool = False) -> None:
        idx = msg.get("message_index")
        if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
            raise FormatError(self.path, f"message node with message_index {idx!r}", hint=HINT)
        self.owner.setdefault(idx, None if archived else (topic or UNPLACED))

    def owners(self) -> list[dict | None]:
        """For each conversation index, the topic node of the exchange that holds it (None: archived)."""
        starts = sorted(i for i in self.owner if i < len(self.conversation))
        out: list[dict | None] = [UNPLACED] * len(self.conversation)
        for n, start in enumerate(starts):
            end = starts[n + 1] if n + 1 < len(starts) else len(self.conversation)
            for i in range(start, end):
                out[i] = self.owner[start]
        return out

    def current(self) -> dict | None:
        """TRACE's current node: follow the last child from ROOT while it is a topic."""
        node = self.root
        while True:
            kids = node.get("children") or []
            last = kids[-1] if kids else None
            if isinstance(last, dict) and last.get("type") == "topic":
                node = last
                continue
            return None if node is self.root else node


def load(path: Path) -> TraceFile:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(
        max(limit, 20000)
    )  # deeply nested topics; json's decoder recurses per level
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise FormatError(
            path, f"not UTF-8 ({exc.reason} at byte {exc.start})", hint=HINT
        ) from None
    except json.JSONDecodeError as exc:
        raise FormatError(path, f"not valid JSON ({exc.msg})", line=exc.lineno, hint=HINT) from None
    except (
        RecursionError,
        ValueError,
    ) as exc:  # json raises these for hostile input, not JSONDecodeError
        why = (
            "nested too deep"
            if isinstance(exc, RecursionError)
            else "a number with too many digits"
        )
        raise FormatError(path, f"not valid JSON we can read ({why})", hint=HINT) from None
    finally:
        sys.setrecursionlimit(limit)
    if not isinstance(data, dict):
        raise FormatError(path, "not a TRACE save (the top level must be an object)", hint=HINT)
    return TraceFile(path, data)


def topic_id(node: dict) -> str:
    key = str(
        node.get("node_id")
        or f"{node.get('topic_name')}|{node.get('start_index')}|{node.get('created_at')}"
    )
    return "t" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def _text(content) -> str | None:
    """A message's text: a string as is, or the text parts of an OpenAI-style content list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "\n".join(parts) if parts else None
    return None


def _unix(value) -> float | None:
    """A usable Unix time, else None: a time outside the calendar (1e30, inf) counts as none given,
    as TRACE's times are only an approximation of when each message was said."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        return None
    try:
        unix_time(value, "created_at")
    except ValueError:
        return None
    return float(value)


def read_records(tf: TraceFile, fallback_time: float) -> tuple[list[dict | None], list[str]]:
    """One raw record per conversation message (None where a message has no text), and notes."""
    owners = tf.owners()
    root_time = _unix(tf.root.get("created_at")) or fallback_time
    session = printable(tf.path.stem)
    out: list[dict | None] = []
    notes: list[str] = []
    prev = None
    for i, msg in enumerate(tf.conversation):
        if not isinstance(msg, dict):
            raise FormatError(tf.path, f"conversation[{i}] is not a message object", hint=HINT)
        role = msg.get("role")
        if role not in ROLES:
            raise FormatError(
                tf.path,
                f"conversation[{i}]: role {role!r} is not one of {', '.join(sorted(ROLES))}",
                hint=HINT,
            )
        text = _text(msg.get("content"))
        owner = owners[i]
        anchor = _unix(owner.get("created_at")) if owner else None
        t = anchor or root_time
        t = t if prev is None or t > prev else prev + 0.001  # conversation order is the truth
        prev = t
        if text is None or not text.strip():
            notes.append(f"skipped conversation[{i}] ({role}): no text")
            out.append(None)
            continue
        try:  # the steps that keep conversation order can pass the calendar's end (year 9999)
            when = unix_time(t, f"conversation[{i}]: its time")
        except ValueError as exc:
            raise FormatError(tf.path, str(exc), hint=HINT) from None
        rec = {
            "ts": to_iso(when),
            "actor": role,
            "role": role,
            "type": "text",
            "text": text,
            "model": None,
            "session": session,
            "id": f"trace:{tf.root_id}:{i}",
            "ts_approx": True,
            "trace_index": i,
        }
        for k, v in msg.items():
            if k in ("role", "content"):
                continue
            rec[k if k not in RECORD_KEYS else f"trace_{k}"] = v
        if not isinstance(msg.get("content"), str):
            rec["content_parts"] = msg.get("content")
        out.append(rec)
    return out, notes


def build_tree(store, tf: TraceFile, ids: list[str | None], keep: set[str], times: dict[str, str]):
    """The store's tree with this file's topics merged in by id; only record ids in `keep` are placed.

    `times` maps record id -> its ts, for each topic's last_active.
    """
    tree = treefmt.read(store.root)
    placed = set(tree.topic_of()) | set(tree.archived)
    by_node: dict[int, list[str]] = {}
    archived: list[str] = []
    for i, owner in enumerate(tf.owners()):
        rid = ids[i]
        if rid is None or rid not in keep or rid in placed:
            continue
        if owner is None:
            archived.append(rid)
        elif owner is not UNPLACED:
            by_node.setdefault(id(owner), []).append(rid)
    texts = {rid: tf.conversation[i] for i, rid in enumerate(ids) if rid}
    for node, parent in tf.topics:
        tid = topic_id(node)
        recs = by_node.get(id(node), [])
        created = _unix(node.get("created_at"))
        created_iso = to_iso(dt.datetime.fromtimestamp(created, UTC)) if created else ""
        last = max([created_iso, *(times[r] for r in recs)])
        if tid in tree.topics:
            t = tree.topics[tid]
            t.records += recs
            t.last_active = max(t.last_active, last)
            continue
        name, named_by = _name(node, [_text(texts[r].get("content")) or "" for r in recs])
        summary = node.get("summary") if isinstance(node.get("summary"), str) else ""
        tree.topics[tid] = Topic(
            id=tid,
            name=name,
            summary=summary,
            parent=topic_id(parent) if parent else None,
            records=recs,
            created=created_iso,
            last_active=last,
            named_by=named_by,
        )
    tree.archived = sorted(set(tree.archived) | set(archived))
    cur = tf.current()
    if cur is not None:
        tree.current = topic_id(cur)
    return tree


def _name(node: dict, texts: list[str]) -> tuple[str, str]:
    """TRACE's LLM name, unless it is missing or an error string that TRACE stored as a name."""
    from ..tree.naming import offline_name

    name = node.get("topic_name")
    if (
        isinstance(name, str)
        and name.strip()
        and not name.strip().lower().startswith(("error", "untitled"))
    ):
        return name.strip(), "llm"
    return offline_name(texts), "offline"


def import_trace(
    store, path, progress=None, allow_secrets: bool = False, secrets: str | None = None
):
    """Import one TRACE save: its messages as records and its topics into tree.json, one commit."""
    path = Path(path)
    tf = load(path)
    raw, notes = read_records(tf, path.stat().st_mtime)
    records: list[dict] = []
    ids: list[str | None] = []
    origins: dict = {}
    for i, rec in enumerate(raw):
        if rec is None:
            ids.append(None)
            continue
        try:
            norm = as_imported(store, rec, derive_id=False)
        except RecordError as exc:
            raise FormatError(path, f"conversation[{i}]: {exc}", hint=HINT) from None
        records.append(norm)
        origins[id(norm)] = f"{path}: conversation[{i}]"
        ids.append(norm["id"])
    all_ids = [r for r in ids if r]

    def place(st, added, _vectors):
        keep = {r["id"] for r in added} | st.index(update=False).known_ids(all_ids)
        times = {r["id"]: r["ts"] for r in records}
        return treefmt.write(st.root, build_tree(st, tf, ids, keep, times))

    def message(added):
        return f"Import {len(added)} trace records and {len(tf.topics)} topics from {printable(path.name)}"

    res = store.write(
        records,
        message,
        progress=progress,
        after_write=place,
        secrets=secrets or ("allow" if allow_secrets else "refuse"),
        origins=origins,
    )
    res.notes = notes + res.notes
    return res
