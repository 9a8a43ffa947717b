"""`ct mcp`: one store's memory as an MCP server over stdio (tools search, recall, add, mark, where, context, tree).

Every tool calls the same `Store` method as the `ct` command of the same name and returns its
`to_json()` shape. All store work runs on one dedicated thread: the index's SQLite connection
belongs to the thread that opened it, and the event loop stays free to answer pings meanwhile.
stdout carries the protocol, so nothing here prints; notes go to stderr through logging. Every
line the client sends is answered (memstore/serve/mcp_wire.py); every value is bounded, and a
verbatim secret or a wide forget needs a flag the user gave to `ct mcp` (memstore/serve/limits.py).
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
`done` to close it). Every write is one git commit. Text is returned verbatim."""


class MemoryServer:
    """Wraps one Store; each public coroutine is an MCP tool."""

    def __init__(
        self,
        root: Path | str,
        *,
        allow_secrets_override: bool = False,
        allow_wide_forget: bool = False,
    ):
        from ..store import Store

        self.root = Path(root)
        self.allow_secrets_override, self.allow_wide_forget = (
            allow_secrets_override,
            allow_wide_forget,
        )
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
            return await loop.run_in_executor(self._pool, fn)
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
    ) -> dict:
        """Search memory by words and meaning. mode: hybrid (default), exact or vector. since/until: ISO
        times or phrases like "last week". Returns hits with verbatim text, time, role, session, source,
        and `warnings` when the store needs attention (damaged files, git mid-merge; `ct fsck` says more)."""

        def run():
            st = self._st()
            hits = st.search(
                query, k=k, mode=mode, since=since, until=until, role=role, session=session
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
            },
        )

    async def recall(
        self,
        question: str,
        k: int = 10,
        now: str | None = None,
        around: int = 0,
        docs: bool = False,
    ) -> dict:
        """Recall what was said: a question with a time phrase ("what did we decide yesterday evening")
        becomes a time window; returns verbatim lines in time order and how they were found (level),
        and `warnings` when the store needs attention, as search does."""

        def run():
            st = self._st()
            out = st.recall(question, k=k, now=now, around=around, docs=docs).to_json()
            warnings = st.warnings()
            return {**out, "warnings": warnings} if warnings else out

        return await self._run(
            "recall",
            run,
            {"question": question, "k": k, "now": now, "around": around, "docs": docs},
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
    ) -> dict:
        """Remember one turn or fact verbatim (one git commit). role: user | assistant | system | tool.
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
            ).to_json()

        fields = {
            "text": text,
            "role": role,
            "actor": actor,
            "session": session,
            "ts": ts,
            "type": type,
            "model": model,
        }
        return await self._run("add", run, {**fields, "secrets": secrets})

    async def mark(self, text: str | None = None, done: str | None = None) -> dict:
        """Set a "where are we now" marker with `text`, or close the open marker whose id starts with `done`."""
        if bool(text) == bool(done):
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError("give either text (a new marker) or done (the id of a marker to close)")
        return await self._run(
            "mark", lambda: self._st().mark(text, done=done).to_json(), {"text": text, "done": done}
        )

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


TOOLS = ("search", "recall", "add", "mark", "forget", "where", "context", "tree")


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
    root: Path | str, *, allow_secrets_override: bool = False, allow_wide_forget: bool = False
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
        root, allow_secrets_override=allow_secrets_override, allow_wide_forget=allow_wide_forget
    )
    server = CheckedServer(
        name="memstore", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    writes = {"add", "mark", "forget"}
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
    root: Path | str, *, allow_secrets_override: bool = False, allow_wide_forget: bool = False
) -> None:
    """Run the server on stdin/stdout until the client closes the connection; every line is answered."""
    import anyio

    from ..store import Store
    from .mcp_wire import checked_stdio

    st = Store.open(
        root
    )  # fail before the handshake, with the CLI's message, if this is not a store
    server, mem = build_server(
        st.root, allow_secrets_override=allow_secrets_override, allow_wide_forget=allow_wide_forget
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
