"""Showing the topic tree: indented text, Mermaid, Graphviz dot and JSON, all iterative (no depth limit)."""

from __future__ import annotations

import re

from ..format.timeutil import from_iso


def _day(ts: str, tz) -> str:
    return from_iso(ts).astimezone(tz).strftime("%Y-%m-%d") if ts else "?"


def subtree_counts(tree) -> dict[str, int]:
    """Records under each topic, its descendants included, in one pass (children before parents)."""
    order = [t.id for _, t in tree.walk()]
    total = {tid: len(tree.topics[tid].records) for tid in tree.topics}
    for tid in reversed(order):
        parent = tree.topics[tid].parent
        if parent in total:
            total[parent] += total[tid]
    return total


def text(tree, tz, depth: int | None = None, summaries: bool = True) -> str:
    if not tree.topics:
        return "(no topics yet)"
    lines = []
    counts = subtree_counts(tree)
    live = tree.live_path()
    for d, t in tree.walk(depth):
        mark = "*" if t.id == tree.current else ("+" if t.id in live else " ")
        span = _day(t.created, tz)
        end = _day(t.last_active, tz)
        if end != span:
            span += f"..{end}"
        n = counts[t.id]
        lines.append(
            f"{'  ' * d}{mark} {t.name}  [{n} turn{'s' if n != 1 else ''}, {span}]  {t.id}"
        )
        if summaries and t.summary and d < 3:
            lines.append(f"{'  ' * d}    {t.summary[:120]}")
    if tree.archived:
        lines.append(f"({len(tree.archived)} trivial turns archived)")
    return "\n".join(lines)


def _label(s: str) -> str:
    return re.sub(r'["\\\n]', "'", s)


def mermaid(tree, depth: int | None = None) -> str:
    out = ["graph TD", '  root(("memory"))']
    counts = subtree_counts(tree)
    for _, t in tree.walk(depth):
        out.append(f'  {t.id}["{_label(t.name)} ({counts[t.id]})"]')
        out.append(f"  {t.parent or 'root'} --> {t.id}")
    if tree.current in tree.topics:
        out.append(f"  style {tree.current} stroke-width:3px")
    return "\n".join(out)


def dot(tree, depth: int | None = None) -> str:
    out = ["digraph topics {", "  rankdir=LR;", '  root [label="memory", shape=circle];']
    counts = subtree_counts(tree)
    for _, t in tree.walk(depth):
        bold = ", penwidth=3" if t.id == tree.current else ""
        out.append(f'  "{t.id}" [label="{_label(t.name)} ({counts[t.id]})", shape=box{bold}];')
        out.append(f'  "{t.parent or "root"}" -> "{t.id}";')
    out.append("}")
    return "\n".join(out)


def as_json(tree, depth: int | None = None) -> dict:
    """Nested topics (children inline) plus the current topic and the archived count."""
    nodes: dict[str, dict] = {}
    roots: list[dict] = []
    counts = subtree_counts(tree)
    for d, t in tree.walk(depth):
        node = {
            "id": t.id,
            "name": t.name,
            "summary": t.summary,
            "records": len(t.records),
            "turns": counts[t.id],
            "under": counts[t.id],  # records in the topic and every topic under it
            "created": t.created,
            "last_active": t.last_active,
            "depth": d,
            "current": t.id == tree.current,
            "children": [],
        }
        nodes[t.id] = node
        (nodes[t.parent]["children"] if t.parent in nodes else roots).append(node)
    return {
        "current": tree.current,
        "topics": roots,
        "archived": len(tree.archived),
        "total_topics": len(tree.topics),
    }
