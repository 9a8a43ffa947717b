"""Commands that read: search, recall, where and context. Each brings the index up to date first
(where answers from a fresh index without numpy)."""

from __future__ import annotations

import json

import click

from .common import emit_json, one_line, progress_for, short_author, short_date

AUTHOR_HELP = (
    "Only records put into memory by this person: a name or an email, any case (repeatable)."
)


def filter_options(f):
    for opt in reversed(
        [
            click.option(
                "--since",
                default=None,
                help="Only records at or after this time (ISO or a phrase: 'last week').",
            ),
            click.option(
                "--until", default=None, help="Only records before this time (ISO or a phrase)."
            ),
            click.option(
                "--role", multiple=True, help="user | assistant | system | tool (repeatable)."
            ),
            click.option("--actor", multiple=True, help="Only these actors (repeatable)."),
            click.option(
                "--type", "type_", multiple=True, help="text | action | meta | doc (repeatable)."
            ),
            click.option("--session", multiple=True, help="Only these sessions (repeatable)."),
            click.option("--author", multiple=True, help=AUTHOR_HELP),
            click.option(
                "--now", default=None, help="Reference time for phrases (ISO; default: now)."
            ),
        ]
    ):
        f = opt(f)
    return f


@click.command("search", context_settings={"ignore_unknown_options": True})
@click.argument("query", required=False)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "exact", "vector"]),
    default="hybrid",
    show_default=True,
    help="hybrid blends cosine (0.8) with BM25 scaled by the query's best match (0.2); a first-person "
    "question counts the assistant's turns at 0.8, and a question not about changes or versions a "
    "changelog's chunks at 0.8 (docs/quality.md).",
)
@click.option(
    "-k",
    "--topk",
    default=10,
    show_default=True,
    type=click.IntRange(1, 10000),
    help="How many hits.",
)
@click.option(
    "--alpha",
    type=click.FloatRange(0, 1),
    default=None,
    help="Use ContextTape's blend alpha·cosine + (1−alpha)·lexical instead of the default blend.",
)
@filter_options
@click.option(
    "--scope",
    type=click.Choice(["private", "shared"]),
    default=None,
    help="Only private records (yours; in a plain store anyone's so labelled) or only shared ones.",
)
@click.option("--explain", is_flag=True, help="Show each hit's score parts.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {query, mode, hits: [...]}.")
@click.option(
    "--queries",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="Run every line of FILE as a query; JSON lines out, in order.",
)
@click.option("--no-index", is_flag=True, help="Do not update the index before reading.")
@click.pass_obj
def search_cmd(
    obj,
    query,
    mode,
    topk,
    alpha,
    since,
    until,
    role,
    actor,
    type_,
    session,
    author,
    now,
    scope,
    explain,
    as_json,
    queries,
    no_index,
):
    """Search the store (or several: -C a -C b): exact, vector or hybrid.

    A query that starts with "-" is taken as the query (or write ct search -- -foo). A query with
    no words (only punctuation, quotes or AND/OR/NOT) finds nothing, with a note saying so.

    Example: ct search "budget decision" --since "last month" -k 5
    """
    if not query and not queries:
        raise click.UsageError("give a QUERY or --queries FILE")
    stores = obj.stores()  # Store.search brings the index up to date, loading the model meanwhile
    indexed = [no_index]

    def search(q):
        with progress_for(obj, "Indexing") as bar:
            hits = stores[0].search(
                q,
                k=topk,
                mode=mode,
                since=since,
                until=until,
                role=role,
                actor=actor,
                type=type_,
                session=session,
                author=author,
                now=now,
                alpha=alpha,
                also=stores[1:],
                update_index=not indexed[0],  # once, before the first query
                progress=bar,
                scope=scope,
            )
        indexed[0] = True
        return hits

    if queries:
        for line in queries:
            q = line.rstrip("\n")
            if not q.strip():
                continue
            hits = search(q)
            click.echo(
                json.dumps(
                    {"query": q, "hits": [h.to_json(explain) for h in hits]}, ensure_ascii=False
                )
            )
        return
    hits = search(query)
    note = hits.note
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
        by = f"  by {short_author(h.author)}" if h.author else ""
        src = ""
        if isinstance(h.source, dict) and h.source.get("path"):
            src = f"  ({h.source['path']}#{h.source.get('chunk', 0)})"
        answers = "  (answers the question below)" if "answers" in h.parts else ""
        private = "  [private]" if h.record.get("scope") == "private" else ""
        click.echo(
            f"{i:2}. {label}{short_date(h.ts, st.tz)}  {who} ({h.type}){by}  score {h.score:.4f}"
            f"{src}{answers}{private}"
        )
        click.echo(f"    {one_line(h.text, 300)}")
        asked = h.parts.get("question")
        if isinstance(asked, dict):  # the question this answer took the place of (one exchange)
            click.echo(f"    asked ({asked.get('role')}): {one_line(str(asked.get('text')), 300)}")
        if explain:
            click.echo(f"    parts: {json.dumps(h.parts, ensure_ascii=False)}")


def _local(ts: str, tz) -> str:
    from ..format.timeutil import from_iso

    return from_iso(ts).astimezone(tz).strftime("%Y-%m-%d %H:%M")


def _now_line(now_iso: str, tz, tzname: str) -> str:
    from ..format.timeutil import from_iso

    local = from_iso(now_iso).astimezone(tz)
    return f"[NOW] {local.strftime('%Y-%m-%d %H:%M %a')} ({tzname}) -- read everything below against this time."


# ---------------------------------------------------------------------------------------- recall

_LEVEL_TEXT = {
    "in_window": "matched in the window",
    "whole_window": "the whole window, in order",
    "window_only": "no line in the window matched the words; its lines ranked by closeness",
    "outside_window": "nothing in the window; nearest matches outside it",
    "all_time": "matched over all time",
    "recent": "the latest lines",
    "nothing": "no match",
}


def _window_text(w, tz) -> str:
    a, b = w.start.astimezone(tz), w.end.astimezone(tz)
    return f"{w.phrase!r} = {a.strftime('%Y-%m-%d %H:%M')} to {b.strftime('%Y-%m-%d %H:%M')} ({w.granularity})"


def _hit_lines(h, tz, oneline: bool, by: bool = False) -> list[str]:
    """One hit's lines; `by` names its author on it (the answer holds lines of several)."""
    hit = h.hit
    tag = hit.actor or hit.role
    kind = [hit.type] if hit.type in ("action", "doc", "meta") else []
    if by and hit.author:
        kind.append(f"by {short_author(hit.author)}")
    if kind:
        tag += f" ({', '.join(kind)})"
    marks = ""
    if "outside_window" in h.flags:
        marks += "[outside] "
    if "window_only" in h.flags:
        marks += "[window] "
    if "low_confidence" in h.flags:
        marks += "[maybe] "
    head = f"{'  ' if 'context' in h.flags else ''}[{_local(hit.ts, tz)}] {marks}{tag}: "
    if oneline:
        return [head + one_line(hit.text, 300)]
    first, *rest = hit.text.split("\n")
    return [head + first] + ["    " + line for line in rest]


@click.command("recall")
@click.argument("question")
@click.option(
    "-k",
    "--topk",
    default=10,
    show_default=True,
    type=click.IntRange(1, 10000),
    help="How many matching lines (a whole window lists up to max(k, 200)).",
)
@click.option(
    "--around",
    default=0,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Also show N neighbouring lines of the same session around each match.",
)
@click.option(
    "--docs", is_flag=True, help="Let document chunks into the answer (left out by default)."
)
@click.option(
    "--now", default=None, help="Reference time for phrases like 'yesterday' (ISO; default: now)."
)
@click.option("--author", multiple=True, help=AUTHOR_HELP)
@click.option("--oneline", is_flag=True, help="Flatten each line and cut it at 300 characters.")
@click.option("--explain", is_flag=True, help="Show each hit's score parts (with --json).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: {query, now, window, level, keywords, occurrence, window_lines, notes, hits: [... with flags]}.",
)
@click.pass_obj
def recall_cmd(obj, question, topk, around, docs, now, author, oneline, explain, as_json):
    """Recall what was said: the time phrase in QUESTION picks a window, the other words rank
    lines inside it (by words and meaning, as search does), and the answer is verbatim lines with
    timestamps, best first.

    With no words besides the time phrase, the whole window is listed in time order. When no line
    in the window matches the words, its lines still come back ranked by closeness, marked
    [window], then the nearest word matches outside it, marked [outside]; an empty window shows
    the nearest matches outside it. "The first time" / "last time" pick the earliest / latest
    occurrence. [maybe] marks lines that only resemble the question.

    Example: ct recall "what did we say yesterday evening about the budget"
    """
    st = obj.store(index=True)
    res = st.recall(
        question,
        k=topk,
        now=now or None,
        around=around,
        docs=docs,
        author=author,
        update_index=False,
    )
    if as_json:
        emit_json(res.to_json(explain))
        return
    click.echo(_now_line(res.now, st.tz, st.config.timezone))
    scope = _window_text(res.window, st.tz) if res.window is not None else "all time"
    words = f" for {res.keywords!r}" if res.keywords else ""
    click.echo(f"-- {scope}{words}: {_LEVEL_TEXT[res.level]} --")
    for note in res.notes:
        click.echo(f"note: {note}")
    if res.hits:
        n_main = sum(1 for h in res.hits if "context" not in h.flags)
        extra = f" + {len(res.hits) - n_main} context" if n_main != len(res.hits) else ""
        order = (
            "in time order"
            if res.level in ("whole_window", "outside_window", "recent")
            or res.occurrence in ("first", "last")
            else "best first"
        )
        click.echo(f"-- {n_main} line(s){extra}, verbatim, {order} --")
    # who put the lines into memory: once when it is one person, else on each line
    authors = {h.hit.author for h in res.hits}
    if len(authors) == 1 and None not in authors:
        click.echo(f"-- put into memory by {short_author(next(iter(authors)))} --")
    for h in res.hits:
        for line in _hit_lines(h, st.tz, oneline, by=len(authors) > 1):
            click.echo(line)


# ----------------------------------------------------------------------------------------- where


@click.command("where")
@click.option(
    "-m",
    "--markers",
    "n_markers",
    default=10,
    show_default=True,
    type=click.IntRange(0, 10000),
    help="How many open markers (the newest).",
)
@click.option(
    "-n",
    "--lines",
    "n_lines",
    default=8,
    show_default=True,
    type=click.IntRange(0, 10000),
    help="How many of the latest session's last lines.",
)
@click.option("--now", default=None, help="Reference time for the [NOW] line (ISO; default: now).")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: {now, markers, markers_omitted, markers_done, session, lines}.",
)
@click.pass_obj
def where_cmd(obj, n_markers, n_lines, now, as_json):
    """Show where the conversation stands: open markers and the latest session's last lines.

    Example: ct where -n 5
    """
    st = obj.store()
    res = st.where(markers=n_markers, lines=n_lines, now=now or None)
    if as_json:
        emit_json(res.to_json())
        return
    click.echo(_now_line(res.now, st.tz, st.config.timezone))
    if res.markers:
        more = f"; {res.markers_omitted} older not shown" if res.markers_omitted else ""
        click.echo(f"-- open markers: {len(res.markers)}{more} (newest last) --")
        ids = res.short_ids()
        for m in res.markers:
            click.echo(f"* [{_local(m.ts, st.tz)}] {one_line(m.text, 200)}  ({ids[m.id]})")
    else:
        click.echo('-- no open markers (set one: ct mark "TEXT") --')
    if res.session is None:
        click.echo("-- no conversation on record yet --")
        return
    name = f'"{res.session}"' if res.session else "(no session name)"
    click.echo(f"-- latest session {name}: last {len(res.lines)} of {res.session_lines} lines --")
    for r in res.lines:
        tag = r.get("actor") or r.get("role")
        if r.get("type") == "action":
            tag += " (action)"
        click.echo(f"[{_local(r['ts'], st.tz)}] {tag}: {one_line(r['text'], 300)}")


@click.command("context")
@click.argument("query")
@click.option(
    "--budget",
    type=click.IntRange(1, None),
    default=None,
    help="At most this many tokens (counted with the store's embedder tokenizer).",
)
@click.option(
    "-k",
    "--topk",
    default=8,
    show_default=True,
    type=click.IntRange(0, 200),
    help="Recalled lines at most.",
)
@click.option(
    "--recent",
    default=6,
    show_default=True,
    type=click.IntRange(0, 200),
    help="Recent turns of the latest session (0: none, e.g. when the host already sends history).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print {query, budget, tokens, dropped, sections, text}.",
)
@click.pass_obj
def context_cmd(obj, query, budget, topk, recent, as_json):
    """Build prompt context for QUERY: markers, topic paths, recalled lines, recent turns.

    Example: ct context "what cake for Sarah's party" --budget 800
    """
    ctx = obj.store(index=True).context(query, budget=budget, k=topk, recent=recent)
    if as_json:
        emit_json(ctx.to_json())
    elif ctx.text:
        click.echo(ctx.text)
    else:
        obj.say("Nothing relevant found.")
