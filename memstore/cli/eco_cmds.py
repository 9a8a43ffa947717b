"""Ecosystem commands: `ct mcp` (an MCP server for agents) and `ct ingest-any` (any file, blobs kept whole)."""

from __future__ import annotations

import click

from .common import progress_for, secret_options


@click.command("mcp")
@click.pass_obj
def mcp_cmd(obj):
    """Serve this store to AI agents over MCP (stdio): tools search, recall, add, mark, where,
    context and tree, and the resource memstore://stats.

    Register it with Claude Code:  claude mcp add memstore -- ct -C ~/memory mcp

    Example: ct -C ~/memory mcp
    """
    from ..mcp_server import serve

    st = obj.store()
    serve(st.root)


@click.command("ingest-any")
@click.argument("path", type=click.Path(exists=True))
@click.option(
    "--max-bytes", type=int, default=None, help="Skip (never truncate) files larger than this. Default: 100 MiB."
)
@click.option("--follow-symlinks", is_flag=True, help="Follow symbolic links (loops are detected).")
@secret_options("Ingest")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def ingest_any_cmd(obj, path, max_bytes, follow_symlinks, secrets, as_json):
    """Ingest any files: text and code as chunks (like ingest-path); PDFs as text plus the original;
    images, audio, video and other files kept whole as a blob segment with a JSON manifest and a
    searchable description (name, size, type, image size and date, audio duration). One commit.

    Example: ct ingest-any ~/Pictures/whiteboards
    """
    from .write_cmds import report

    st = obj.store()
    with progress_for(obj, "Ingesting") as bar:
        res = st.ingest_any(path, max_bytes=max_bytes, follow_symlinks=follow_symlinks, secrets=secrets, progress=bar)
    report(obj, res, as_json, "ingest-any")
