"""Commands that serve the store to others: serve (the web page and HTTP API), mcp (agents over
stdio) and chat (a person, through an LLM)."""

from __future__ import annotations

import click

from .common import emit_json, secret_options


def _guard_options(f):
    """--allow-secrets-override and --allow-wide-forget, the same for ct serve and ct mcp."""
    f = click.option(
        "--allow-wide-forget",
        is_flag=True,
        help="Let a caller forget more than 10 records in one call (a session, a time range, a commit). "
        "Without it such a forget is refused and names this flag.",
    )(f)
    return click.option(
        "--allow-secrets-override",
        is_flag=True,
        help='Let a caller store a detected secret verbatim (add with secrets "allow"). Without it only '
        '"refuse" and "redact" are taken.',
    )(f)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=int, default=8765, show_default=True, help="Port (0 picks a free one)."
)
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host (with --allowed-host). The API has no authentication: anyone who can "
    "reach it can read (and add, with --writable).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name (or address) clients use to reach a non-loopback --host; repeatable. Requests naming "
    "any other host are refused (loopback names always work).",
)
@click.option(
    "--writable",
    is_flag=True,
    help="Let /add and /forget write to the store (one commit each). Read-only without it.",
)
@_guard_options
@click.pass_obj
def serve_cmd(
    obj,
    host,
    port,
    allow_remote,
    allowed_hosts,
    writable,
    allow_secrets_override,
    allow_wide_forget,
):
    """Serve this store as a web page to look at memory (open the address in a browser: search,
    timeline, topic tree, history) and an HTTP JSON API: /search, /recall, /add, /context, /where,
    /stats, described at /openapi.json. Listens on loopback only unless --allow-remote and
    --allowed-host; read-only unless --writable. Stops on Ctrl-C.

    Example: ct -C ~/memory serve --port 8765
    """
    import sys

    st = obj.store()

    def announce(url):
        # stdout, flushed: scripts (and the tests) read the bound port from this line when --port 0
        click.echo(
            f"Serving {st.root} at {url}/ (API description: {url}/openapi.json{'' if writable else '; read-only'})"
        )
        sys.stdout.flush()

    from ..serve.http import make_server, serve, url_of

    server = make_server(
        st.root,
        host=host,
        port=port,
        allow_remote=allow_remote,
        log=not obj.quiet,
        writable=writable,
        allowed_hosts=allowed_hosts,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
    )
    serve(server, ready=lambda: announce(url_of(server)))


@click.command("mcp")
@_guard_options
@click.pass_obj
def mcp_cmd(obj, allow_secrets_override, allow_wide_forget):
    """Serve this store to AI agents over MCP (stdio): tools search, recall, add, mark, where,
    context, tree and forget, and the resource memstore://stats.

    Register it with Claude Code:  claude mcp add memstore -- ct -C ~/memory mcp

    Example: ct -C ~/memory mcp
    """
    from ..serve.mcp import serve

    serve(
        obj.store().root,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
    )


@click.command("chat")
@click.option(
    "--once", "once", default=None, metavar="TEXT", help="Ask one question, print the answer, exit."
)
@click.option(
    "--session", default=None, help="Session name for the stored turns (default chat-<time>)."
)
@click.option(
    "--budget",
    default=1500,
    show_default=True,
    type=click.IntRange(50, None),
    help="Token budget of the memory context in each prompt.",
)
@click.option(
    "--verbose",
    "debug",
    is_flag=True,
    help="Write each turn's hits, context and prompt to .memstore/chat-debug/.",
)
@secret_options("Store turns")
@click.option(
    "--send-secrets",
    is_flag=True,
    help="Send the LLM the secrets of records stored with --allow-secrets (masked by default).",
)
@click.option("--json", "as_json", is_flag=True, help="With --once: print the turn as JSON.")
@click.pass_obj
def chat_cmd(obj, once, session, budget, debug, secrets, send_secrets, as_json):
    """Chat with memory: answers from an OpenAI-compatible LLM (OPENAI_BASE_URL), turns stored.

    Example: ct chat --once "What did we decide about the trip budget?"
    """
    from ..errors import SecretsFound

    chat = obj.store(index=True).chat(
        session=session, budget=budget, verbose=debug, secrets=secrets, send_secrets=send_secrets
    )
    if once is not None:
        turn = chat.ask(once)
        if as_json:
            emit_json(turn.to_json())
        else:
            _show(obj, turn)
        if turn.error:
            raise SystemExit(1)
        return
    obj.say(
        f"Chatting in session {chat.session} (model {chat.llm.model}). Empty line or Ctrl-D to quit."
    )
    while True:
        try:
            text = click.prompt("you", prompt_suffix="> ", default="", show_default=False)
        except (EOFError, click.Abort):
            break
        if not text.strip():
            break
        try:
            _show(obj, chat.ask(text))
        except SecretsFound as exc:  # the session goes on; that turn was neither sent nor stored
            obj.say(str(exc))


def _show(obj, turn) -> None:
    for note in turn.notes:
        obj.say(note)
    if turn.reply is not None:
        click.echo(turn.reply)
    else:
        click.echo(f"Error: {turn.error}\nYour message was stored; no answer was stored.", err=True)
    for f in turn.debug_files:
        obj.say(f"debug: {f}")
