"""Commands that carry a store across formats and tools: upgrade, export."""

from __future__ import annotations

import click

from .common import emit_json, progress_for


@click.command("upgrade")
@click.option("-n", "--dry-run", is_flag=True, help="Print the plan without changing anything.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan or result as JSON.")
@click.pass_obj
def upgrade_cmd(obj, dry_run, as_json):
    """Turn a format-1 store into format 2 in one commit, losslessly.

    Same records (less their `seg` field), same vectors bit for bit (moved into one pack per day),
    tree.json becomes the tree log, segments/ is removed. A format-2 store is left alone.

    Example: ct upgrade -n
    """
    from ..upgrade import upgrade

    res = upgrade(obj.store(), dry_run=dry_run)
    if as_json:
        emit_json(res.to_json())
        return
    for line in res.lines():
        click.echo(line)


@click.group("export")
def export_cmd():
    """Write the store in another tool's format (the store itself is not changed)."""


@export_cmd.command("contexttape")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def export_contexttape_cmd(obj, dest, as_json):
    """A classic ContextTape store in DEST: one segment_<n>.is per text and per vector, linked in pairs.

    ContextTape's ISStore/MultiStore opens DEST and ranks the same vectors as `ct search --mode
    vector` (superseded records are left out). DEST must be new or empty.

    Example: ct export contexttape /tmp/tape
    """
    from ..export import export_contexttape

    st = obj.store(index=True)
    with progress_for(obj, "Exporting") as bar:
        res = export_contexttape(st, dest, progress=bar)
    if as_json:
        emit_json(res)
        return
    click.echo(
        f"Exported {res['pairs']} text/vector pairs to {res['dir']}"
        + (f" ({res['skipped']} records without a readable vector left out)" if res["skipped"] else "")
    )
