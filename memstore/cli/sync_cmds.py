"""`ct sync`: pull (merge, never rebase), reindex, push."""

from __future__ import annotations

import click

from .common import emit_json


@click.command("sync")
@click.option("--no-push", is_flag=True, help="Only fetch, merge and reindex.")
@click.option(
    "--set-upstream",
    "set_upstream",
    metavar="REMOTE",
    default=None,
    help="Push this branch to REMOTE and track it (first sync of a new store).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def sync_cmd(obj, no_push, set_upstream, as_json):
    """Merge the remote's memory into this clone, reindex, and push (one merge commit at most).

    Example: ct sync
    """
    from ..sync import sync

    res = sync(obj.store(), push=not no_push, set_upstream=set_upstream)
    if as_json:
        emit_json(res.to_json())
        return
    for note in res.notes:
        obj.say(note)
    parts = [f"merged {res.merged} commits" if res.merged else "nothing new from " + res.upstream]
    if not no_push:
        parts.append(f"pushed {res.pushed} commits" if res.pushed else "nothing to push")
    if res.reindexed:
        parts.append(f"reindexed {len(res.reindexed)} days")
    obj.say(f"sync with {res.upstream}: " + ", ".join(parts))
