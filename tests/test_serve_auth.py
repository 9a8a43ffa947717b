"""Tokens for `ct serve --tokens` and `ct mcp --http --tokens`: the file, `ct tokens new`, the
bearer check (401, 403 for a read token's write), the rate limit (429), a non-loopback bind that
needs tokens, and MCP over streamable HTTP with the SDK's own client."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager

import anyio
import pytest

from conftest import commits, ct, git_clean, make_store
from ct_server import MCP_ADDRESS, ct_server
from memstore.errors import UsageError
from memstore.serve import tokens
from memstore.serve.http import bind_address, make_server, url_of

READ = "read-token-for-tests-0123456789"
WRITE = "write-token-for-tests-abcdefghij"
HASHED = "hashed-token-for-tests-KLMNOPQRS"


def tokens_file(folder, text=None):
    """A tokens file (mode 600) outside any store: a plain read line, a plain write line and the
    sha256 line of HASHED (write), with a comment and a blank line."""
    path = folder / "tokens"
    if text is None:
        text = (
            "# tokens for the tests\n\n"
            f"{READ} read\n"
            f"{WRITE} write\n"
            f"sha256:{hashlib.sha256(HASHED.encode()).hexdigest()} write\n"
        )
    path.write_text(text)
    path.chmod(0o600)
    return path


def call(base, path, body=None, token=None, headers=None):
    """(status, headers, JSON) of one request with `Authorization: Bearer token` when given."""
    data = json.dumps(body).encode() if body is not None else None
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    if token is not None:
        hdrs["Authorization"] = f"Bearer {token}"
    hdrs.update(headers or {})
    req = urllib.request.Request(base + path, data=data, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            is_json = resp.headers.get_content_type() == "application/json"
            return resp.status, resp.headers, json.loads(raw) if is_json else raw
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read())


@contextmanager
def running(root, **kw):
    server = make_server(root, **{"port": 0, "log": False, **kw})
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        server.app.close()
        thread.join(timeout=5)


@pytest.fixture
def st(tmp_path):
    st = make_store(tmp_path / "s")
    st.add("We settled on a 40k budget for the offsite.", session="plan", ts="2026-03-10T18:00:00Z")
    return st


# ----- the tokens file ------------------------------------------------------------------------------


def test_a_tokens_file_holds_plain_and_hashed_lines(tmp_path):
    grants = tokens.load(tokens_file(tmp_path))
    assert [(g.level, g.line) for g in grants.grants] == [("read", 3), ("write", 4), ("write", 5)]
    assert grants.find(READ).level == "read"
    assert grants.find(WRITE).level == "write"
    assert grants.find(HASHED).line == 5, "a sha256: line lets its token in"
    assert grants.find("sha256:" + hashlib.sha256(HASHED.encode()).hexdigest()) is None, (
        "the hash itself is not a token"
    )
    for wrong in ("", READ + "x", READ[:-1], "x" * 600):
        assert grants.find(wrong) is None, wrong


@pytest.mark.parametrize(
    "line,why",
    [
        (f"{READ}", "got 1 field"),
        (f"{READ} read extra", "got 3 fields"),
        (f"{READ} admin", "must be 'read' or 'write', not 'admin'"),
        ("sha256:abcd read", "64 hex digits"),
        ("short read", "too easy to guess"),
        ("tab\u00e9-token-0123456789 read", "letters, digits"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path, line, why):
    path = tokens_file(tmp_path, f"# ok\n{WRITE} write\n{line}\n")
    with pytest.raises(UsageError) as err:
        tokens.load(path)
    assert f"{path}, line 3" in str(err.value) and why in str(err.value), str(err.value)


def test_an_unsafe_tokens_file_is_refused_saying_why(st, tmp_path):
    open_file = tokens_file(tmp_path)
    open_file.chmod(0o644)
    with pytest.raises(UsageError, match=r"(?s)may be read or changed by other users.*chmod 600"):
        tokens.load(open_file)
    inside = tokens_file(st.root / ".memstore")
    with pytest.raises(UsageError, match="inside the store's git work tree"):
        tokens.load(inside, st.root)
    (tmp_path / "e").mkdir()
    empty = tokens_file(tmp_path / "e", "# nothing yet\n")
    with pytest.raises(UsageError, match="holds no token"):
        tokens.load(empty)
    # the CLI says so too, exit 2, and serves nothing
    proc = ct("-C", st.root, "serve", "--port", "0", "--tokens", open_file, check=False)
    assert proc.returncode == 2 and "chmod 600" in proc.stderr, proc.stderr
    (tmp_path / "b").mkdir()
    bad = tokens_file(tmp_path / "b", f"{READ} reed\n")
    proc = ct("-C", st.root, "serve", "--port", "0", "--tokens", bad, check=False)
    assert proc.returncode == 2 and f"{bad}, line 1" in proc.stderr, proc.stderr


def test_ct_tokens_new_prints_the_token_once_and_stores_its_hash(st, tmp_path):
    path = tmp_path / "conf" / "tokens"
    out = ct("-C", st.root, "tokens", "new", "--file", path, "--note", "laptop agent")
    token = out.stdout.strip()
    assert re.fullmatch(r"mst_[A-Za-z0-9_-]{40,}", token), out.stdout
    assert "shown this once" in out.stderr
    text = path.read_text()
    assert token not in text and f"sha256:{hashlib.sha256(token.encode()).hexdigest()} read" in text
    assert "# read token made " in text and "laptop agent" in text
    assert path.stat().st_mode & 0o777 == 0o600
    second = ct("-C", st.root, "tokens", "new", "--write", "--file", path).stdout.strip()
    grants = tokens.load(path, st.root)
    assert grants.find(token).level == "read" and grants.find(second).level == "write"
    # the default file is ${XDG_CONFIG_HOME}/memstore/tokens
    ct("-C", st.root, "tokens", "new")
    assert tokens.default_file().is_file()
    # inside the store, or a file that does not parse: refused, nothing written
    proc = ct("-C", st.root, "tokens", "new", "--file", st.root / "tokens", check=False)
    assert proc.returncode == 2 and "inside the store's git work tree" in proc.stderr
    assert not (st.root / "tokens").exists() and git_clean(st.root)
    text = path.read_text()
    path.write_text(text + "garbage\n")
    proc = ct("-C", st.root, "tokens", "new", "--file", path, check=False)
    assert proc.returncode == 2 and f"{path}, line 5" in proc.stderr, proc.stderr
    assert path.read_text() == text + "garbage\n"


# ----- ct serve with tokens -------------------------------------------------------------------------


def test_every_request_needs_a_token_and_only_a_write_token_writes(st, tmp_path):
    before = commits(st.root)
    grants = tokens.load(tokens_file(tmp_path), st.root)
    with running(st.root, writable=True, tokens=grants) as base:
        for path in ("/search?query=budget", "/stats", "/view/overview", "/", "/openapi.json"):
            status, headers, out = call(base, path)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer"), (path, out)
            assert "Authorization: Bearer TOKEN" in out["error"] and out["status"] == 401
        status, headers, out = call(base, "/stats", token="not-a-token-of-this-server")
        assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"], out
        status, _, out = call(base, "/stats", headers={"Authorization": f"Basic {READ}"})
        assert status == 401 and "must be 'Bearer TOKEN'" in out["error"], out

        status, _, doc = call(base, "/openapi.json", token=READ)
        assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert "401" in doc["paths"]["/search"]["get"]["responses"]
        status, _, out = call(base, "/search?query=budget", token=READ)
        assert status == 200 and out["hits"][0]["text"].startswith("We settled"), out
        status, _, out = call(base, "/add", {"text": "read tokens cannot add"}, token=READ)
        assert status == 403 and "may only read" in out["error"], out
        status, _, out = call(base, "/forget", {"match": "budget"}, token=READ)
        assert status == 403, out
        assert commits(st.root) == before, "a read token committed nothing"

        status, _, out = call(base, "/add", {"text": "the write token adds"}, token=WRITE)
        assert status == 200 and out["added"] == 1, out
        status, _, out = call(base, "/add", {"text": "so does the hashed one"}, token=HASHED)
        assert status == 200 and out["added"] == 1, out

        # the page and its files hold no memory: a browser loads them, and the page asks
        status, _, page = call(base, "/", headers={"Accept": "text/html"})
        assert status == 200 and b'id="token-form"' in page
        assert call(base, "/assets/app.js")[0] == 200
    assert len(commits(st.root)) == len(before) + 2 and git_clean(st.root)


def test_the_request_log_names_the_token_not_its_value(st, tmp_path, capfd):
    grants = tokens.load(tokens_file(tmp_path), st.root)
    with running(st.root, writable=True, tokens=grants, log=True) as base:
        assert call(base, "/add", {"text": "who wrote this"}, token=WRITE)[0] == 200
        assert call(base, "/stats", token=READ)[0] == 200
        assert call(base, "/stats")[0] == 401
    log = capfd.readouterr().err.splitlines()
    assert any('(token of line 4) "POST /add' in line for line in log), log
    assert any('(token of line 3) "GET /stats' in line for line in log), log
    assert any('"GET /stats HTTP/1.1" 401' in line and "token" not in line for line in log), log
    assert not any(WRITE in line or READ in line for line in log)


def test_a_server_without_tokens_still_answers_without_one(st):
    with running(st.root) as base:
        assert call(base, "/stats")[0] == 200


def test_a_non_loopback_bind_without_tokens_is_refused(st, tmp_path):
    with pytest.raises(UsageError, match="without tokens") as err:
        bind_address("0.0.0.0", 0, allow_remote=True, allowed_hosts=["memory.lan"])
    assert "--tokens FILE" in err.value.hint
    bind_address("0.0.0.0", 0, allow_remote=True, allowed_hosts=["memory.lan"], tokens=True)
    bind_address("127.0.0.1", 0, allow_remote=False)  # loopback needs none
    for cmd in (
        ["serve", "--host", "0.0.0.0", "--port", "0"],
        ["mcp", "--http", "0.0.0.0:0"],
    ):
        proc = ct("-C", st.root, *cmd, "--allow-remote", "--allowed-host", "m.lan", check=False)
        assert proc.returncode == 2 and "without tokens" in proc.stderr, (cmd, proc.stderr)
    proc = ct("-C", st.root, "mcp", "--tokens", tokens_file(tmp_path), check=False)
    assert proc.returncode == 2 and "--tokens is for MCP over HTTP" in proc.stderr, proc.stderr


def test_a_caller_over_the_rate_gets_429_and_others_go_on(st, tmp_path):
    grants = tokens.load(tokens_file(tmp_path), st.root)
    with running(st.root, tokens=grants, rate=0.05) as base:  # bursts of 100, then 1 in 20 s
        for n in range(1, 106):
            status, headers, out = call(base, "/where?lines=1", token=READ)
            if status != 200:
                break
        assert n > 100 and status == 429, (n, status, out)
        assert int(headers["Retry-After"]) >= 1 and "0.05 a second per caller" in out["error"]
        assert call(base, "/where", token=WRITE)[0] == 200, "another token has its own budget"
        # a wrong token counts against its address: guesses are bounded like any request
        for n in range(1, 106):
            status, _, out = call(base, "/where?lines=1", token="not-a-token-of-this-server")
            if status != 401:
                break
        assert n > 100 and status == 429, (n, status, out)
    with running(st.root, rate=0) as base:  # --rate 0: no limit
        assert all(call(base, "/where?lines=1")[0] == 200 for _ in range(105))


# ----- MCP over streamable HTTP ---------------------------------------------------------------------


@contextmanager
def mcp_http(root, *args):
    """`ct mcp --http 127.0.0.1:0 ARGS` in its own process; yields the /mcp URL it prints."""
    with ct_server(["-q", "-C", root, "mcp", "--http", "127.0.0.1:0", *args], MCP_ADDRESS) as url:
        yield url


async def _call_tool(url, token, tool, args):
    """One tool call with the SDK's streamable HTTP client → (result, or the exception raised)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                try:
                    await session.initialize()
                    return await session.call_tool(tool, args)
                except Exception as exc:  # what the client reports is what is checked
                    return exc


def test_mcp_over_http_with_the_real_client(st, tmp_path):
    pytest.importorskip("mcp")
    import httpx2

    path = tokens_file(tmp_path)
    before = commits(st.root)
    with mcp_http(st.root, "--tokens", path, "--rate", "0.05") as url:
        raw = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=30)
        assert raw.status_code == 401 and raw.headers["www-authenticate"].startswith("Bearer")
        assert "Authorization: Bearer TOKEN" in raw.json()["error"]["message"]
        wrong = httpx2.post(url, json={}, headers={"Authorization": "Bearer nope-nope-nope"})
        assert wrong.status_code == 401 and "invalid_token" in wrong.headers["www-authenticate"]

        refused = anyio.run(_call_tool, url, None, "search", {"query": "budget"})
        assert isinstance(refused, Exception) and "needs a token" in str(refused), refused

        found = anyio.run(_call_tool, url, READ, "search", {"query": "budget"})
        assert not found.is_error and "40k budget" in found.content[0].text

        for tool, args in (("add", {"text": "x"}), ("mark", {"text": "y"}), ("forget", {})):
            denied = anyio.run(_call_tool, url, READ, tool, args)
            assert isinstance(denied, Exception) and "may only read" in str(denied), denied
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add"}}
        raw = httpx2.post(url, json=body, headers={"Authorization": f"Bearer {READ}"})
        assert raw.status_code == 403, raw.text
        for bad in (b"{not json", b"\xff\xfe", b"[" * 100_000):  # a read token's body is read
            raw = httpx2.post(url, content=bad, headers={"Authorization": f"Bearer {READ}"})
            assert raw.status_code == 400 and "body is not" in raw.text, raw.text
        assert commits(st.root) == before, "a read token committed nothing"

        added = anyio.run(_call_tool, url, HASHED, "add", {"text": "added over MCP HTTP"})
        assert not added.is_error and '"added": 1' in added.content[0].text

        auth = {"Authorization": f"Bearer {READ}", "Content-Type": "application/json"}
        big = httpx2.post(url, content=b" " * (2 << 20), headers=auth, timeout=60)
        assert big.status_code == 413 and "1048576-byte limit" in big.json()["error"]["message"]
        auth["Authorization"] = f"Bearer {HASHED}"  # a write token's too: a JSON-RPC error
        big = httpx2.post(url, content=b" " * (2 << 20), headers=auth, timeout=60)
        assert big.status_code == 413 and "1048576-byte limit" in big.json()["error"]["message"]
        wrong = {**auth, "Authorization": "Bearer nope-nope-nope"}
        with httpx2.Client(timeout=30) as client:
            for n in range(1, 106):  # wrong tokens spend their address's burst, then 429
                answer = client.post(url, json={}, headers=wrong)
                if answer.status_code != 401:
                    break
        # (this address's unauthenticated requests above spent part of the burst already)
        assert answer.status_code == 429 and n <= 101, (n, answer.status_code)
        # each token its own rate: the write token's burst of 100 is spent, then 429
        auth["Authorization"] = f"Bearer {WRITE}"
        with httpx2.Client(timeout=30) as client:
            for n in range(1, 106):
                answer = client.post(
                    url, json={"jsonrpc": "2.0", "id": n, "method": "ping"}, headers=auth
                )
                if answer.status_code == 429:
                    break
        assert n > 100 and answer.status_code == 429 and answer.headers["retry-after"], n
    assert commits(st.root)[0].startswith("Add user turn: added over MCP HTTP")
    assert git_clean(st.root)
