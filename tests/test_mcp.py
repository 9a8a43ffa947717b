"""`ct mcp` end to end: the real MCP client spawns `python -m memstore -C STORE mcp` and talks over stdio."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest

from conftest import commits, ct, ct_process, git_clean

pytest.importorskip("mcp")


def _session(root, *flags):
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {
        k: os.environ[k]
        for k in ("XDG_CACHE_HOME", "MEMSTORE_EMBED_CACHE", "TZ", "HF_HUB_OFFLINE", "PYTHONPATH")
        if k in os.environ
    }
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memstore", "-C", str(root), "mcp", *flags], env=env
    )

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


def _data(result) -> dict:
    assert not result.is_error, result.content[0].text
    if result.structured_content is not None:
        sc = result.structured_content
        return sc.get("result", sc) if set(sc) == {"result"} else sc
    return json.loads(result.content[0].text)


def test_tools_and_stats_over_stdio(store):
    ct(
        "-C",
        store.root,
        "add",
        "--session",
        "trip",
        "--ts",
        "2026-11-24T19:42:00Z",
        "Let's cap the trip budget at 2,400 euros.",
    )
    ct(
        "-C",
        store.root,
        "add",
        "--session",
        "trip",
        "--role",
        "assistant",
        "--ts",
        "2026-11-24T19:43:00Z",
        "Agreed: 2,400 euros for flights and the flat.",
    )
    n_commits = len(commits(store.root))

    async def main():
        async with _session(store.root) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert {"search", "recall", "add", "mark", "where", "context", "tree"} <= set(tools)
            assert tools["search"].annotations.read_only_hint is True
            assert tools["add"].annotations.read_only_hint is False

            found = _data(await s.call_tool("search", {"query": "trip budget", "k": 5}))
            assert found["hits"][0]["text"].startswith("Let's cap the trip budget")
            assert {h["session"] for h in found["hits"]} == {"trip"}

            added = _data(
                await s.call_tool(
                    "add",
                    {
                        "text": "The museum closes at 18:00 on Mondays.",
                        "session": "trip",
                        "role": "assistant",
                    },
                )
            )
            assert added["added"] == 1 and len(added["commit"]) == 40

            exact = _data(await s.call_tool("search", {"query": "museum", "mode": "exact"}))
            assert [h["text"] for h in exact["hits"]] == ["The museum closes at 18:00 on Mondays."]

            rec = _data(
                await s.call_tool(
                    "recall",
                    {
                        "question": "what did we say about the budget on 24 November 2026",
                        "now": "2026-11-30T12:00:00Z",
                    },
                )
            )
            assert rec["level"] == "in_window"
            assert any("2,400 euros" in h["text"] for h in rec["hits"])
            assert rec["window"]["start"].startswith("2026-11-24")

            marker = _data(await s.call_tool("mark", {"text": "waiting for Ana's hotel numbers"}))
            assert marker["status"] == "open"
            where = _data(await s.call_tool("where", {"lines": 2}))
            assert [m["text"] for m in where["markers"]] == ["waiting for Ana's hotel numbers"]
            assert where["lines"][-1]["text"] == "The museum closes at 18:00 on Mondays."
            closed = _data(await s.call_tool("mark", {"done": marker["id"][:14]}))
            assert closed["status"] == "done"

            ctx = _data(await s.call_tool("context", {"query": "trip budget", "budget": 300}))
            assert ctx["tokens"] <= 300 and "2,400 euros" in ctx["text"]

            tree = _data(await s.call_tool("tree", {}))
            assert tree["total_topics"] >= 1 and tree["text"]

            bad = await s.call_tool("mark", {})
            assert bad.is_error and "either text" in bad.content[0].text
            bad = await s.call_tool("search", {"query": "x", "mode": "fuzzy"})
            assert bad.is_error and "mode must be one of" in bad.content[0].text

            resources = (await s.list_resources()).resources
            assert [str(r.uri) for r in resources] == ["memstore://stats"]
            stats = json.loads((await s.read_resource("memstore://stats")).contents[0].text)
            assert stats["records"] == 3 and stats["store"] == str(store.root)

    anyio.run(main)
    # add, mark and mark --done: three commits, nothing left uncommitted
    assert len(commits(store.root)) == n_commits + 3
    assert commits(store.root)[:3] == [
        "Mark done: waiting for Ana's hotel numbers",
        "Mark: waiting for Ana's hotel numbers",
        "Add assistant turn: The museum closes at 18:00 on Mondays.",
    ]
    assert git_clean(store.root)


def test_not_a_store_fails_before_the_handshake(tmp_path):
    proc = ct_process(
        "-C", tmp_path, "mcp", check=False, input=""
    )  # the stdio server's own process
    assert proc.returncode == 3 and "Not a memory store" in proc.stderr


def test_search_over_mcp_says_when_the_store_needs_attention(store):
    """A damaged store still answers, and the agent is told: a pack deleted by hand leaves a record
    with no vector, and the search result carries a warning naming it (none on a healthy store)."""
    rid = json.loads(ct("-C", store.root, "add", "the boiler is serviced in May", "--json").stdout)[
        "ids"
    ][0]

    async def search():
        async with _session(store.root) as s:
            found = _data(await s.call_tool("search", {"query": "boiler serviced"}))
            return found, _data(
                await s.call_tool("recall", {"question": "what did I say about the boiler today"})
            )

    healthy, recalled = anyio.run(search)
    assert healthy["hits"] and "warnings" not in healthy and "warnings" not in recalled
    for pack in (store.root / "packs").rglob("*.is"):
        pack.unlink()
    damaged, recalled = anyio.run(search)
    assert any(h["id"] == rid for h in damaged["hits"]), "the words still find it"
    assert any(f"record {rid}: no vector" in w for w in damaged["warnings"]), damaged
    assert any(f"record {rid}: no vector" in w for w in recalled["warnings"]), recalled
