"""`ct mcp`: one store's memory as an MCP server over stdio (tools search, recall, add, mark, where, context, tree).

Every tool calls the same `Store` method as the `ct` command of the same name and returns its
`to_json()` shape. All store work runs on one dedicated thread: the index's SQLite connection
belongs to the thread that opened it, and the event loop stays free to answer pings meanwhile.
stdout carries the protocol, so nothing here prints; notes go to stderr through logging. Every
line the client sends is answered (memstore/serve/mcp_wire.py); every value is bounded, and a
verbatim secret, a wide forget or a share needs a flag the user gave to `ct mcp`
(memstore/serve/limits.py).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("memstore.mcp")

INSTRUCTIONS = """\
Long-term memory in a git-native store. Use `where` at the start of a task to see open markers and
the latest lines; `recall` for questions with a time phrase ("what did we decide last Tuesday");
`search` for words or meaning over all time; `context` for a ready prompt section under a token
budget; `add` to remember a turn or fact; `mark` to record where the work stands (and `mark` with
`done` to close it). Every write is one git commit. Text is returned verbatim, but for what looks
like a credential (masked)."""


class MemoryServer:
    """Wraps one Store; each public coroutine is an MCP tool."""

    def __init__(
        self,
        root: Path | str,
        *,
        allow_secrets_override: bool = False,
        allow_wide_forget: bool = False,
        allow_share: bool = False,
        send_secrets: bool = False,
    ):
        from ..store import Store

        self.root = Path(root)
        self.allow_secrets_override, self.allow_wide_forget, self.allow_share = (
            allow_secrets_override,
            allow_wide_forget,
            allow_share,
        )
        self.send_secrets = send_secrets  # else every answer's secrets are masked
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memstore")
        self._store = None
        self._open = Store.open

    def _st(self):
        if self._store is None:
            self._store = self._open(self.root)
        return self._store

    async def _run(self, tool: str, fn, params: dict | None = None):
        """fn() on the store thread, once `params` are within limits.py's bounds; errors as ToolError
        whose message names the tool's parameters, not the CLI's flags."""
        from mcp.server.mcpserver.exceptions import ToolError

        from ..errors import MemstoreError
        from . import limits

        loop = asyncio.get_running_loop()
        try:
            limits.check(params or {})
            out = await loop.run_in_executor(self._pool, fn)
            return (
                out if self.send_secrets else await loop.run_in_executor(self._pool, _masked, out)
            )
        except (
            MemstoreError,
            ValueError,
        ) as exc:  # the user-facing message, as the CLI would print it, in this tool's terms
            from ..secrets.policy import user_message

            raise ToolError(limits.in_parameters(user_message(exc), parameters(tool))) from None

    # ----- tools -------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        k: int = 10,
        mode: str = "hybrid",
        since: str | None = None,
        until: str | None = None,
        role: list[str] | None = None,
        session: list[str] | None = None,
        scope: str | None = None,
        author: list[str] | None = None,
    ) -> dict:
        """Search memory by words and meaning. mode: hybrid (default), exact or vector. since/until: ISO
        times or phrases like "last week". scope: private or shared records only. author: only
        records put into memory by these people (a name or an email, any case). Returns hits with
        verbatim text, time, role, session, source, scope, author (who put it into memory; null
        when unknown), and `warnings` when the store needs attention (damaged files, git
        mid-merge; `ct fsck` says more)."""

        def run():
            st = self._st()
            hits = st.search(
                query,
                k=k,
                mode=mode,
                since=since,
                until=until,
                role=role,
                session=session,
                scope=scope,
                author=author,
            )
            warnings = (
                st.warnings()
            )  # damage the index met, git mid-merge: the agent can tell the user
            return {
                "query": query,
                "hits": [h.to_json() for h in hits],
                **({"warnings": warnings} if warnings else {}),
            }

        return await self._run(
            "search",
            run,
            {
                "query": query,
                "k": k,
                "mode": mode,
                "since": since,
                "until": until,
                "role": role,
                "session": session,
                "scope": scope,
                "author": author,
            },
        )

    async def recall(
        self,
        question: str,
        k: int = 10,
        now: str | None = None,
        around: int = 0,
        docs: bool = False,
        author: list[str] | None = None,
    ) -> dict:
        """Recall what was said: a question with a time phrase ("what did we decide yesterday evening")
        becomes a time window; returns verbatim lines in time order and how they were found (level),
        each with its author (who put it into memory; null when unknown), and `warnings` when the
        store needs attention, as search does. author: only lines these people put into memory."""

        def run():
            st = self._st()
            out = st.recall(
                question, k=k, now=now, around=around, docs=docs, author=author
            ).to_json()
            warnings = st.warnings()
            return {**out, "warnings": warnings} if warnings else out

        return await self._run(
            "recall",
            run,
            {
                "question": question,
                "k": k,
                "now": now,
                "around": around,
                "docs": docs,
                "author": author,
            },
        )

    async def add(
        self,
        text: str,
        role: str = "user",
        actor: str | None = None,
        session: str | None = None,
        ts: str | None = None,
        type: str = "text",
        model: str | None = None,
        secrets: str = "refuse",
        scope: str | None = None,
    ) -> dict:
        """Remember one turn or fact verbatim (one git commit). role: user | assistant | system | tool.
        scope: private (readable by the store's user only; sealed to their key in an encrypted
        store) or shared (the team); default: the store's setting (shared).
        ts: when it was said (ISO-8601, e.g. 2026-03-10T18:00:00Z; default: now).
        A text holding a detected secret (token, key, password) is refused unless secrets is
        "redact" (stored with [REDACTED kind] markers); "allow" (stored verbatim) works only when the
        user started the server with --allow-secrets-override. text: at most 100,000 characters."""
        from . import limits

        def run():
            limits.check_secrets(secrets, self.allow_secrets_override, "ct mcp")
            st = self._st()
            return st.add(
                text,
                role=role,
                actor=actor,
                session=session,
                ts=ts,
                type=type,
                model=model,
                secrets=secrets,
                scope=scope,
            ).to_json()

        fields = {
            "text": text,
            "role": role,
            "actor": actor,
            "session": session,
            "ts": ts,
            "type": type,
            "model": model,
            "scope": scope,
        }
        return await self._run("add", run, {**fields, "secrets": secrets})

    async def mark(
        self, text: str | None = None, done: str | None = None, secrets: str = "refuse"
    ) -> dict:
        """Set a "where are we now" marker with `text`, or close the open marker whose id starts
        with `done`. A text holding a detected secret is refused unless secrets is "redact" (kept
        with [REDACTED kind] markers); "allow" works only on a server the user started with
        --allow-secrets-override."""
        if bool(text) == bool(done):
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError("give either text (a new marker) or done (the id of a marker to close)")
        from . import limits

        def run():
            limits.check_secrets(secrets, self.allow_secrets_override, "ct mcp")
            return self._st().mark(text, done=done, secrets=secrets).to_json()

        return await self._run("mark", run, {"text": text, "done": done, "secrets": secrets})

    async def forget(
        self,
        ids: list[str] | None = None,
        match: str | None = None,
        session: str | None = None,
        since: str | None = None,
        until: str | None = None,
        commit: str | None = None,
        dry_run: bool = False,
    ) -> dict:
        """Forget records for good (one git commit): by ids, by every word of `match`, by session, by
        time range, or every record one commit added (`commit`: an import or a write to undo); all
        given must hold. Their text leaves the logs, vectors, topic tree and markers; a tombstone
        keeps other clones from bringing them back. Run with dry_run=true first. At most 10 records
        per call, unless the user started the server with --allow-wide-forget."""
        from . import limits

        criteria = {
            "match": match,
            "session": session,
            "since": since,
            "until": until,
            "commit": commit,
        }

        def run():
            st = self._st()
            return limits.bounded_forget(
                st, self.allow_wide_forget, "ct mcp", ids or (), dry_run=dry_run, **criteria
            ).to_json()

        return await self._run("forget", run, {"ids": ids, **criteria, "dry_run": dry_run})

    async def share(self, ids: list[str], dry_run: bool = False) -> dict:
        """Make private records shared with everyone who reads the store (one git commit; it
        cannot be taken back). Run with dry_run=true first and show the user each record's text
        and the secrets flagged in it. Sharing works only when the user started the server with
        --allow-share (a record with a flagged secret also needs --allow-secrets-override);
        otherwise the user shares with `ct share`. Returns the records, `secrets` (how many
        flagged) and the commit."""
        from . import limits

        def run():
            return limits.bounded_share(
                self._st(),
                self.allow_share,
                self.allow_secrets_override,
                "ct mcp",
                ids,
                dry_run=dry_run,
            ).to_json()

        return await self._run("share", run, {"ids": ids, "dry_run": dry_run})

    async def where(self, markers: int = 10, lines: int = 8) -> dict:
        """Where the work stands: open markers (newest last) and the latest session's last lines."""
        return await self._run(
            "where",
            lambda: self._st().where(markers=markers, lines=lines).to_json(),
            {"markers": markers, "lines": lines},
        )

    async def context(
        self, query: str, budget: int | None = None, k: int = 8, recent: int = 6
    ) -> dict:
        """Prompt context for `query` within `budget` tokens: open markers, matching topic paths,
        recalled verbatim lines (oldest first) and recent turns. `text` is ready to paste."""
        return await self._run(
            "context",
            lambda: self._st().context(query, budget=budget, k=k, recent=recent).to_json(),
            {"query": query, "budget": budget, "k": k, "recent": recent},
        )

    async def tree(self, depth: int | None = None) -> dict:
        """The topic tree: nested topics with names, summaries and turn counts, plus an indented text view."""

        def run():
            from ..tree import render

            st = self._st()
            t = st.tree()
            return {**render.as_json(t, depth), "text": render.text(t, st.tz, depth)}

        return await self._run("tree", run, {"depth": depth})

    async def stats(self) -> str:
        """The store's counts (records, days, sessions, segments, bytes) as JSON."""
        return await self._run(
            "stats", lambda: json.dumps(self._st().stat().to_json(), ensure_ascii=False, indent=1)
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False)


TOOLS = ("search", "recall", "add", "mark", "forget", "share", "where", "context", "tree")


def _masked(answer):
    """An answer with the secrets the scanner flags masked, as ct chat masks what it sends an LLM
    (records stored with --allow-secrets hold them verbatim; `ct mcp --send-secrets` sends them)."""
    from .web.mask import mask, mask_fields

    return mask(answer) if isinstance(answer, str) else mask_fields(answer)


def parameters(tool: str) -> tuple[str, ...]:
    """The parameters of the tool `tool`, in order (none for the stats resource)."""
    fn = getattr(MemoryServer, tool)
    return tuple(n for n in inspect.signature(fn).parameters if n != "self")


def argument_problem(tool: str, arguments: dict) -> str | None:
    """Why the arguments of a call of `tool` are refused before it runs, or None.

    The SDK's argument model drops names it does not know and reads true as 1, so a caller's
    `limit`, `roles` or `ts` would be ignored without a word; as over HTTP, each is refused and
    the message names the tool's parameters.
    """
    import typing

    if tool not in TOOLS:
        return None  # the SDK answers an unknown tool itself
    names = parameters(tool)
    unknown = [a for a in arguments if a not in names]
    if unknown:
        listed = ", ".join(repr(a) for a in unknown)
        return (
            f"{tool}: unknown argument{'s' if len(unknown) > 1 else ''} {listed} "
            f"(parameters: {', '.join(names)})"
        )
    hints = typing.get_type_hints(getattr(MemoryServer, tool))
    for name, value in arguments.items():
        if isinstance(value, bool) and int in typing.get_args(hints[name]) + (hints[name],):
            return f"{tool}: argument {name!r} must be an integer, not {json.dumps(value)}"
    return None


def build_server(
    root: Path | str,
    *,
    allow_secrets_override: bool = False,
    allow_wide_forget: bool = False,
    allow_share: bool = False,
    send_secrets: bool = False,
):
    """An MCPServer with the memory tools and the `memstore://stats` resource (flags: see MemoryServer)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    from .. import __version__

    class CheckedServer(MCPServer):
        """Refuses a call whose arguments the tool does not take, before the SDK drops them."""

        async def call_tool(self, name, arguments, context=None):
            if (why := argument_problem(name, arguments or {})) is not None:
                raise ToolError(why)
            return await super().call_tool(name, arguments, context)

    mem = MemoryServer(
        root,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
        allow_share=allow_share,
        send_secrets=send_secrets,
    )
    server = CheckedServer(
        name="memstore", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    writes = {"add", "mark", "forget", "share"}
    for name in TOOLS:
        fn = getattr(mem, name)
        server.add_tool(
            fn,
            name=name,
            description=fn.__doc__.replace("\n        ", " "),
            annotations=ToolAnnotations(
                read_only_hint=name not in writes,
                destructive_hint=name == "forget",
                idempotent_hint=name not in writes,
                open_world_hint=False,
            ),
        )
    server.resource(
        "memstore://stats",
        name="stats",
        mime_type="application/json",
        description="Counts for this store: records, days, sessions, segments, bytes.",
    )(mem.stats)
    return server, mem


def serve(
    root: Path | str,
    *,
    allow_secrets_override: bool = False,
    allow_wide_forget: bool = False,
    allow_share: bool = False,
    send_secrets: bool = False,
) -> None:
    """Run the server on stdin/stdout until the client closes the connection; every line is answered."""
    import anyio

    from ..store import Store
    from .mcp_wire import checked_stdio

    st = Store.open(
        root
    )  # fail before the handshake, with the CLI's message, if this is not a store
    server, mem = build_server(
        st.root,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
        allow_share=allow_share,
        send_secrets=send_secrets,
    )
    mem._store = None  # opened again on the worker thread, which owns its SQLite connection

    async def run():
        low = (
            server._lowlevel_server
        )  # what MCPServer.run_stdio_async drives, over our checked wire
        async with checked_stdio() as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())

    try:
        anyio.run(run)
    finally:
        mem.close()


WRITES = ("add", "mark", "forget", "share")
READS = tuple(t for t in TOOLS if t not in WRITES)
UNAUTHORIZED = -32001  # JSON-RPC error code of a refused request (no token, a read token's write)


class HTTPGuard:
    """ASGI middleware in front of the SDK's streamable HTTP app: the checks of `ct serve`.

    Host and Origin as `ct serve` checks them (memstore.serve.http.check_origin); with `tokens`,
    a bearer token on every request (401 and `WWW-Authenticate: Bearer` without one or with a
    wrong one); a read token's `tools/call` of anything but a read tool answered 403 before the
    SDK sees it; bodies over `max_body` 413; each caller's rate bounded (429). Every refusal is a
    JSON-RPC error, so the SDK's client reports its message.
    """

    def __init__(self, app, *, tokens=None, allowed_hosts=(), rate: float | None = None, max_body):
        from . import limits
        from .http import host_name

        self.app, self.tokens, self.max_body = app, tokens, max_body
        self.allowed_hosts = frozenset(host_name(h) for h in allowed_hosts)
        self.rate = limits.RateLimit(limits.RATE if rate is None else rate)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        from starlette.datastructures import Headers

        from .http import HTTPError, check_origin, checked_caller

        headers = Headers(scope=scope)
        try:
            check_origin(headers, self.allowed_hosts)
            client = (scope.get("client") or ("?",))[0]
            grant = checked_caller(self.tokens, self.rate, headers.get("authorization"), client)
            if scope["method"] == "POST":  # read here: an oversized body is a JSON-RPC 413 too
                body = await self._body(headers, receive)
                if grant is not None and not grant.writes:
                    refuse_writes(body)
                receive = _replay(body, receive)
        except HTTPError as exc:
            await _refuse(send, exc)
            return
        await self.app(scope, receive, send)

    async def _body(self, headers, receive) -> bytes:
        from .http import HTTPError

        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise HTTPError(413, f"body of {declared} bytes is over the {self.max_body}-byte limit")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HTTPError(400, "the client went away before its body arrived")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise HTTPError(413, f"body over the {self.max_body}-byte limit")
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks)


def refuse_writes(body: bytes) -> None:
    """HTTPError 403 when the JSON-RPC message(s) in `body` call a tool that is not a read tool,
    400 when `body` is not JSON this check can read (a read token's request is never passed on
    unread)."""
    from .http import HTTPError, parse_json

    message = parse_json(body)
    for m in message if isinstance(message, list) else [message]:
        if not isinstance(m, dict) or m.get("method") != "tools/call":
            continue
        params = m.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if name not in READS:
            raise HTTPError(
                403,
                f"this token may only read: it cannot call {str(name)[:60]!r} (the tools that "
                f"write are {', '.join(WRITES)}; a read token may call {', '.join(READS)})",
            )


def _replay(body: bytes, receive):
    """An ASGI `receive` that gives `body` (already read) once, then what `receive` gives."""
    sent = False

    async def again():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _refuse(send, exc) -> None:
    data = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": UNAUTHORIZED,
                "message": exc.message,
                "data": {"status": exc.status},
            },
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"cache-control", b"no-store"),
    ]
    headers += [(k.lower().encode(), v.encode()) for k, v in exc.headers.items()]
    await send({"type": "http.response.start", "status": exc.status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def http_app(
    root: Path | str,
    *,
    tokens=None,
    allowed_hosts=(),
    rate: float | None = None,
    allow_secrets_override: bool = False,
    allow_wide_forget: bool = False,
    allow_share: bool = False,
    send_secrets: bool = False,
):
    """(ASGI app serving MCP at /mcp over streamable HTTP behind HTTPGuard, MemoryServer)."""
    from mcp.server.transport_security import TransportSecuritySettings

    from .http import MAX_BODY

    server, mem = build_server(
        root,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
        allow_share=allow_share,
        send_secrets=send_secrets,
    )
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        max_request_body_size=MAX_BODY,
        # Host and Origin are checked by HTTPGuard, as ct serve checks them (127.0.0.0/8 too)
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    guard = HTTPGuard(app, tokens=tokens, allowed_hosts=allowed_hosts, rate=rate, max_body=MAX_BODY)
    return guard, mem


def serve_http(
    root: Path | str,
    host: str,
    port: int,
    *,
    tokens=None,
    rate: float | None = None,
    allow_remote: bool = False,
    allowed_hosts=(),
    allow_secrets_override: bool = False,
    allow_wide_forget: bool = False,
    allow_share: bool = False,
    send_secrets: bool = False,
    log: bool = True,
    ready=None,
) -> None:
    """Serve MCP over streamable HTTP at http://HOST:PORT/mcp until SIGINT or SIGTERM.

    The bind follows `ct serve`'s rules (a non-loopback host needs tokens, allow_remote and
    allowed_hosts); `ready(url)` runs once the socket listens (port 0: the port it got)."""
    import socket

    import uvicorn

    from ..errors import UsageError
    from ..store import Store
    from .http import PENDING, TIMEOUT, bind_address

    family, addr = bind_address(host, port, allow_remote, allowed_hosts, tokens=tokens is not None)
    st = Store.open(root)  # the CLI's message if this is not a store, before anything listens
    app, mem = http_app(
        st.root,
        tokens=tokens,
        allowed_hosts=allowed_hosts,
        rate=rate,
        allow_secrets_override=allow_secrets_override,
        allow_wide_forget=allow_wide_forget,
        allow_share=allow_share,
        send_secrets=send_secrets,
    )
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        mem.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    import copy
    import sys

    logging_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    logging_config["handlers"]["access"]["stream"] = sys.stderr  # stdout: the address line only
    config = uvicorn.Config(
        app,
        log_config=logging_config,
        log_level="info" if log else "warning",
        access_log=log,
        lifespan="on",
        limit_concurrency=PENDING,
        timeout_keep_alive=int(TIMEOUT),
        server_header=False,
    )
    bound = sock.getsockname()
    name = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    if ready is not None:
        ready(f"http://{name}:{bound[1]}")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        mem.close()
