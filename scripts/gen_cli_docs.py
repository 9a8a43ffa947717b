"""Print docs/cli.md: the `--help` of `ct` and of every command and subcommand, in one Markdown page.

Usage: python scripts/gen_cli_docs.py > docs/cli.md
tests/test_cli_docs.py regenerates the page and fails when the committed one differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import click  # noqa: E402

WIDTH = 100  # fixed, so the page does not depend on the terminal that generated it

HEADER = """\
# `ct` command reference

Generated from each command's `--help` by `python scripts/gen_cli_docs.py > docs/cli.md`; do not
edit by hand (`tests/test_cli_docs.py` fails when this page is out of date). Every command also
accepts the global options shown under `ct` (`-C PATH`, `-q`, `-v`) before its name, e.g.
`ct -C ~/memory search "budget"`.
"""


def commands(group: click.Group, ctx: click.Context, prefix: str):
    """(full name, command, context) for every visible command under `group`, depth first, sorted."""
    for name in sorted(group.list_commands(ctx)):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        sub = click.Context(
            cmd, info_name=name, parent=ctx, terminal_width=WIDTH, max_content_width=WIDTH
        )
        full = f"{prefix} {name}"
        yield full, cmd, sub
        if isinstance(cmd, click.Group):
            yield from commands(cmd, sub, full)


def all_commands():
    from memstore.cli import cli

    root = click.Context(
        cli, info_name="ct", terminal_width=WIDTH, max_content_width=WIDTH, **cli.context_settings
    )
    return root, list(commands(cli, root, "ct"))


def render() -> str:
    from memstore.cli import cli

    root, cmds = all_commands()
    out = [HEADER, "## Contents\n"]
    out += [f"- [`{name}`](#{name.replace(' ', '-')})" for name, _, _ in cmds]
    out.append("")
    out.append("## ct\n")
    out.append("```\n" + cli.get_help(root).rstrip() + "\n```\n")
    for name, cmd, ctx in cmds:
        out.append(f"## {name}\n")
        out.append("```\n" + cmd.get_help(ctx).rstrip() + "\n```\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render())
