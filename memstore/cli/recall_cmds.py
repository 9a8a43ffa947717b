"""Conversation commands: recall (a time phrase → ranked verbatim lines), mark and where."""

from __future__ import annotations

import click

from .common import emit_json, one_line


def _local(ts: str, tz) -> str:
    from ..format.timeutil import from_iso

    return from_iso(ts).astimezone(tz).strftime("%Y-%m-%d %H:%M")


def _now_line(now_iso: str, tz, tzname: str) -> str:
    from ..format.timeutil import from_iso

    local = from_iso(now_iso).astimezone(tz)
    return f"[NOW] {local.strftime('%Y-%m-%d %H:%M %a')} ({tzname}) -- read everything below against this time."


def _reference_now(store, now: str | None):
    from ..retrieve.timefilter import reference_now

    return reference_now(now, store.tz)


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


def _hit_lines(h, tz, oneline: bool) -> list[str]:
    hit = h.hit
    tag = hit.actor or hit.role
    if hit.type in ("action", "doc", "meta"):
        tag += f" ({hit.type})"
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
@click.option("--docs", is_flag=True, help="Let document chunks into the answer (left out by default).")
@click.option("--now", default=None, help="Reference time for phrases like 'yesterday' (ISO; default: now).")
@click.option("--oneline", is_flag=True, help="Flatten each line and cut it at 300 characters.")
@click.option("--explain", is_flag=True, help="Show each hit's score parts (with --json).")
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: {query, now, window, level, notes, hits: [... with flags]}."
)
@click.pass_obj
def recall_cmd(obj, question, topk, around, docs, now, oneline, explain, as_json):
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
    from ..retrieve.recall import recall

    st = obj.store(index=True)
    res = recall(
        st, question, now=_reference_now(st, now) if now else None, k=topk, around=around, docs=docs, update_index=False
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
            if res.level in ("whole_window", "outside_window", "recent") or res.occurrence in ("first", "last")
            else "best first"
        )
        click.echo(f"-- {n_main} line(s){extra}, verbatim, {order} --")
    for h in res.hits:
        for line in _hit_lines(h, st.tz, oneline):
            click.echo(line)


# ------------------------------------------------------------------------------------------ mark


@click.command("mark")
@click.argument("text", required=False)
@click.option(
    "--done", "done_id", default=None, metavar="ID", help="Close the open marker ID (or an unambiguous prefix)."
)
@click.option("--json", "as_json", is_flag=True, help="Print the marker as JSON.")
@click.pass_obj
def mark_cmd(obj, text, done_id, as_json):
    """Set a "where are we now" marker (one commit), or close one with --done ID.

    Example: ct mark "budget: waiting for Ana's numbers"
    """
    from ..markers import done, mark

    if bool(text) == bool(done_id):
        raise click.UsageError("give either TEXT (a new marker) or --done ID (close one)")
    st = obj.store()
    m = done(st, done_id) if done_id else mark(st, text)
    if as_json:
        emit_json(m.to_json())
    elif done_id:
        obj.say(f"closed marker {m.id}: {one_line(m.text, 100)}")
    else:
        obj.say(f"marker {m.id}: {one_line(m.text, 100)}")


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
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {now, markers, session, lines}.")
@click.pass_obj
def where_cmd(obj, n_markers, n_lines, now, as_json):
    """Show where the conversation stands: open markers and the latest session's last lines.

    Example: ct where -n 5
    """
    from ..markers import short_ids, where

    st = obj.store()
    res = where(st, markers=n_markers, lines=n_lines, now=_reference_now(st, now) if now else None)
    if as_json:
        emit_json(res.to_json())
        return
    click.echo(_now_line(res.now, st.tz, st.config.timezone))
    if res.markers:
        more = f"; {res.markers_omitted} older not shown" if res.markers_omitted else ""
        click.echo(f"-- open markers: {len(res.markers)}{more} (newest last) --")
        ids = short_ids(res.markers)
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
