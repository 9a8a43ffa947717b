"""Seed-parity commands: `ct build-wiki` (Wikipedia articles as documents) and `ct serve` (an HTTP JSON API)."""

from __future__ import annotations

import click

from .common import progress_for, secret_options


@click.command("build-wiki")
@click.option(
    "--topics-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="Article titles, one per line ('#' starts a comment).",
)
@click.option("--limit", type=int, default=None, help="Fetch only the first N titles.")
@click.option("--min-chars", type=int, default=0, show_default=True, help="Skip articles with less text than this.")
@click.option(
    "--base-url",
    default="https://en.wikipedia.org/wiki/",
    show_default=True,
    help="Where articles live; the title is appended.",
)
@click.option("--timeout", type=float, default=15.0, show_default=True, help="Seconds to wait for each page.")
@secret_options("Ingest pages")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def build_wiki_cmd(obj, topics_file, limit, min_chars, base_url, timeout, secrets, as_json):
    """Fetch Wikipedia articles over HTTP, strip them to text and ingest them as document chunks
    (one commit; re-running adds only what changed). A page that cannot be fetched is skipped
    with a message, never stored.

    Example: ct build-wiki --topics-file topics.txt --limit 20 --min-chars 500
    """
    from ..wiki import build_wiki
    from .write_cmds import report

    st = obj.store()
    with progress_for(obj, "Embedding chunks") as bar:
        res = build_wiki(
            st,
            topics_file,
            limit=limit,
            min_chars=min_chars,
            base_url=base_url,
            timeout=timeout,
            secrets=secrets,
            progress=bar,
            verbose=obj.verbose,
        )
    report(obj, res, as_json, "build-wiki")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port (0 picks a free one).")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host. The API has no authentication: anyone who can reach it can read "
    "(and add, with --writable).",
)
@click.option("--writable", is_flag=True, help="Let /add write to the store (one commit each). Read-only without it.")
@click.pass_obj
def serve_cmd(obj, host, port, allow_remote, writable):
    """Serve this store as a web page to look at memory (open the address in a browser: search,
    timeline, topic tree, history) and an HTTP JSON API: /search, /recall, /add, /context, /where,
    /stats, described at /openapi.json. Listens on localhost only unless --allow-remote; read-only
    unless --writable. Stops on Ctrl-C.

    Example: ct -C ~/memory serve --port 8765
    """
    import sys

    from ..serve import make_server, serve, url_of

    st = obj.store()
    server = make_server(st.root, host=host, port=port, allow_remote=allow_remote, log=not obj.quiet, writable=writable)

    def announce():
        # stdout, flushed: scripts (and the tests) read the bound port from this line when --port 0
        click.echo(
            f"Serving {st.root} at {url_of(server)}/ (API description: {url_of(server)}/openapi.json"
            f"{'' if writable else '; read-only'})"
        )
        sys.stdout.flush()

    serve(server, ready=announce)
