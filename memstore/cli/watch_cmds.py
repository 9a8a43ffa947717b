"""`ct watch`: follow growing transcripts and import new lines in batches, one commit each."""

from __future__ import annotations

import click

from .common import emit_json, secret_options


@click.command("watch")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--kind",
    type=click.Choice(["claude-code", "jsonl", "chatgpt"]),
    default=None,
    help="What the files are: Claude Code transcripts, plain JSONL logs or a ChatGPT export. "
    "Default: detected for each file from its first lines.",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05),
    default=5.0,
    show_default=True,
    help="Seconds between scans of the watched files.",
)
@click.option(
    "--debounce",
    type=click.FloatRange(min=0),
    default=2.0,
    show_default=True,
    help="Import once the changed files have been quiet this many seconds.",
)
@click.option(
    "--max-delay",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="...but never wait longer than this after a change was first seen.",
)
@click.option("--once", is_flag=True, help="Import every complete line now and exit (for cron).")
@secret_options("Import")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per batch.")
@click.pass_obj
def watch_cmd(obj, paths, kind, interval, debounce, max_delay, once, secrets, as_json):
    """Follow transcript files or folders (PATH…) and import new complete lines as they appear.

    Each batch is one commit; a line still being written is left for a later batch. The first
    Ctrl-C (or SIGTERM) finishes the batch in progress and stops; a second abandons it.

    Example: ct watch ~/.claude/projects --interval 10 --debounce 3
    """
    st = obj.store()
    errors = []

    def report(batch):
        errors.extend(batch.errors)
        for note in batch.notes:
            obj.say(note)
        if as_json:
            emit_json(batch.to_json())
        elif batch.commits or batch.errors or obj.verbose or once:
            obj.say(batch.describe())

    if not once:
        obj.say(
            f"Watching {len(paths)} path{'s' if len(paths) != 1 else ''} ({kind or 'format detected per file'}) every {interval:g}s; "
            "Ctrl-C stops after the current batch."
        )
    st.watch(
        list(paths),
        kind=kind,
        interval=interval,
        debounce=debounce,
        max_delay=max_delay,
        once=once,
        secrets=secrets,
        report=report,
    )
    if once and errors:
        raise SystemExit(1)
