"""Forgetting records in the topic tree: rewriting op lines so nothing names or quotes a forgotten record.

The op log is append-only except here: forgetting (issue 13) must remove a record's id from every
line, and names and summaries made from its text. Names are made again offline (key terms of what
remains), so forgetting never needs an LLM and gives the same bytes on every clone.
"""

from __future__ import annotations

from pathlib import Path

from ..format import log as logfmt
from ..format import safejson
from ..format import treelog

NO_TEXT_NAME = "Untitled topic"


def _norm(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def _leaks(value: str, forgotten: list[str]) -> bool:
    """Does a name or summary hold a forgotten text (whole, or the opening sentence quoted from it)?"""
    v = _norm(value)
    if any(t and t in v for t in forgotten):
        return True
    _, sep, opener = v.partition("; opens with: ")
    opener = opener.rstrip("…").strip()
    return bool(sep) and len(opener) >= 12 and any(opener in t for t in forgotten)


def forget_ops(root: Path, ids: set[str], texts: list[str]) -> list[str]:
    """See `tree.forget`: rewrite every shard (or a format-1 tree.json) without the forgotten records."""
    from ..format import tree as treefmt

    forgotten = [_norm(t) for t in texts if _norm(t)]
    if not treelog.exists(root):
        return _forget_tree_json(root, ids, forgotten)
    raw = {p: logfmt.read_plain(p) for p in treelog.shards(root)}
    parsed = {p: [_parse(line) for line in data.split(b"\n")] for p, data in raw.items()}
    ops, _ = treelog.read_ops(root)
    before = treelog.replay(ops)
    held = {
        d["topic"]
        for lines in parsed.values()
        for _, d in lines
        if d and d.get("op") == "place" and ids & set(d.get("records", []))
    }
    for lines in parsed.values():
        for _, d in lines:
            if d and d.get("op") in ("topic", "set"):
                for key in ("name", "summary"):
                    if _leaks(d.get(key, ""), forgotten) and not _replaced(
                        before, d, key, forgotten
                    ):
                        held.add(d["topic"])
    # A group's name comes from its sub-topics' records, so the ancestors of a touched topic are touched too.
    touched = set(held)
    for tid in held:
        touched.update(before.ancestry(tid))
    names = _names_again(root, before, touched, ids, forgotten, parsed)
    changed: list[str] = []
    for path, lines in parsed.items():
        out = [_rewrite(text, d, ids, names, forgotten, before) for text, d in lines]
        data = "\n".join(x for x in out if x is not None)
        data = (data + "\n") if data.strip() else ""
        if data.encode("utf-8") == raw[path]:
            continue
        rel = path.relative_to(root).as_posix()
        changed.append(rel)
        logfmt.rewrite(path, data.encode("utf-8") if data else None)
    treefmt.read(root)  # refresh the replay cache (the shards' fingerprints changed)
    return changed


def _parse(line: bytes) -> tuple[str, dict | None]:
    text = line.decode("utf-8", "replace").strip()
    try:
        data = safejson.loads(text) if text else None
    except ValueError:  # not JSON, nested too deep, a giant number, NaN
        data = None
    return text, data if isinstance(data, dict) else None


def _replaced(tree, d: dict, key: str, forgotten: list[str]) -> bool:
    """Is this line's `key` one a later line of its topic replaced with a value that quotes nothing
    forgotten? Then only this line changes: it takes the current value, and replay gives the same tree."""
    topic = tree.topics.get(d.get("topic"))
    current = getattr(topic, key, None) if topic is not None else None
    return isinstance(current, str) and current != d.get(key) and not _leaks(current, forgotten)


def _rewrite(
    text: str, d: dict | None, ids: set[str], names: dict, forgotten: list[str], tree
) -> str | None:
    """The line with the forgotten records and texts taken out; None drops it."""
    if not text:
        return None
    if d is None:  # a damaged line is kept for fsck to name, unless it holds what must go
        return None if any(i in text for i in ids) or _leaks(text, forgotten) else text
    new = dict(d)
    if isinstance(d.get("records"), list):
        new["records"] = [r for r in d["records"] if r not in ids]
        if not new["records"]:
            return None
    if d.get("op") in ("topic", "set") and d.get("topic") in names:
        name, summary = names[d["topic"]]
        for key, value in (("name", name), ("summary", summary), ("named_by", "offline")):
            if key in new:
                new[key] = value
    elif d.get("op") in ("topic", "set"):
        for key in ("name", "summary"):
            if _leaks(d.get(key, ""), forgotten) and _replaced(tree, d, key, forgotten):
                new[key] = getattr(tree.topics[d["topic"]], key)
    return text if new == d else treelog.dumps(new)


def _names_again(
    root: Path, tree, touched: set[str], ids: set[str], forgotten: list[str], parsed: dict
) -> dict[str, tuple[str, str]]:
    """topic id -> (name, summary) made offline from the records that remain in (or under) it."""
    from . import naming

    ever: dict[str, list[str]] = {}  # a topic that left the tree is named from what it ever held
    for lines in parsed.values():
        for _, d in lines:
            if d and d.get("op") == "place" and d.get("topic") in touched:
                ever.setdefault(d["topic"], []).extend(d.get("records", []))
    members: dict[str, list[str]] = {}
    for tid in touched:
        if tid in tree.topics:
            own = tree.topics[tid].records
            members[tid] = own or [
                r for k in sorted(tree.descendants(tid)) for r in tree.topics[k].records
            ]
        else:
            members[tid] = list(dict.fromkeys(ever.get(tid, [])))
    wanted = {r for recs in members.values() for r in recs} - ids
    texts = _record_texts(root, wanted)
    out = {}
    for tid in sorted(touched):
        rows = [texts[r] for r in members[tid] if r in texts][:60]
        words, roles = [t for t, _ in rows], [role for _, role in rows]
        name = naming.offline_name(words) if words else NO_TEXT_NAME
        summary = naming.offline_summary(words, roles) if words else ""
        if _leaks(name, forgotten):  # a remaining record may quote the forgotten text itself
            name = NO_TEXT_NAME
        if _leaks(summary, forgotten):
            summary = ""
        out[tid] = (name, summary)
    return out


def _record_texts(root: Path, wanted: set[str]) -> dict[str, tuple[str, str]]:
    from ..format import log as logfmt

    out: dict[str, tuple[str, str]] = {}
    if not wanted:
        return out
    for _day, path in logfmt.list_days(root).items():
        for ln in logfmt.read_lines(path):
            rec = ln.record
            if rec and rec["id"] in wanted and rec["id"] not in out:
                out[rec["id"]] = (rec.get("text", ""), rec.get("role", "user"))
    return out


def _forget_tree_json(root: Path, ids: set[str], forgotten: list[str]) -> list[str]:
    """Format 1: the same for tree.json, rewritten whole."""
    from ..format import tree as treefmt

    path = treefmt.path_of(root)
    if not path.exists():
        return []
    tree = treefmt.read_file(path)
    touched = {
        t.id
        for t in tree.topics.values()
        if ids & set(t.records) or _leaks(t.name, forgotten) or _leaks(t.summary, forgotten)
    }
    for tid in list(touched):
        touched.update(tree.ancestry(tid))
    for t in tree.topics.values():
        t.records = [r for r in t.records if r not in ids]
    tree.archived = [r for r in tree.archived if r not in ids]
    names = _names_again(root, tree, touched, ids, forgotten, {})
    for tid, (name, summary) in names.items():
        t = tree.topics.get(tid)
        if t is not None:
            t.name, t.summary, t.named_by = name, summary, "offline"
    text = tree.dumps()
    if path.read_text(encoding="utf-8") == text:
        return []
    logfmt.rewrite(path, text.encode("utf-8"))
    return [treefmt.FILENAME]
