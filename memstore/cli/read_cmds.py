"""Read commands: search (recall, where, context and tree live beside it)."""

from __future__ import annotations

import json

import click

from .common import emit_json, one_line, short_date


def filter_options(f):
    for opt in reversed(
        [
            click.option(
                "--since", default=None, help="Only records at or after this time (ISO or a phrase: 'last week')."
            ),
            click.option("--until", default=None, help="Only records before this time (ISO or a phrase)."),
            click.option("--role", multiple=True, help="user | assistant | system | tool (repeatable)."),
            click.option("--actor", multiple=True, help="Only these actors (repeatable)."),
            click.option("--type", "type_", multiple=True, help="text | action | meta | doc (repeatable)."),
            click.option("--session", multiple=True, help="Only these sessions (repeatable)."),
            click.option("--now", default=None, help="Reference time for phrases (ISO; default: now)."),
        ]
    ):
        f = opt(f)
    return f


def build_filters(store, since, until, role, actor, type_, session, now):
    from ..retrieve.search import Filters
    from ..retrieve.timefilter import instant

    return Filters(
        since=instant(since, store, now, edge="start") if since else None,
        until=instant(until, store, now, edge="end") if until else None,
        role=list(role),
        actor=list(actor),
        type=list(type_),
        session=list(session),
    )


@click.command("search", context_settings={"ignore_unknown_options": True})
@click.argument("query", required=False)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "exact", "vector"]),
    default="hybrid",
    show_default=True,
    help="hybrid fuses exact (BM25) and vector (cosine) rankings.",
)
@click.option("-k", "--topk", default=10, show_default=True, type=click.IntRange(1, 10000), help="How many hits.")
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1),
    default=None,
    help="Use ContextTape's blend alpha·cosine + (1−alpha)·lexical instead of rank fusion.",
)
@filter_options
@click.option("--explain", is_flag=True, help="Show each hit's score parts.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {query, hits: [...]}.")
@click.option(
    "--queries",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="Run every line of FILE as a query; JSON lines out, in order.",
)
@click.option("--no-index", is_flag=True, help="Do not update the index before reading.")
@click.pass_obj
def search_cmd(
    obj, query, mode, topk, alpha, since, until, role, actor, type_, session, now, explain, as_json, queries, no_index
):
    """Search the store (or several: -C a -C b): exact, vector or hybrid.

    A query that starts with "-" is taken as the query (or write ct search -- -foo). A query with
    no words (only punctuation, quotes or AND/OR/NOT) finds nothing, with a note saying so.

    Example: ct search "budget decision" --since "last month" -k 5
    """
    from ..retrieve.search import NO_WORDS_NOTE, search_many, searchable

    if not query and not queries:
        raise click.UsageError("give a QUERY or --queries FILE")
    stores = obj.stores(index=not no_index)
    filters = build_filters(stores[0], since, until, role, actor, type_, session, now)
    if queries:
        for line in queries:
            q = line.rstrip("\n")
            if not q.strip():
                continue
            hits = search_many(stores, q, topk, mode, filters, alpha)
            click.echo(json.dumps({"query": q, "hits": [h.to_json(explain) for h in hits]}, ensure_ascii=False))
        return
    hits = search_many(stores, query, topk, mode, filters, alpha)
    note = None if searchable(query) else NO_WORDS_NOTE
    if as_json:
        emit_json(
            {
                "query": query,
                "mode": mode,
                "hits": [h.to_json(explain) for h in hits],
                **({"note": note} if note else {}),
            }
        )
        return
    if not hits:
        click.echo(f"No matches: {note}." if note else "No matches.", err=True)
        return
    by_root = {str(s.root): s for s in stores}
    for i, h in enumerate(hits, 1):
        st = by_root.get(h.store, stores[0])
        label = f"[{st.root.name}] " if len(stores) > 1 else ""
        who = h.actor or h.role
        src = ""
        if isinstance(h.source, dict) and h.source.get("path"):
            src = f"  ({h.source['path']}#{h.source.get('chunk', 0)})"
        click.echo(f"{i:2}. {label}{short_date(h.ts, st.tz)}  {who} ({h.type})  score {h.score:.4f}{src}")
        click.echo(f"    {one_line(h.text, 300)}")
        if explain:
            click.echo(f"    parts: {json.dumps(h.parts, ensure_ascii=False)}")
