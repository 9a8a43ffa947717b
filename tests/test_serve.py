"""ct serve: the HTTP JSON API, exercised with a real HTTP client (urllib) over loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import CT, commits, ct, git_clean, make_store
from memstore.errors import UsageError
from memstore.serve.http import ENDPOINTS, bind_address, make_server, url_of


def call(base, path, body=None, method=None, headers=None, raw: bytes | None = None):
    """(status, headers, JSON) for one request; 4xx/5xx answers are returned, not raised."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    hdrs = {"Content-Type": "application/json"} if data is not None else {}
    hdrs.update(headers or {})
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read())


@pytest.fixture
def served(tmp_path):
    """A store with three turns, served from a thread on a free loopback port; yields (base URL, store)."""
    yield from _serve(tmp_path)


@pytest.fixture(scope="module")
def served_ro(tmp_path_factory):
    """Like `served`, shared by the tests that never write (setting a store up costs a second or two)."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    with (
        pytest.MonkeyPatch.context() as mp
    ):  # what conftest's per-test isolation sets, for this longer life
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
        mp.delenv("MEMSTORE_DIR", raising=False)
        mp.setenv("TZ", "UTC")
        yield from _serve(tmp_path_factory.mktemp("ro"))


def _serve(tmp_path):
    st = make_store(tmp_path / "s")
    st.add(
        "We settled on a 40k budget for the offsite.",
        role="assistant",
        session="plan",
        ts="2026-03-10T18:00:00Z",
    )
    st.add("Book the venue in Lisbon.", role="user", session="plan", ts="2026-03-10T18:05:00Z")
    st.add("The cat knocked over a plant.", role="user", session="home", ts="2026-03-11T09:00:00Z")
    server = make_server(st.root, port=0, log=False, writable=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield url_of(server), st
    finally:
        server.shutdown()
        server.server_close()
        server.app.close()
        thread.join(timeout=5)


def test_cli_serve_end_to_end_and_clean_stop(tmp_path):
    st = make_store(tmp_path / "s")
    proc = subprocess.Popen(
        [*CT, "-C", str(st.root), "serve", "--port", "0", "--writable"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        line = _first_line(proc, timeout=30)
        m = re.search(r"at (http://127\.0\.0\.1:\d+)/", line)
        assert m, line
        base = m.group(1)

        status, _, out = call(
            base,
            "/add",
            {"text": "We settled on a 40k budget.", "role": "assistant", "session": "plan"},
        )
        assert status == 200 and out["added"] == 1 and out["commit"]
        assert commits(st.root)[0].startswith("Add assistant turn")

        status, _, out = call(base, "/search?query=budget&k=3")
        assert status == 200 and out["hits"][0]["text"] == "We settled on a 40k budget."
        status, _, out = call(base, "/recall?question=what+did+we+say+today+about+the+budget")
        assert status == 200 and out["window"]["phrase"] == "today"
        assert [h["text"] for h in out["hits"]] == ["We settled on a 40k budget."]
        status, _, out = call(base, "/where")
        assert status == 200 and out["session"] == {"name": "plan", "lines": 1}
        status, _, out = call(base, "/context", {"query": "budget", "budget": 200})
        assert status == 200 and "40k budget" in out["text"] and out["tokens"] <= 200
        status, _, out = call(base, "/stats")
        assert status == 200 and out["records"] == 1
        status, _, out = call(base, "/openapi.json")
        assert set(out["paths"]) == set(ENDPOINTS)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            raise
    assert proc.returncode == 0, proc.stderr.read()
    assert git_clean(st.root)


def _first_line(proc, timeout: float) -> str:
    box = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not box or not box[0]:
        proc.kill()
        raise AssertionError(
            f"ct serve printed no address within {timeout} s: {proc.stderr.read()}"
        )
    return box[0]


def test_read_endpoints_take_query_or_json(served_ro):
    base, st = served_ro
    status, _, get = call(base, "/search?query=venue&mode=exact&role=user&role=assistant")
    status2, _, post = call(
        base, "/search", {"query": "venue", "mode": "exact", "role": ["user", "assistant"]}
    )
    assert status == status2 == 200
    assert [h["id"] for h in get["hits"]] == [h["id"] for h in post["hits"]]
    assert get["hits"][0]["text"] == "Book the venue in Lisbon."
    _, _, only = call(base, "/search", {"query": "venue", "mode": "exact", "role": "assistant"})
    assert only["hits"] == []
    _, _, out = call(base, "/search", {"query": "plant", "mode": "exact", "session": "home"})
    assert [h["session"] for h in out["hits"]] == ["home"]
    _, _, out = call(
        base, "/recall?question=what+happened+on+2026-03-10&docs=false&now=2026-03-12T00:00:00Z"
    )
    assert out["level"] and [h["text"] for h in out["hits"]] == [
        "We settled on a 40k budget for the offsite.",
        "Book the venue in Lisbon.",
    ]


def test_add_writes_one_commit_and_leaves_git_clean(served):
    base, st = served
    before = len(commits(st.root))
    status, _, out = call(
        base, "/add", {"text": "Remember: the deposit is due Friday.", "session": "plan"}
    )
    assert status == 200 and out["added"] == 1
    assert len(commits(st.root)) == before + 1 and git_clean(st.root)
    _, _, hits = call(base, "/search", {"query": "deposit", "mode": "exact"})
    assert hits["hits"][0]["id"] == out["ids"][0]


def test_records_written_by_another_process_are_found(served):
    base, st = served
    call(base, "/stats")  # the worker thread has opened the index before the outside write
    ct("-C", st.root, "add", "--session", "elsewhere", "Zanzibar ferry leaves at noon.")
    _, _, out = call(base, "/search?query=Zanzibar&mode=exact")
    assert [h["session"] for h in out["hits"]] == ["elsewhere"]
    _, _, where = call(base, "/where")
    assert where["session"]["name"] == "elsewhere"
    assert git_clean(st.root)


@pytest.mark.parametrize(
    "path,kwargs,status,message",
    [
        ("/add", {"raw": b'{"text": "x",'}, 400, "body is not valid JSON: Expecting"),
        ("/add", {"raw": b"\xff\xfe"}, 400, "not UTF-8"),
        ("/add", {"body": ["text"]}, 400, "body must be a JSON object, not list"),
        ("/add", {"body": {}}, 400, "/add needs the parameter 'text'"),
        (
            "/add",
            {"body": {"text": "hi", "colour": "red"}},
            400,
            "unknown parameter 'colour' for /add",
        ),
        ("/add", {"body": {"text": 5}}, 400, "parameter 'text' must be a JSON string, not 5"),
        ("/add", {"body": {"text": "hi", "role": "wizard"}}, 400, "cannot add:"),
        ("/add", {"method": "GET"}, 405, "/add answers POST, not GET"),
        ("/add", {"method": "OPTIONS"}, 405, "not OPTIONS"),
        (
            "/add",
            {"method": "OPTIONS", "headers": {"Origin": "http://localhost:3000"}},
            403,
            "web origin",
        ),
        ("/search?query=a&k=ten", {}, 400, "parameter 'k' must be an integer, not 'ten'"),
        ("/search?query=a&query=b", {}, 400, "given 2 times"),
        ("/search", {"raw": b'{"query": "a", "k": 1, "k": 20}'}, 400, "'k' given twice"),
        ("/search", {"body": {"query": "a", "k": True}}, 400, "must be a JSON integer"),
        ("/search", {"body": {"query": "a", "mode": "fuzzy"}}, 400, "mode must be one of"),
        ("/search?query=a", {"body": {"k": 1}}, 400, "not the query string"),
        ("/recall?question=", {}, 400, "recall needs a question"),
        ("/recall?question=x&docs=maybe", {}, 400, "must be true or false"),
        ("/nope", {}, 404, "no endpoint /nope"),
        (
            "/add",
            {"raw": b"text=hi", "headers": {"Content-Type": "application/x-www-form-urlencoded"}},
            415,
            "application/json",
        ),
        ("/stats", {"headers": {"Host": "attacker.example"}}, 403, "not a loopback name"),
        ("/stats", {"headers": {"Origin": "https://attacker.example"}}, 403, "web origin"),
    ],
)
def test_errors_are_json_with_status_codes(served_ro, path, kwargs, status, message):
    base, st = served_ro
    before = commits(st.root)
    got, headers, out = call(base, path, **kwargs)
    assert got == status, out
    assert out["status"] == status and message in out["error"], out
    assert headers["Content-Type"].startswith("application/json")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert not [h for h in headers if h.lower().startswith("access-control-")], (
        "no CORS grant, ever"
    )
    if status == 405:
        assert headers["Allow"] == "POST"
    assert commits(st.root) == before and git_clean(st.root)


def test_concurrent_requests_share_one_store_thread(served_ro):
    base, _ = served_ro
    queries = ["budget", "venue", "plant", "Lisbon"] * 5
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda q: call(base, f"/search?query={q}&mode=exact"), queries))
    assert all(status == 200 for status, _, _ in results)
    assert all(
        out["hits"] and q.lower() in out["hits"][0]["text"].lower()
        for q, (_, _, out) in zip(queries, results)
    )


def test_openapi_describes_every_endpoint_and_its_schemas_are_valid(served_ro):
    import jsonschema

    base, _ = served_ro
    _, _, doc = call(base, "/openapi.json")
    assert doc["openapi"].startswith("3.")
    for path, ep in ENDPOINTS.items():
        ops = doc["paths"][path]
        assert set(ops) == {m.lower() for m in ep.methods}
        if "get" in ops:
            assert [p["name"] for p in ops["get"]["parameters"]] == [p.name for p in ep.params]
        if "post" in ops:
            schema = ops["post"]["requestBody"]["content"]["application/json"]["schema"]
            jsonschema.Draft202012Validator.check_schema(schema)
            assert set(schema["properties"]) == {p.name for p in ep.params}
    add = doc["paths"]["/add"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    jsonschema.validate({"text": "hi", "role": "user"}, add)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"role": "user"}, add)  # the schema says what the server enforces
    _, _, root = call(base, "/")
    assert root["openapi"] == "/openapi.json" and set(root["endpoints"]) == set(ENDPOINTS)


def test_refuses_non_loopback_without_allow_remote(tmp_path):
    st = make_store(tmp_path / "s")
    proc = ct("-C", st.root, "serve", "--host", "0.0.0.0", "--port", "0", check=False)
    assert proc.returncode == 2
    assert "not a loopback address" in proc.stderr and "--tokens FILE" in proc.stderr
    with pytest.raises(UsageError, match="--allow-remote"):
        bind_address("0.0.0.0", 0, allow_remote=False, tokens=True)
    family, addr = bind_address(
        "0.0.0.0", 0, allow_remote=True, allowed_hosts=["memory.test"], tokens=True
    )
    assert addr[0] == "0.0.0.0"
    assert bind_address("localhost", 0, allow_remote=False)[1][0] in ("127.0.0.1", "::1")


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_sigint_stops_the_server(tmp_path, inherited):
    """Ctrl-C stops the server, also when it was started with SIGINT ignored (a background job of
    a shell script, or a parent that ignores it: Python then never raises KeyboardInterrupt)."""
    st = make_store(tmp_path / "s")

    def start_as_inherited():
        signal.signal(signal.SIGINT, signal.SIG_IGN if inherited == "ignored" else signal.SIG_DFL)

    proc = subprocess.Popen(
        [*CT, "-C", str(st.root), "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=start_as_inherited,
    )
    _first_line(proc, timeout=30)
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert "Traceback" not in proc.stderr.read()


def test_add_takes_ts_and_a_bad_one_is_a_400_that_writes_nothing(served):
    base, st = served
    status, _, out = call(
        base, "/add", {"text": "The ferry left at noon.", "ts": "2026-02-01T12:00:00+01:00"}
    )
    assert status == 200 and out["added"] == 1
    _, _, hits = call(base, "/search", {"query": "ferry", "mode": "exact"})
    assert hits["hits"][0]["ts"].startswith("2026-02-01T11:00:00")
    before = commits(st.root)
    status, _, out = call(base, "/add", {"text": "Never stored.", "ts": "the day after never"})
    assert status == 400 and "cannot add: field 'ts': not an ISO-8601 timestamp" in out["error"]
    assert commits(st.root) == before and git_clean(st.root)


@pytest.mark.parametrize(
    "path,body,message",
    [
        ("/recall", {"question": "what did I say today", "now": "soonish"}, "now: not an ISO"),
        ("/forget", {}, "record ids, match, session, commit or since/until"),
        ("/forget", {"match": "!!!"}, "match '!!!' has no words"),
    ],
)
def test_error_messages_name_the_endpoints_parameters_not_the_clis_flags(
    served, path, body, message
):
    base, st = served
    status, _, out = call(base, path, body)
    assert status == 400 and message in out["error"], out
    assert "--" not in out["error"], out
