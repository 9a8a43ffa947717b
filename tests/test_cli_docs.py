"""docs/cli.md: every command has help, appears in the page, and the page equals a fresh generation."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs" / "cli.md"
REGEN = "Regenerate it: python scripts/gen_cli_docs.py > docs/cli.md"


def _gen():
    spec = importlib.util.spec_from_file_location(
        "gen_cli_docs", REPO / "scripts" / "gen_cli_docs.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _gen()
ROOT, COMMANDS = GEN.all_commands()


def test_there_are_commands_and_subcommands():
    names = {name for name, _, _ in COMMANDS}
    assert {
        "ct search",
        "ct import",
        "ct import jsonl",
        "ct import contexttape",
        "ct mcp",
        "ct ingest-any",
    } <= names


@pytest.mark.parametrize(
    "name,cmd", [(n, c) for n, c, _ in COMMANDS], ids=[n for n, _, _ in COMMANDS]
)
def test_every_command_has_help_and_a_section(name, cmd):
    assert (cmd.help or "").strip(), f"{name} has no help text (add a docstring)"
    assert f"\n## {name}\n" in DOCS.read_text(encoding="utf-8"), (
        f"{name} is missing from docs/cli.md. {REGEN}"
    )


def test_every_top_level_command_has_a_summary():
    from memstore.cli import COMMANDS as REGISTRY, HIDDEN, SUMMARIES

    missing = sorted(set(REGISTRY) - set(HIDDEN) - set(SUMMARIES))
    assert not missing, f"no SUMMARIES entry (shown by ct --help) for {missing}"


def test_docs_are_current():
    assert DOCS.read_text(encoding="utf-8") == GEN.render(), f"docs/cli.md is stale. {REGEN}"


def test_sections_are_what_the_real_cli_prints():
    """The generator renders help the way `ct ... --help` does (same command objects, same width)."""
    from memstore.cli import cli

    text = DOCS.read_text(encoding="utf-8")
    runner = CliRunner()
    for name in ("ct import contexttape", "ct ingest-any", "ct mcp", "ct search"):
        args = name.split()[1:] + ["--help"]
        out = runner.invoke(
            cli, args, prog_name="ct", terminal_width=GEN.WIDTH, max_content_width=GEN.WIDTH
        ).output
        assert f"## {name}\n\n```\n{out.rstrip()}\n```\n" in text
