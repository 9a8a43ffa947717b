"""ct mcp answers every message and keeps its bounds (issue 26): malformed lines sent as raw bytes over
stdio each get a JSON-RPC error, and through the real MCP client, values over their limits, a
verbatim secret and a wide forget are refused with a message naming the flag that allows them."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import threading

import anyio
import pytest

from conftest import commits, git_clean, log_records, write_turns

pytest.importorskip("mcp")

TOKEN = "gh" + "p_" + "Zq8v" * 9
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def _env():
    keep = (
        "XDG_CACHE_HOME",
        "MEMSTORE_EMBED_CACHE",
        "TZ",
        "HF_HUB_OFFLINE",
        "PYTHONPATH",
        "PATH",
        "HOME",
    )
    return {k: os.environ[k] for k in keep if k in os.environ}


def _session(root, *flags):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    args = ["-m", "memstore", "-C", str(root), "mcp", *flags]
    params = StdioServerParameters(command=sys.executable, args=args, env=_env())

    class _Both:
        async def __aenter__(self):
            self._client = stdio_client(params)
            read, write = await self._client.__aenter__()
            self._session = ClientSession(read, write)
            session = await self._session.__aenter__()
            await session.initialize()
            return session

        async def __aexit__(self, *exc):
            await self._session.__aexit__(*exc)
            await self._client.__aexit__(*exc)

    return _Both()


class RawServer:
    """`ct mcp` as a process spoken to in raw bytes, one line at a time; answers read by id."""

    def __init__(self, root):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memstore", "-C", str(root), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(),
        )
        self.lines: list[dict] = []
        self._got = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self._got:
                self.lines.append(json.loads(line))
                self._got.notify_all()

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data.rstrip(b"\n") + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, n: int, timeout: float = 30) -> list[dict]:
        """The first `n` answers, waiting for them up to `timeout` seconds."""
        with self._got:
            self._got.wait_for(lambda: len(self.lines) >= n, timeout=timeout)
            return list(self.lines)

    def close(self) -> str:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.stderr.read().decode()


async def _call_each(s, calls: dict) -> dict:
    """{name: (is_error, first text)} for each (tool, arguments) in `calls`, called in turn."""
    out = {}
    for name, args in calls.items():
        res = await s.call_tool(*args)
        out[name] = (res.is_error, res.content[0].text)
    return out


def test_every_malformed_line_gets_an_answer_over_raw_stdio(store):
    """The SDK's reader dropped these without a word, so a client waited forever on each."""
    server = RawServer(store.root)
    try:
        server.send(json.dumps(INIT).encode())
        assert server.wait_for(1)[0]["id"] == 1
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        bad = [
            (b"{not json", None, -32700, "Parse error"),
            (b"\xff\xfe{}", None, -32700, "not UTF-8"),
            (b"[1, 2]", None, -32600, "batches are not supported"),
            (b'"hello"', None, -32600, "JSON object"),
            (b'{"jsonrpc": "2.0", "id": 7}', 7, -32600, '"method"'),
            (b'{"jsonrpc": "1.0", "id": 8, "method": "ping"}', 8, -32600, '"2.0"'),
            (
                b'{"jsonrpc": "2.0", "id": 9, "method": "ping", "params": 5}',
                9,
                -32600,
                "not a JSON-RPC 2.0",
            ),
            (
                b'{"jsonrpc": "2.0", "id": "s", "method": "tools/call", '
                b'"params": {"name": "search", "arguments": {"query": "\\ud800"}}}',
                "s",
                -32602,
                "params.arguments.query holds a lone UTF-16 surrogate",
            ),
            (
                b'{"jsonrpc": "2.0", "id": 10, "method": "tools/call", '
                b'"params": {"name": "add", "arguments": {"text": "x\\udc00y"}}}',
                10,
                -32602,
                "params.arguments.text",
            ),
            (b"[" * 100_000 + b"]" * 100_000, None, -32700, "nests too deeply"),
        ]
        for data, _, _, _ in bad:
            server.send(data)
        server.send(b'{"jsonrpc": "2.0", "id": 99, "method": "ping"}')
        answers = server.wait_for(1 + len(bad) + 1)
    finally:
        stderr = server.close()
    assert len(answers) == 1 + len(bad) + 1, (answers, stderr[-2000:])
    for (data, rid, code, message), got in zip(bad, answers[1:]):
        assert got["id"] == rid and got["error"]["code"] == code, (data[:60], got)
        assert message in got["error"]["message"], (data[:60], got)
    assert answers[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}, "the server still answers"
    assert "Traceback" not in stderr


def test_limits_and_flags_over_the_real_client(store):
    rows = [
        (f"2026-03-10T10:{i:02d}:00Z", "user", f"bulk note number {i}", "bulk") for i in range(12)
    ]
    write_turns(store, rows, fields=("ts", "role", "text", "session"))
    before = commits(store.root)

    async def refused():
        async with _session(store.root) as s:
            out = await _call_each(
                s,
                {
                    "k": ("search", {"query": "bulk", "k": 10**18}),
                    "recall_k": ("recall", {"question": "bulk", "k": 10**30}),
                    "query": ("search", {"query": "q" * 10_001}),
                    "context": ("context", {"query": "x", "recent": -1}),
                    "secret": ("add", {"text": f"deploy with {TOKEN}", "secrets": "allow"}),
                    "wide": ("forget", {"since": "1970-01-01"}),
                    "session": ("forget", {"session": "bulk"}),
                },
            )
            preview = await s.call_tool("forget", {"session": "bulk", "dry_run": True})
            out["preview"] = (
                preview.is_error,
                preview.structured_content or json.loads(preview.content[0].text),
            )
            return out

    out = anyio.run(refused)
    assert out["k"][0] and "'k' must be from 1 to 1000" in out["k"][1], out["k"]
    assert out["recall_k"][0] and "'k' must be from 1 to 1000" in out["recall_k"][1]
    assert out["query"][0] and "the limit is 10,000" in out["query"][1]
    assert out["context"][0] and "'recent' must be from 0 to 1000" in out["context"][1]
    assert (
        out["secret"][0]
        and "ct mcp --allow-secrets-override" in out["secret"][1]
        and TOKEN not in out["secret"][1]
    )
    assert (
        out["wide"][0]
        and "12 records" in out["wide"][1]
        and "ct mcp --allow-wide-forget" in out["wide"][1]
    )
    assert out["session"][0] and "--allow-wide-forget" in out["session"][1]
    assert not out["preview"][0] and len(out["preview"][1]["forgotten"]) == 12, (
        "a dry run only lists"
    )
    assert "Traceback" not in json.dumps(out)
    assert commits(store.root) == before and git_clean(store.root)

    async def allowed():
        async with _session(store.root, "--allow-secrets-override", "--allow-wide-forget") as s:
            added = await s.call_tool("add", {"text": f"deploy with {TOKEN}", "secrets": "allow"})
            gone = await s.call_tool("forget", {"session": "bulk"})
            return added, gone

    added, gone = anyio.run(allowed)
    assert not added.is_error and not gone.is_error, (added.content, gone.content)
    assert len(json.loads(gone.content[0].text)["forgotten"]) == 12
    assert len(commits(store.root)) == len(before) + 2 and git_clean(store.root)


def test_tool_descriptions_name_the_flags_and_the_bound():
    from memstore.serve import limits
    from memstore.serve.mcp import MemoryServer

    assert "--allow-secrets-override" in MemoryServer.add.__doc__
    assert f"At most {limits.MAX_FORGET} records" in MemoryServer.forget.__doc__
    assert "--allow-wide-forget" in MemoryServer.forget.__doc__
    assert f"{limits.MAX_TEXT:,} characters" in MemoryServer.add.__doc__


def test_unknown_arguments_and_bools_for_counts_are_refused_naming_the_parameters(store):
    """Issue 29: the SDK drops arguments a tool does not take, so `limit`, `roles` or a misspelt
    name used to be ignored and the answer came back unfiltered; and true was read as k=1. Each is
    refused, as over HTTP, and the message names the tool's own parameters."""
    rows = [
        ("2026-03-10T10:00:00Z", "user", "the boiler is serviced in May", "home"),
        ("2026-03-10T10:01:00Z", "assistant", "the boiler is an old one", "home"),
    ]
    write_turns(store, rows, fields=("ts", "role", "text", "session"))
    before = commits(store.root)

    async def calls():
        async with _session(store.root) as s:
            return await _call_each(
                s,
                {
                    "limit": ("search", {"query": "boiler", "limit": 1}),
                    "roles": ("search", {"query": "boiler", "roles": ["assistant"]}),
                    "two": ("recall", {"question": "boiler", "limit": 1, "when": "May"}),
                    "add": ("add", {"text": "note this", "timestamp": "2026-01-01"}),
                    "bool": ("search", {"query": "boiler", "k": True}),
                    "k": ("search", {"query": "boiler", "k": -1}),
                    "good": ("search", {"query": "boiler", "role": ["assistant"]}),
                },
            )

    out = anyio.run(calls)
    params = "(parameters: query, k, mode, since, until, role, session, scope, author)"
    assert out["limit"] == (True, f"search: unknown argument 'limit' {params}"), out["limit"]
    assert out["roles"] == (True, f"search: unknown argument 'roles' {params}"), out["roles"]
    assert out["two"][0] and "recall: unknown arguments 'limit', 'when'" in out["two"][1]
    assert "(parameters: question, k, now, around, docs, author)" in out["two"][1]
    assert out["add"][0] and "add: unknown argument 'timestamp'" in out["add"][1]
    assert "ts" in out["add"][1].split("parameters: ")[1]
    assert out["bool"] == (True, "search: argument 'k' must be an integer, not true")
    assert out["k"][0] and "'k' must be from 1 to 1000, not -1" in out["k"][1]
    good = json.loads(out["good"][1])
    assert not out["good"][0] and [h["role"] for h in good["hits"]] == ["assistant"]
    assert commits(store.root) == before and git_clean(store.root)


def test_error_messages_name_the_tools_parameters_not_the_clis_flags(store):
    """A message the library words for `ct` (--now, --match QUERY, --since/--until, --skip-secrets)
    reaches an MCP caller in the tool's terms; a `ct` command quoted as advice is left whole."""
    write_turns(
        store,
        [("2026-03-10T10:00:00Z", "user", "hello there", "s")],
        fields=("ts", "role", "text", "session"),
    )

    async def calls():
        async with _session(store.root) as s:
            out = {}
            for name, args in {
                "now": ("recall", {"question": "what did I say today", "now": "soonish"}),
                "nothing": ("forget", {}),
                "match": ("forget", {"match": "!!!"}),
                "commit": ("forget", {"commit": "0" * 12}),
                "secret": ("add", {"text": f"deploy with {TOKEN}"}),
                "marker": ("mark", {"text": f"rotate {TOKEN} next"}),
                "verbatim": ("mark", {"text": f"rotate {TOKEN} next", "secrets": "allow"}),
            }.items():
                res = await s.call_tool(*args)
                out[name] = (res.is_error, res.content[0].text)
            return out

    out = anyio.run(calls)
    assert all(err for err, _ in out.values()), out
    assert "now: not an ISO-8601 timestamp: 'soonish'" in out["now"][1]
    assert "record ids, match, session, commit or since/until" in out["nothing"][1]
    assert "match '!!!' has no words" in out["match"][1]
    assert f"commit '{'0' * 12}' is not a commit" in out["commit"][1]
    assert 'secrets "redact"' in out["secret"][1] and TOKEN not in out["secret"][1]
    # mark takes `secrets` as add does (its refusal named a flag the tool did not have)
    assert 'secrets "redact"' in out["marker"][1] and TOKEN not in out["marker"][1]
    assert '"ct mcp --allow-secrets-override"' in out["verbatim"][1]
    for name, (_, text) in out.items():
        assert not re.search(r"(?<![\w\"'])--[a-z]", text.split('"ct ')[0]), (name, text)


def test_add_takes_ts_like_ct_add_and_a_bad_one_writes_nothing(store):
    async def calls():
        async with _session(store.root) as s:
            ok = await s.call_tool(
                "add", {"text": "the ferry left at noon", "ts": "2026-02-01T12:00:00+01:00"}
            )
            n = len(commits(store.root))
            bad = await s.call_tool("add", {"text": "never stored", "ts": "the day after never"})
            return ok, n, bad

    ok, n, bad = anyio.run(calls)
    assert not ok.is_error, ok.content[0].text
    assert [r["ts"] for r in log_records(store.root)] == ["2026-02-01T11:00:00.000000Z"]
    assert bad.is_error and "field 'ts': not an ISO-8601 timestamp" in bad.content[0].text
    assert len(commits(store.root)) == n and git_clean(store.root)
    assert [r["text"] for r in log_records(store.root)] == ["the ferry left at noon"]
