"""Topic tree commands: tree, reorganize and diff."""

from __future__ import annotations

import click

from .common import emit_json


@click.command("tree")
@click.option(
    "--depth", type=click.IntRange(1, None), default=None, help="Show only this many levels."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "mermaid", "dot"]),
    default="text",
    show_default=True,
)
@click.option("--json", "as_json", is_flag=True, help="Print the tree as nested JSON.")
@click.option("--no-summaries", is_flag=True, help="Names only.")
@click.option(
    "--place-existing",
    is_flag=True,
    help="First place every conversation record the tree does not hold yet (one commit).",
)
@click.pass_obj
def tree_cmd(obj, depth, fmt, as_json, no_summaries, place_existing):
    """Show the topic tree (* marks the current topic, + its ancestors).

    Example: ct tree --depth 2
    """
    from ..tree import render

    store = obj.store()
    if place_existing:
        obj.say(f"Placed {store.place_existing()} records.")
    tree = store.tree()
    if as_json:
        emit_json(render.as_json(tree, depth))
    elif fmt == "mermaid":
        click.echo(render.mermaid(tree, depth))
    elif fmt == "dot":
        click.echo(render.dot(tree, depth))
    else:
        click.echo(render.text(tree, store.tz, depth, summaries=not no_summaries))


@click.command("reorganize")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would change; change nothing.")
@click.option(
    "--threshold",
    type=click.FloatRange(-1, 1),
    default=0.55,
    show_default=True,
    help="Minimum cosine similarity of two topics to consider merging them.",
)
@click.option(
    "--prune-trivial", is_flag=True, help="Archive trivial exchanges (under 20 words both sides)."
)
@click.option(
    "--offline", is_flag=True, help="Use the offline veto even when an LLM is configured."
)
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.pass_obj
def reorganize_cmd(obj, dry_run, threshold, prune_trivial, offline, as_json):
    """Merge related frozen topics (older absorbs newer) and archive trivial turns: one commit.

    Example: ct reorganize -n --prune-trivial
    """
    res = obj.store(index=True).reorganize(
        threshold=threshold, prune_trivial=prune_trivial, dry_run=dry_run, offline=offline
    )
    if as_json:
        emit_json(res.to_json())
        return
    click.echo(
        res.message()
        if res.changed
        else f"Nothing to reorganize ({res.candidates} frozen topics, {res.pairs} pairs at >= {threshold}, "
        f"{len(res.vetoed)} vetoed)."
    )
    if res.changed:
        click.echo(
            "(dry run: nothing changed)"
            if dry_run
            else f"Committed {res.commit[:12]}."
            if res.commit
            else ""
        )


@click.command("diff")
@click.argument("revs", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the changes as JSON.")
@click.pass_obj
def diff_cmd(obj, revs, as_json):
    """Explain how the topic tree changed: merged, moved, renamed, archived topics.

    No REV: HEAD against the working tree; one REV: REV against it; two: the first against the second.
    Example: ct diff HEAD~1
    """
    if len(revs) > 2:
        raise click.UsageError("give at most two revisions")
    d = obj.store().diff(*revs)
    if as_json:
        emit_json(d.to_json())
        return
    click.echo(f"topic tree {d.old_label} -> {d.new_label}")
    for line in d.lines():
        click.echo("  " + line)
