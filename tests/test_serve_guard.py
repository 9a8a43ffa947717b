"""ct serve keeps its guard (issue 26): Host and Origin checked on every bind, any 127/8 address is
loopback, cut-off and stalled bodies never act, connections are bounded and time out, values are
bounded, and verbatim secrets or wide forgets need a flag. Real sockets on loopback throughout."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import threading
import time
from contextlib import contextmanager

import pytest

from conftest import CT, commits, ct, git_clean, make_store, write_turns
from memstore.serve import http, limits
from memstore.serve.http import make_server

TOKEN = "gh" + "p_" + "Zq8v" * 9  # a GitHub token's shape, built so no scanner flags this file


@contextmanager
def running(root, **kw):
    """make_server(root, **kw) serving from a thread; yields the server."""
    kw = {"port": 0, "log": False, **kw}
    server = make_server(root, **kw)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        server.app.close()
        thread.join(timeout=5)


def request(
    server, method, path, body=None, headers=None, host=None, raw: bytes | None = None, timeout=15
):
    """(status, headers dict, parsed JSON) for one request sent byte by byte over a real socket.

    `host` is the Host header (default: the address and port the server is bound to); `raw` is
    sent as it is after the request line and the headers given.
    """
    addr, port = server.server_address[:2]
    data = json.dumps(body).encode() if body is not None else b""
    hdrs = {"Host": host or f"{addr}:{port}", "Connection": "close"}
    if body is not None:
        hdrs.update({"Content-Type": "application/json", "Content-Length": str(len(data))})
    hdrs.update(headers or {})
    head = (
        f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    )
    with socket.create_connection((addr, port), timeout=timeout) as sock:
        sock.sendall(head.encode() + (raw if raw is not None else data))
        return parse(read_all(sock))


def read_all(sock) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def parse(answer: bytes):
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), headers, json.loads(body) if body else None


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A store with three turns on 2026-03-10, shared by the tests that never write."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache))
        mp.setenv("MEMSTORE_EMBED_CACHE", str(cache / "embeddings.sqlite"))
        mp.delenv("MEMSTORE_DIR", raising=False)
        mp.setenv("TZ", "UTC")
        st = make_store(tmp_path_factory.mktemp("guard") / "s")
        st.add(
            "We settled on a 40k budget for the offsite.", session="plan", ts="2026-03-10T18:00:00Z"
        )
        st.add("Book the venue in Lisbon.", session="plan", ts="2026-03-10T18:05:00Z")
        yield st.root


# ----- Host and Origin ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,path,body", [("GET", "/view/day?day=2026-03-10", None), ("POST", "/add", {"text": "x"})]
)
def test_dns_rebinding_is_refused_even_with_allow_remote(root, method, path, body):
    """A page on attacker.example whose name now resolves to 127.0.0.1 sends its own Host (and, for
    a POST, its own Origin); --allow-remote used to switch the checks off, so it read and wrote."""
    before = commits(root)
    with running(root, host="127.0.0.1", allow_remote=True, writable=True) as server:
        port = server.server_address[1]
        headers = {"Origin": f"http://attacker.example:{port}"} if method == "POST" else {}
        status, _, out = request(
            server, method, path, body, headers=headers, host=f"attacker.example:{port}"
        )
        assert status == 403 and "not a loopback name" in out["error"], out
        ok, _, day = request(server, "GET", "/view/day?day=2026-03-10")
        assert ok == 200 and len(day["records"]) == 2, "the server's own name still works"
    assert commits(root) == before and git_clean(root)


def test_dns_rebinding_is_refused_by_ct_serve_allow_remote_on_127_0_0_1(tmp_path):
    """The finding as reported: `ct serve --allow-remote --writable` on 127.0.0.1, a foreign Host
    and Origin; the page used to read /view/day and commit through POST /add."""
    st = make_store(tmp_path / "s")
    st.add("the alarm code is in the blue notebook", ts="2026-03-10T18:00:00Z")
    before = commits(st.root)
    argv = [
        *CT,
        "-C",
        str(st.root),
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--allow-remote",
        "--writable",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        box = []
        reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(30)
        m = re.search(r"at http://127\.0\.0\.1:(\d+)/", box[0] if box else "")
        assert m, (box, proc.poll())
        port = int(m.group(1))

        class Bound:  # what `request` needs of a server
            server_address = ("127.0.0.1", port)

        evil = {"host": f"rebound.attacker.example:{port}"}
        status, _, out = request(Bound, "GET", "/view/day?day=2026-03-10", **evil)
        assert status == 403 and "alarm" not in json.dumps(out), out
        origin = {"Origin": f"http://rebound.attacker.example:{port}"}
        status, _, out = request(Bound, "POST", "/add", {"text": "planted"}, headers=origin, **evil)
        assert status == 403, out
        assert request(Bound, "GET", "/view/day?day=2026-03-10")[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert commits(st.root) == before and git_clean(st.root)


def test_a_foreign_origin_or_a_cross_site_fetch_is_refused(root):
    with running(root) as server:
        own = "http://%s:%d" % server.server_address[:2]
        assert request(server, "GET", "/stats", headers={"Origin": own})[0] == 200
        for headers in (
            {"Origin": "null"},
            {"Origin": "http://localhost:3000"},
            {"Sec-Fetch-Site": "cross-site"},
        ):
            status, _, out = request(server, "GET", "/stats", headers=headers)
            assert status == 403, (headers, out)
        assert request(server, "GET", "/stats", headers={"Sec-Fetch-Site": "same-origin"})[0] == 200


def test_a_non_loopback_bind_needs_the_names_it_answers(root, tmp_path):
    from memstore.serve import tokens

    secret = "guard-test-token-0123456789"
    (tmp_path / "tokens").write_text(f"{secret} read\n")
    (tmp_path / "tokens").chmod(0o600)
    proc = ct(
        "-C", root, "serve", "--host", "0.0.0.0", "--port", "0", "--allow-remote",
        "--tokens", tmp_path / "tokens", check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "--allowed-host NAME" in proc.stderr, proc.stderr
    grants = tokens.load(tmp_path / "tokens")
    with running(
        root, host="0.0.0.0", allow_remote=True, allowed_hosts=["Memory.Test"], tokens=grants
    ) as server:
        port = server.server_address[1]
        for host, want in (
            (f"memory.test:{port}", 200),
            (f"localhost:{port}", 200),
            (f"evil.test:{port}", 403),
        ):
            with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
                sock.sendall(
                    f"GET /stats HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {secret}\r\n"
                    "Connection: close\r\n\r\n".encode()
                )
                assert parse(read_all(sock))[0] == want, host


def test_any_address_in_127_8_is_loopback(root):
    """--host 127.0.0.2 used to start and then refuse every request (its Host was not "loopback")."""
    with running(root, host="127.0.0.2") as server:
        assert server.server_address[0] == "127.0.0.2"
        status, _, out = request(server, "GET", "/stats")  # Host: 127.0.0.2:PORT
        assert status == 200 and out["records"] == 2, out


# ----- bodies and connections -------------------------------------------------------------------------


def test_a_body_shorter_than_its_content_length_is_refused(tmp_path):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    body = json.dumps({"text": "half a message"}).encode()
    with running(st.root, writable=True) as server:
        addr, port = server.server_address[:2]
        with socket.create_connection((addr, port), timeout=15) as sock:
            head = (
                f"POST /add HTTP/1.1\r\nHost: {addr}:{port}\r\nContent-Type: application/json\r\n"
            )
            sock.sendall(f"{head}Content-Length: {len(body) + 40}\r\n\r\n".encode() + body)
            sock.shutdown(
                socket.SHUT_WR
            )  # the client stops early: the server sees the end of the stream
            status, _, out = parse(read_all(sock))
    assert status == 400 and "shorter than its Content-Length" in out["error"], out
    assert commits(st.root) == before and git_clean(st.root)


def test_a_stalled_body_times_out_and_nothing_is_committed(tmp_path):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    body = json.dumps({"text": "never finished"}).encode()
    with running(st.root, writable=True, timeout=0.5) as server:
        addr, port = server.server_address[:2]
        with socket.create_connection((addr, port), timeout=15) as sock:
            head = (
                f"POST /add HTTP/1.1\r\nHost: {addr}:{port}\r\nContent-Type: application/json\r\n"
            )
            sock.sendall(f"{head}Content-Length: {len(body) + 40}\r\n\r\n".encode() + body)
            t0 = time.monotonic()
            status, _, out = parse(read_all(sock))  # the connection stays open from this side
            waited = time.monotonic() - t0
    assert status == 408 and "did not arrive" in out["error"], out
    assert waited < 5
    assert commits(st.root) == before and git_clean(st.root)


def test_an_idle_connection_is_closed_after_the_timeout(root):
    with running(root, timeout=0.5) as server:
        with socket.create_connection(server.server_address[:2], timeout=15) as sock:
            sock.sendall(b"GET /stats HTTP/1.1\r\n")  # half a request, then nothing
            t0 = time.monotonic()
            assert read_all(sock) == b""
            assert time.monotonic() - t0 < 5


def test_idle_connections_do_not_pile_up_threads(root):
    """400 half-open connections used to hold 400 threads; now at most PENDING are held (each by
    its own thread), the ones past it are answered 503 at once, and a request after they are gone
    is served."""
    with running(
        root, timeout=5.0
    ) as server:  # long enough that no held one times out during the burst
        before = threading.active_count()
        socks = [
            socket.create_connection(server.server_address[:2], timeout=15) for _ in range(200)
        ]
        try:
            time.sleep(0.5)
            held = threading.active_count() - before
            assert held <= http.PENDING + 2, held
            busy = 0
            for s in socks[-50:]:  # accepted after the first PENDING: refused straight away
                s.settimeout(5)
                data = read_all(s)
                busy += data.startswith(b"HTTP/1.0 503")
            assert busy == 50
        finally:
            for s in socks:
                s.close()
        time.sleep(0.5)  # the held ones see their client gone
        t0 = time.monotonic()
        assert request(server, "GET", "/stats")[0] == 200
        assert time.monotonic() - t0 < 3


def test_connections_that_trickle_neither_stay_nor_keep_others_waiting(root):
    """A client that sends its request a byte at a time (each pause under the idle timeout) used
    to hold a thread for as long as it liked, and eight of them kept every other client waiting.
    Now each connection has its own thread, so others are answered at once, and a request that
    has not arrived whole `arrive` seconds after its connection was accepted is cut off."""
    with running(root, timeout=1.5, arrive=2.0) as server:
        socks = [socket.create_connection(server.server_address[:2], timeout=15) for _ in range(12)]
        try:
            for n in range(8):  # a byte each every 0.4 s (idle 1.5 s never ends it) for 3.2 s
                for s in socks:
                    try:
                        s.sendall(b"GET /stats HTTP/1.1\r\n"[n : n + 1])
                    except OSError:  # closed by the server: the deadline passed
                        pass
                if n == 1:
                    t0 = time.monotonic()
                    assert request(server, "GET", "/stats")[0] == 200
                    assert time.monotonic() - t0 < 1
                time.sleep(0.4)
            for i, s in enumerate(socks):  # closed at 2 s, unanswered: nothing left to wait for
                s.settimeout(0.5)
                try:
                    assert s.recv(1024) == b"", i
                except ConnectionResetError:
                    pass
        finally:
            for s in socks:
                s.close()


# ----- bounded values -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,path,body,message",
    [
        ("GET", "/search?query=x&k=1000000000000000000", None, "'k' must be from 1 to 1000"),
        ("GET", "/search?query=x&k=1001", None, "'k' must be from 1 to 1000"),
        ("GET", "/search?query=x&k=0", None, "'k' must be from 1 to 1000"),
        ("POST", "/search", {"query": "x", "k": 10**30}, "'k' must be from 1 to 1000"),
        ("GET", "/view/search?query=x&k=100000000000000000000", None, "'k' must be from 1 to 1000"),
        ("GET", "/recall?question=x&around=101", None, "'around' must be from 0 to 100"),
        ("GET", "/context?query=x&k=-5", None, "'k' must be from 1 to 1000"),
        (
            "GET",
            "/search?query=" + "a" * 10_001,
            None,
            "10,001 characters long; the limit is 10,000",
        ),
        ("POST", "/search", {"query": "budget " * 1500}, "the limit is 10,000"),
        (
            "POST",
            "/search",
            {"query": "x", "role": ["user"] * 1001},
            "1,001 entries; the limit is 1,000",
        ),
        ("POST", "/add", {"text": "t" * 100_001}, "the limit is 100,000"),
        ("POST", "/add", {"text": "a\ud800b"}, "lone UTF-16 surrogate"),
        ("POST", "/search", {"query": "\udc00"}, "lone UTF-16 surrogate"),
    ],
)
def test_values_over_their_bounds_are_refused_with_400(root, method, path, body, message):
    before = commits(root)
    with running(root, writable=True) as server:
        status, headers, out = request(server, method, path, body)
    assert status == 400 and message in out["error"], out
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert commits(root) == before


def test_the_bounds_themselves_are_accepted(root):
    with running(root) as server:
        status, headers, out = request(server, "GET", "/search?query=budget&k=1000")
        assert status == 200 and out["hits"], out
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert (
            request(server, "POST", "/search", {"query": "budget " + "x" * (limits.MAX_QUERY - 7)})[
                0
            ]
            == 200
        )


def test_a_9_mb_query_does_not_hold_up_other_clients(root):
    """One POST of a 9 MB query used to keep the store thread busy for 14-33 s; now it is refused
    before any store work, and another client is answered meanwhile."""
    with running(root) as server:
        addr, port = server.server_address[:2]
        big = json.dumps({"query": "budget " * (9 * 1024 * 1024 // 7)}).encode()
        results = {}

        def send_big():
            t0 = time.monotonic()
            with socket.create_connection((addr, port), timeout=30) as sock:
                head = f"POST /search HTTP/1.1\r\nHost: {addr}:{port}\r\nContent-Type: application/json\r\n"
                sock.sendall(f"{head}Content-Length: {len(big)}\r\n\r\n".encode())
                try:
                    sock.sendall(big)
                except OSError:
                    pass  # the server answered and closed before reading the body
                results["big"] = (parse(read_all(sock))[0], time.monotonic() - t0)

        t = threading.Thread(target=send_big)
        t.start()
        t0 = time.monotonic()
        assert request(server, "GET", "/stats")[0] == 200
        small = time.monotonic() - t0
        t.join(timeout=30)
        fits = json.dumps({"query": "budget " * 140_000}).encode()  # under 1 MiB, over MAX_QUERY
        t1 = time.monotonic()
        status, _, out = request(server, "POST", "/search", raw=fits, headers=_json_headers(fits))
        refused = time.monotonic() - t1
    assert results["big"][0] == 413 and results["big"][1] < 5, results
    assert status == 400 and "the limit is 10,000" in out["error"] and refused < 2, (
        status,
        refused,
    )
    assert small < 2


def _json_headers(data: bytes) -> dict:
    return {"Content-Type": "application/json", "Content-Length": str(len(data))}


# ----- writes that need a flag ------------------------------------------------------------------------------


def test_secrets_allow_needs_the_server_flag(tmp_path):
    st = make_store(tmp_path / "s")
    before = commits(st.root)
    text = f"deploy with {TOKEN} tonight"
    with running(st.root, writable=True) as server:
        status, _, out = request(server, "POST", "/add", {"text": text, "secrets": "allow"})
        assert (
            status == 403
            and "--allow-secrets-override" in out["error"]
            and TOKEN not in out["error"]
        ), out
        assert commits(st.root) == before
        status, _, out = request(server, "POST", "/add", {"text": text, "secrets": "redact"})
        assert status == 200 and out["added"] == 1, "redacting needs no flag"
    with running(st.root, writable=True, allow_secrets_override=True) as server:
        status, _, out = request(server, "POST", "/add", {"text": text, "secrets": "allow"})
        assert status == 200 and out["added"] == 1, out
    logs = "".join(p.read_text() for p in (st.root / "log").rglob("*.jsonl"))
    assert logs.count(TOKEN) == 1 and git_clean(st.root)


def test_a_wide_forget_needs_the_server_flag(tmp_path):
    st = make_store(tmp_path / "s")
    rows = [
        (f"2026-03-10T10:{i:02d}:00Z", "user", f"bulk note number {i}", "bulk") for i in range(12)
    ]
    write_turns(st, rows, fields=("ts", "role", "text", "session"))
    st.add("a note to forget", session="small", ts="2026-03-11T10:00:00Z")
    before = commits(st.root)
    with running(st.root, writable=True) as server:
        status, _, out = request(server, "POST", "/forget", {"since": "1970-01-01"})
        assert (
            status == 403 and "--allow-wide-forget" in out["error"] and "13 records" in out["error"]
        ), out
        status, _, out = request(server, "POST", "/forget", {"session": "bulk"})
        assert status == 403 and "12 records" in out["error"], out
        assert commits(st.root) == before, "nothing forgotten"
        status, _, out = request(
            server, "POST", "/forget", {"since": "1970-01-01", "dry_run": True}
        )
        assert status == 200 and len(out["forgotten"]) == 13 and out["commit"] is None, (
            "a dry run only lists"
        )
        status, _, out = request(server, "POST", "/forget", {"session": "small"})
        assert status == 200 and len(out["forgotten"]) == 1 and out["commit"], out
    with running(st.root, writable=True, allow_wide_forget=True) as server:
        status, _, out = request(server, "POST", "/forget", {"session": "bulk"})
        assert status == 200 and len(out["forgotten"]) == 12, out
    assert git_clean(st.root)
