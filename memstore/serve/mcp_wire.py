"""The stdio wire of `ct mcp`: reads JSON-RPC lines from stdin for the MCP SDK, and answers itself
every line the SDK would drop without a word.

The SDK's own stdin reader turns a line it cannot parse into an exception that no one answers, so
a client waiting on that request waits forever. Here each line is checked first: not UTF-8 or
not JSON is a parse error (-32700, id null); a batch, a non-object or a message the SDK's schema
rejects is an invalid request (-32600, with the request's id when it has one); a lone UTF-16
surrogate anywhere in it (JSON allows the escape, Unicode text does not) is invalid params
(-32602). Lines that pass go on to the SDK unchanged, which parses them again the same way.
"""

from __future__ import annotations

import json
import logging
import os
import re
from contextlib import asynccontextmanager

log = logging.getLogger("memstore.mcp")

MAX_LINE = 16 * 1024 * 1024  # bytes in one message; a longer line is refused, not held in memory
_SURROGATE = re.compile("[\ud800-\udfff]")
_INVALID_REQUEST = -32600


def problem(line: bytes) -> tuple[int, object, str] | None:
    """(JSON-RPC error code, id, message) for a line that must not reach the SDK, or None."""
    import mcp_types as types

    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return types.PARSE_ERROR, None, f"Parse error: the message is not UTF-8 (byte {exc.start})"
    try:
        msg = json.loads(text)
    except json.JSONDecodeError as exc:
        return types.PARSE_ERROR, None, f"Parse error: {exc.msg} at column {exc.colno}"
    except RecursionError:
        return types.PARSE_ERROR, None, "Parse error: the message nests too deeply"
    if isinstance(msg, list):
        return (
            types.INVALID_REQUEST,
            None,
            "Invalid request: batches are not supported; send one message a line",
        )
    if not isinstance(msg, dict):
        return (
            types.INVALID_REQUEST,
            None,
            f"Invalid request: a message is a JSON object, not {type(msg).__name__}",
        )
    rid = msg.get("id")
    rid = (
        rid
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
        else None
    )
    try:
        where = _surrogate_at(msg, "")
    except RecursionError:
        return types.INVALID_REQUEST, rid, "Invalid request: the message nests too deeply"
    if where is not None:
        return (
            types.INVALID_PARAMS,
            rid,
            (
                f"Invalid params: {where or 'the message'} holds a lone UTF-16 surrogate, which is not Unicode text"
            ),
        )
    if msg.get("jsonrpc") != "2.0":
        return types.INVALID_REQUEST, rid, 'Invalid request: "jsonrpc" must be "2.0"'
    if not ({"method", "result", "error"} & set(msg)):
        return (
            types.INVALID_REQUEST,
            rid,
            (
                'Invalid request: a message needs "method" (a request or notification) or "result"/"error" (a response)'
            ),
        )
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # pydantic's ValidationError, or its JSON parser's own refusal
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return types.INVALID_REQUEST, rid, f"Invalid request: not a JSON-RPC 2.0 message ({first})"
    return None


def _surrogate_at(value, path: str) -> str | None:
    """The dotted path of the first string (or key) holding a lone surrogate, or None."""
    if isinstance(value, str):
        return path if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if _SURROGATE.search(k):
                return ascii(here)
            if (found := _surrogate_at(v, here)) is not None:
                return found
    if isinstance(value, list):
        for i, v in enumerate(value):
            if (found := _surrogate_at(v, f"{path}[{i}]")) is not None:
                return found
    return None


class _CheckedLines:
    """The async line source handed to the SDK's stdio_server: only lines that pass `problem`."""

    def __init__(self, binary):
        import anyio

        self._binary = binary
        self.write_stream = None  # set once stdio_server has made it
        self._ready = anyio.Event()

    def attach(self, write_stream) -> None:
        self.write_stream = write_stream
        self._ready.set()

    def __aiter__(self):
        return self._lines()

    async def _readline(self, limit: int) -> bytes:
        import anyio

        return await anyio.to_thread.run_sync(self._binary.readline, limit, abandon_on_cancel=True)

    async def _lines(self):
        while True:
            line = await self._readline(MAX_LINE + 1)
            if not line:
                return
            if len(line) > MAX_LINE and not line.endswith(b"\n"):
                while (rest := await self._readline(MAX_LINE)) and not rest.endswith(b"\n"):
                    pass
                await self._answer(
                    _INVALID_REQUEST,
                    None,
                    f"Invalid request: a message is at most {MAX_LINE} bytes",
                )
                continue
            if not line.strip():
                continue
            found = problem(line.strip())
            if found is None:
                yield line.decode("utf-8")
            else:
                await self._answer(*found)

    async def _answer(self, code: int, rid, message: str) -> None:
        import anyio
        import mcp_types as types
        from mcp.shared.message import SessionMessage

        log.warning("answered a bad message: %s", message)
        await self._ready.wait()
        error = types.JSONRPCError(
            jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message)
        )
        try:
            await self.write_stream.send(SessionMessage(error))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass


@asynccontextmanager
async def checked_stdio():
    """stdio_server's (read stream, write stream), fed only lines that `problem` passes.

    stdin is read from a private copy of fd 0, and fd 0 itself points at the null device while
    serving, so no child process can read the protocol's bytes (the SDK does the same for stdout).
    """
    from mcp.server.stdio import stdio_server

    private = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    lines = _CheckedLines(os.fdopen(private, "rb", closefd=False))
    try:
        async with stdio_server(stdin=lines) as (read_stream, write_stream):
            lines.attach(write_stream)
            yield read_stream, write_stream
    finally:
        os.dup2(private, 0)  # `private` stays open: a worker thread may still be blocked reading it
