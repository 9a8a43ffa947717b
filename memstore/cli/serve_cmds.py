"""Commands that serve the store to others: serve (the web page and HTTP API), mcp (agents over
stdio or HTTP), tokens (who may call them) and chat (a person, through an LLM)."""

from __future__ import annotations

import click

from .common import emit_json, secret_options


def _guard_options(f):
    """--allow-secrets-override, --allow-wide-forget, --allow-share and --send-secrets, the same
    for ct serve and ct mcp."""
    f = click.option(
        "--send-secrets",
        is_flag=True,
        help="Answer with the secrets of records stored with --allow-secrets as stored. Without it "
        "every answer masks what the secret scanner flags, as ct chat masks what it sends an LLM.",
    )(f)
    f = click.option(
        "--allow-share",
        is_flag=True,
        help="Let a caller make private records shared (share, which cannot be taken back; a record "
        "with a detected secret also needs --allow-secrets-override). Without it only a share's "
        "dry run is answered: the user shares with ct share.",
    )(f)
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


def _access_options(f):
    """--tokens, --rate, --allow-remote and --allowed-host, the same for ct serve and ct mcp --http."""
    f = click.option(
        "--rate",
        type=click.FloatRange(0, None),
        default=50,
        show_default=True,
        help="Requests a second one caller (a token; without tokens, an address) may keep up, after "
        "a burst of 100; more are answered 429. 0: no limit.",
    )(f)
    f = click.option(
        "--allowed-host",
        "allowed_hosts",
        multiple=True,
        metavar="NAME",
        help="A host name (or address) clients use to reach a non-loopback --host; repeatable. "
        "Requests naming any other host are refused (loopback names always work).",
    )(f)
    f = click.option(
        "--allow-remote",
        is_flag=True,
        help="Allow a non-loopback address (with --tokens and --allowed-host).",
    )(f)
    return click.option(
        "--tokens",
        "tokens_file",
        type=click.Path(dir_okay=False),
        default=None,
        metavar="FILE",
        help="Require 'Authorization: Bearer TOKEN' on every request, TOKEN one of the file's "
        "lines ('TOKEN read|write' or 'sha256:HEX read|write'; make them with ct tokens new). "
        "Needed for a non-loopback address. The file must be outside the store and mode 600.",
    )(f)


def _load_tokens(tokens_file, root):
    if tokens_file is None:
        return None
    from ..serve.tokens import load

    return load(tokens_file, root)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=int, default=8765, show_default=True, help="Port (0 picks a free one)."
)
@_access_options
@click.option(
    "--writable",
    is_flag=True,
    help="Let /add, /forget and /share write to the store (one commit each). Read-only without it.",
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
    allow_share,
    send_secrets,
    tokens_file,
    rate,
):
    """Serve this store as a web page to look at memory (open the address in a browser: search,
    timeline, topic tree, history) and an HTTP JSON API: /search, /recall, /add, /context, /where,
    /stats, described at /openapi.json. Listens on loopback only unless --tokens, --allow-remote
    and --allowed-host; read-only unless --writable. Stops on Ctrl-C.

    Example: ct -C ~/memory serve --port 8765
    """
    import sys

    st = obj.store()
    tokens = _load_tokens(tokens_file, st.root)

    def announce(url):
        # stdout, flushed: scripts (and the tests) read the bound port from this line when --port 0
        click.echo(
            f"Serving {st.root} at {url}/ (API description: {url}/openapi.json"
            f"{'' if writable else '; read-only'}{_token_note(tokens)})"
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
        allow_share=allow_share,
        send_secrets=send_secrets,
        tokens=tokens,
        rate=rate,
    )
    serve(server, ready=lambda: announce(url_of(server)))


def _token_note(tokens) -> str:
    if tokens is None:
        return ""
    writes = sum(g.writes for g in tokens.grants)
    return f"; {len(tokens.grants)} tokens from {tokens.path}, {writes} of them write tokens"


def _host_port(value: str) -> tuple[str, int]:
    """HOST:PORT (or [V6]:PORT) of --http → (host, port); UsageError naming the flag."""
    from ..errors import UsageError

    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(
            f"--http takes HOST:PORT (e.g. 127.0.0.1:8766; port 0 picks a free one), not {value!r}"
        )
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return host or "127.0.0.1", int(port)


@click.command("mcp")
@click.option(
    "--http",
    "http",
    default=None,
    metavar="HOST:PORT",
    help="Serve MCP over streamable HTTP at http://HOST:PORT/mcp instead of stdio (e.g. "
    "127.0.0.1:8766).",
)
@_access_options
@_guard_options
@click.pass_obj
def mcp_cmd(
    obj,
    http,
    tokens_file,
    rate,
    allow_remote,
    allowed_hosts,
    allow_secrets_override,
    allow_wide_forget,
    allow_share,
    send_secrets,
):
    """Serve this store to AI agents over MCP (stdio, or streamable HTTP with --http): tools
    search, recall, add, mark, where, context, tree, forget and share, and the resource
    memstore://stats. Over HTTP, --tokens asks every request for a bearer token, and a read token
    cannot call add, mark, forget or share.

    Register it with Claude Code:  claude mcp add memstore -- ct -C ~/memory mcp

    Example: ct -C ~/memory mcp --http 127.0.0.1:8766 --tokens ~/.config/memstore/tokens
    """
    from ..errors import UsageError

    if http is None:
        given = [
            flag
            for flag, on in (
                ("--tokens", tokens_file),
                ("--allow-remote", allow_remote),
                ("--allowed-host", allowed_hosts),
            )
            if on
        ]
        if given:
            raise UsageError(f"{given[0]} is for MCP over HTTP; add --http HOST:PORT")
        from ..serve.mcp import serve

        serve(
            obj.store().root,
            allow_secrets_override=allow_secrets_override,
            allow_wide_forget=allow_wide_forget,
            allow_share=allow_share,
            send_secrets=send_secrets,
        )
        return
    import sys

    host, port = _host_port(http)
    st = obj.store()
    tokens = _load_tokens(tokens_file, st.root)

    def announce(url):
        click.echo(f"Serving MCP for {st.root} at {url}/mcp{_token_note(tokens)}")
        sys.stdout.flush()

    from ..serve.mcp import serve_http

    serve_http(
        st.root,
        host,
        port,
        tokens=tokens,
        rate=rate,
        allow_remote=allow_remote,
        allowed_hosts=allowed_hosts,
        log=not obj.quiet,
        ready=announce,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
        allow_share=allow_share,
        send_secrets=send_secrets,
    )


@click.group("tokens")
def tokens_cmd():
    """Bearer tokens for ct serve --tokens and ct mcp --http --tokens."""


@tokens_cmd.command("new")
@click.option(
    "--write",
    "write",
    is_flag=True,
    help="A write token (add, forget, mark, share); read-only without.",
)
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="The tokens file to add it to (made, mode 600, if missing). "
    "Default: ${XDG_CONFIG_HOME:-~/.config}/memstore/tokens.",
)
@click.option(
    "--note", default="", help="A comment written above the token's line (who it is for)."
)
@click.pass_obj
def tokens_new_cmd(obj, write, path, note):
    """Make a token, print it once, and add only its hash to the tokens file (a line
    'sha256:HEX read|write'). Give the token to the client; it cannot be shown again.

    Example: ct tokens new --write --note "laptop agent"
    """
    from datetime import datetime, timezone

    from ..errors import NotAStoreError
    from ..serve import tokens

    try:
        root = obj.store().root  # refuse a file inside this store's work tree
    except NotAStoreError:
        root = None
    path = path or tokens.default_file()
    level = "write" if write else "read"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")
    comment = f"{level} token made {when}" + (f": {' '.join(note.split())}" if note else "")
    token = tokens.new(path, level, root, note=comment)
    click.echo(token)
    obj.say(
        f"A {level} token; only its hash was added to {path}. It is shown this once: clients send "
        "it as 'Authorization: Bearer TOKEN'."
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
