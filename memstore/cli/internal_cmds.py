"""Commands git calls, not people: the hook stubs and the tree.json merge driver."""

from __future__ import annotations

import click


@click.command("hook")
@click.argument("name")
@click.argument("args", nargs=-1)
def hook_cmd(name, args):
    """Run by the git hook stubs: refresh the index. Never fails the git command."""
    try:
        from ..hooks import run_hook
        from ..store import Store

        run_hook(Store.open(), name, list(args))
    except Exception:  # a hook must never block git
        pass


@click.command("merge-tree")
@click.argument("base")
@click.argument("ours")
@click.argument("theirs")
def merge_tree_cmd(base, ours, theirs):
    """Git merge driver for tree.json: merges two versions by topic id into OURS."""
    from ..format.tree import merge_files

    ok = merge_files(base, ours, theirs)
    raise SystemExit(0 if ok else 1)
