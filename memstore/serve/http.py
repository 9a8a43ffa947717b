"""`ct serve`: one store's memory as a small HTTP JSON API on localhost (search, recall, add, context, where,
stats) and a web page to look at it (search, timeline, topic tree, history).

Each API endpoint calls the same `Store` method as the `ct` command of the same name and answers
with its `to_json()` shape; `/openapi.json` describes them all. Read endpoints take GET query
parameters or a POST JSON body; `add` is POST only and answers only when the server was started
writable. The page is plain files shipped in `memstore/serve/web/`, served from `/` (to a browser) and
`/assets/`; it reads the `/view/...` endpoints (memstore/serve/web/views.py), which mask secrets. All
store work runs on one dedicated thread, because the index's SQLite connection belongs to the
thread that opened it; connections are read by a bounded pool of threads, each with a timeout.

Safety: without `tokens` the API has no authentication, so it binds only to loopback (127.0.0.0/8,
::1); a non-loopback bind needs tokens (memstore/serve/tokens.py: every request but the page's own
files then carries `Authorization: Bearer TOKEN`, and only a write token may write), `allow_remote`
and the host names clients will use (`allowed_hosts`). Each caller (its token, or its address
without tokens) gets a bounded rate of requests (limits.RateLimit; over it: 429). On
every bind it refuses requests whose Host header is neither a loopback name nor an allowed host
(a web page cannot reach it through DNS rebinding), whose Origin is not the server's own, that a
browser marks cross-site, and POST bodies that are not `application/json` (a browser cannot send
those cross-site without a CORS preflight, which is never granted). Values are bounded, and
writes that could do lasting harm need a flag given at start (memstore/serve/limits.py).
"""

from __future__ import annotations

import io
import ipaddress
import json
import math
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from ..errors import LockTimeout, MemstoreError, NotPermitted, SecretsFound, UsageError
from . import limits

MAX_BODY = 1024 * 1024  # 1 MiB: room for the longest text limits.py accepts, JSON-escaped
TIMEOUT = 10.0  # seconds a connection may sit between bytes before it is closed
ARRIVE = 30.0  # seconds a request (line, headers and body) has to arrive whole, however it trickles
PENDING = 64  # connections held at once, each read and answered by its own thread; more get a 503
WORKERS = PENDING  # (a connection that trickles holds only its own thread, never another's turn)
JSON_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class Param:
    """One endpoint parameter: its name, JSON type ("string", "integer", "boolean", "array"), default, help."""

    name: str
    type: str
    help: str
    required: bool = False
    default: object = None


@dataclass(frozen=True)
class Endpoint:
    """A route: which methods it answers, its parameters, and the Store call behind it."""

    path: str
    summary: str
    methods: tuple
    params: tuple = field(default_factory=tuple)
    call: object = None  # (store, params dict, Permissions) -> JSON-able dict
    writes: bool = False  # answered only by a server started with writable=True


@dataclass(frozen=True)
class Permissions:
    """What the user let callers do when starting the server (the flags of `ct serve`)."""

    secrets_override: bool = False  # /add may store a detected secret verbatim (secrets "allow")
    wide_forget: bool = False  # /forget may remove more than limits.MAX_FORGET records at once
    share: bool = False  # /share may make private records shared (else only its dry run)
    send_secrets: bool = False  # answers keep what the secret scanner flags (else masked)


def _search(st, p, perms):
    hits = st.search(
        p["query"],
        k=p["k"],
        mode=p["mode"],
        since=p["since"],
        until=p["until"],
        role=p["role"] or None,
        actor=p["actor"] or None,
        type=p["type"] or None,
        session=p["session"] or None,
        author=p["author"] or None,
        now=p["now"],
        scope=p["scope"],
    )
    return {"query": p["query"], "hits": [h.to_json() for h in hits]}


def _add(st, p, perms):
    limits.check_secrets(p["secrets"], perms.secrets_override, "ct serve")
    return st.add(
        p["text"],
        role=p["role"],
        actor=p["actor"],
        session=p["session"],
        ts=p["ts"],
        type=p["type"],
        model=p["model"],
        secrets=p["secrets"],
        scope=p["scope"],
    ).to_json()


def _view(name):
    """The page's data function `name` from memstore/serve/web/views.py, imported on first use."""

    def call(st, p, perms):
        from .web import views

        return getattr(views, name)(st, p)

    return call


_READ = ("GET", "POST")
_PAGE = ("GET",)
VIEW_ENDPOINTS = (
    Endpoint(
        "/view/overview",
        "For the page: the store's name, timezone, today, totals, records per day, every marker.",
        _PAGE,
        (),
        _view("overview"),
    ),
    Endpoint(
        "/view/search",
        "For the page: search hits with days and score parts, secrets masked.",
        _PAGE,
        (
            Param("query", "string", "What to look for.", required=True),
            Param("k", "integer", "How many hits.", default=20),
            Param("mode", "string", "hybrid | exact | vector.", default="hybrid"),
            Param("since", "string", "Only records at or after this time (ISO or a phrase)."),
            Param("until", "string", "Only records before this time (ISO or a phrase)."),
            Param("role", "array", "Only these roles."),
            Param("session", "array", "Only these sessions."),
            Param("now", "string", "Reference time for phrases (ISO)."),
        ),
        _view("search"),
    ),
    Endpoint(
        "/view/day",
        "For the page: one day's records verbatim in time order (masked, titled), its markers.",
        _PAGE,
        (Param("day", "string", "The day, YYYY-MM-DD.", required=True),),
        _view("day"),
    ),
    Endpoint(
        "/view/tree",
        "For the page: the topic tree, and topics that left it (merged, archived).",
        _PAGE,
        (),
        _view("tree"),
    ),
    Endpoint(
        "/view/topic",
        "For the page: a page of one topic's records (or all under it) in time order.",
        _PAGE,
        (
            Param("id", "string", "The topic id.", required=True),
            Param("offset", "integer", "Records to skip.", default=0),
            Param("limit", "integer", "Records to return at most.", default=200),
            Param(
                "under",
                "boolean",
                "Also the records of every topic under it (sub-topics, groups), in time order.",
                default=False,
            ),
        ),
        _view("topic"),
    ),
    Endpoint(
        "/view/private",
        "For the page: your private records (masked) and the secrets flagged in each, to review before sharing.",
        _PAGE,
        (),
        _view("private"),
    ),
    Endpoint(
        "/view/history",
        "For the page: the store's git log as memory history, newest first.",
        _PAGE,
        (Param("n", "integer", "Commits at most (up to 500).", default=200),),
        _view("history"),
    ),
    Endpoint(
        "/view/commit",
        "For the page: one commit's topic changes (as `ct diff REV^ REV`) and the tree before and after it.",
        _PAGE,
        (Param("rev", "string", "A commit id.", required=True),),
        _view("commit"),
    ),
)
ENDPOINTS = {
    e.path: e
    for e in (
        Endpoint(
            "/search",
            "Search memory by words and meaning (hybrid, exact or vector).",
            _READ,
            (
                Param("query", "string", "What to look for.", required=True),
                Param("k", "integer", "How many hits.", default=10),
                Param("mode", "string", "hybrid | exact | vector.", default="hybrid"),
                Param(
                    "since",
                    "string",
                    "Only records at or after this time (ISO or a phrase such as 'last week').",
                ),
                Param("until", "string", "Only records before this time (ISO or a phrase)."),
                Param("role", "array", "Only these roles (user, assistant, system, tool)."),
                Param("actor", "array", "Only these actors."),
                Param("type", "array", "Only these record types (text, action, meta, doc)."),
                Param("session", "array", "Only these sessions."),
                Param(
                    "author",
                    "array",
                    "Only records put into memory by these people: a name or an email, any case.",
                ),
                Param("now", "string", "Reference time for phrases in since/until (ISO)."),
                Param("scope", "string", "Only private or only shared records: private | shared."),
            ),
            _search,
        ),
        Endpoint(
            "/recall",
            "Verbatim lines for a question with a time phrase, in time order.",
            _READ,
            (
                Param(
                    "question",
                    "string",
                    "A question, e.g. 'what did we decide yesterday about the budget'.",
                    required=True,
                ),
                Param("k", "integer", "How many ranked lines at most.", default=10),
                Param(
                    "now",
                    "string",
                    "Reference time for relative phrases (ISO; naive means the store's timezone).",
                ),
                Param(
                    "around",
                    "integer",
                    "Neighbouring lines of the same session to add to each hit.",
                    default=0,
                ),
                Param("docs", "boolean", "Let document chunks into the answer.", default=False),
                Param(
                    "author",
                    "array",
                    "Only records put into memory by these people: a name or an email, any case.",
                ),
            ),
            lambda st, p, perms: st.recall(
                p["question"],
                k=p["k"],
                now=p["now"],
                around=p["around"],
                docs=p["docs"],
                author=p["author"] or None,
            ).to_json(),
        ),
        Endpoint(
            "/add",
            "Remember one turn or fact verbatim (one git commit).",
            ("POST",),
            (
                Param("text", "string", "The text, stored verbatim.", required=True),
                Param("role", "string", "user | assistant | system | tool.", default="user"),
                Param("actor", "string", "Who said it (default: the role)."),
                Param("session", "string", "Conversation or session name."),
                Param("ts", "string", "When it was said (ISO; default: now)."),
                Param("type", "string", "text | action | meta.", default="text"),
                Param("model", "string", "The model that produced it (assistant turns)."),
                Param(
                    "secrets",
                    "string",
                    "What to do with a detected secret: refuse | redact | allow.",
                    default="refuse",
                ),
                Param(
                    "scope",
                    "string",
                    "private (the store's user only) | shared (default: the store's setting).",
                ),
            ),
            _add,
            writes=True,
        ),
        Endpoint(
            "/share",
            "Make private records shared (one commit); dry_run shows each text and its flagged secrets.",
            ("POST",),
            (
                Param("ids", "array", "Ids of the private records to share.", required=True),
                Param("dry_run", "boolean", "Only show what would be shared.", default=False),
            ),
            lambda st, p, perms: limits.bounded_share(
                st, perms.share, perms.secrets_override, "ct serve", p["ids"], dry_run=p["dry_run"]
            ).to_json(),
            writes=True,
        ),
        Endpoint(
            "/forget",
            "Forget records: their text leaves every committed file (one commit, tombstones kept).",
            ("POST",),
            (
                Param("ids", "array", "Record ids to forget."),
                Param("match", "string", "Records whose text holds every word of this."),
                Param("session", "string", "Every record of this session."),
                Param("since", "string", "From this time (ISO or a phrase)."),
                Param("until", "string", "Up to this time."),
                Param(
                    "commit",
                    "string",
                    "Every record this commit added (an import or a write to undo).",
                ),
                Param("dry_run", "boolean", "Only list what would be forgotten.", default=False),
            ),
            lambda st, p, perms: limits.bounded_forget(
                st,
                perms.wide_forget,
                "ct serve",
                p["ids"] or (),
                match=p["match"],
                session=p["session"],
                since=p["since"],
                until=p["until"],
                commit=p["commit"],
                dry_run=p["dry_run"],
            ).to_json(),
            writes=True,
        ),
        Endpoint(
            "/context",
            "Prompt context for a query within a token budget.",
            _READ,
            (
                Param("query", "string", "What the prompt is about.", required=True),
                Param("budget", "integer", "Token budget (default: the store's setting)."),
                Param("k", "integer", "Recalled lines to consider.", default=8),
                Param("recent", "integer", "Recent turns to include.", default=6),
            ),
            lambda st, p, perms: st.context(
                p["query"], budget=p["budget"], k=p["k"], recent=p["recent"]
            ).to_json(),
        ),
        Endpoint(
            "/where",
            "Where the work stands: open markers and the latest session's last lines.",
            _READ,
            (
                Param("markers", "integer", "Open markers to show at most.", default=10),
                Param("lines", "integer", "Last lines of the latest session.", default=8),
            ),
            lambda st, p, perms: st.where(markers=p["markers"], lines=p["lines"]).to_json(),
        ),
        Endpoint(
            "/stats",
            "Counts: records, days, sessions, segments, bytes.",
            _READ,
            (),
            lambda st, p, perms: st.stat().to_json(),
        ),
        *VIEW_ENDPOINTS,
    )
}


@dataclass(frozen=True)
class Page:
    """A non-JSON answer: the page or one of its files, with its content type."""

    body: bytes
    content_type: str


# The page loads nothing from anywhere but this server, and nothing may frame it.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
ASSET_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


def load_assets() -> dict[str, Page]:
    """The page's files shipped in memstore/serve/web/, by name."""
    from importlib.resources import files

    out = {}
    for f in files("memstore.serve.web").iterdir():
        ctype = ASSET_TYPES.get(Path(f.name).suffix)
        if ctype and f.is_file():
            out[f.name] = Page(f.read_bytes(), ctype)
    return out


def wants_html(headers) -> bool:
    """A browser navigating to / asks for text/html; programs (curl, urllib) do not."""
    return "text/html" in (headers.get("Accept") or "")


class HTTPError(Exception):
    """An error answer: status code and message (sent as {"error": message, "status": code})."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class _GivenTwice(ValueError):
    pass


def _once(pairs: list) -> dict:
    """A JSON object's members, refusing a name given twice (json.loads would keep the last)."""
    out = {}
    for name, value in pairs:
        if name in out:
            raise _GivenTwice(name)
        out[name] = value
    return out


def parse_json(body: bytes):
    """The JSON value of a request body; HTTPError 400 naming what is wrong when it is not one
    (a member given twice too: which one counts must not depend on the parser)."""
    try:
        return json.loads(body.decode("utf-8"), object_pairs_hook=_once)
    except _GivenTwice as exc:
        raise HTTPError(400, f"parameter {exc.args[0]!r} given twice; it takes one value") from None
    except UnicodeDecodeError as exc:
        raise HTTPError(400, f"body is not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise HTTPError(
            400, f"body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except (ValueError, RecursionError):
        raise HTTPError(400, "body is not JSON this server reads (nested too deep)") from None


def parse_params(ep: Endpoint, raw: dict, from_query: bool) -> dict:
    """Checked parameters with defaults filled in; HTTPError 400 naming the first bad one."""
    known = {p.name: p for p in ep.params}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        expected = ", ".join(known) or "none"
        raise HTTPError(
            400, f"unknown parameter {unknown[0]!r} for {ep.path}; expected: {expected}"
        )
    out = {}
    for p in ep.params:
        if p.name not in raw or raw[p.name] is None:
            if p.required:
                raise HTTPError(400, f"{ep.path} needs the parameter {p.name!r} ({p.type})")
            out[p.name] = [] if p.type == "array" and p.default is None else p.default
            continue
        out[p.name] = _coerce(p, raw[p.name], from_query)
        if (why := limits.problem(p.name, out[p.name])) is not None:
            raise HTTPError(400, why)
    return out


def _coerce(p: Param, v, from_query: bool):
    if from_query:  # parse_qs gives a list of strings for every name
        if p.type == "array":
            return list(v)
        if len(v) > 1:
            raise HTTPError(400, f"parameter {p.name!r} given {len(v)} times; it takes one value")
        v = v[0]
        if p.type == "integer":
            try:
                return int(v)
            except ValueError:
                raise HTTPError(
                    400, f"parameter {p.name!r} must be an integer, not {v!r}"
                ) from None
        if p.type == "boolean":
            if v.lower() in ("1", "true", "yes", "on"):
                return True
            if v.lower() in ("0", "false", "no", "off", ""):
                return False
            raise HTTPError(400, f"parameter {p.name!r} must be true or false, not {v!r}")
        return v
    ok = {
        "string": lambda x: isinstance(x, str),
        "integer": lambda x: isinstance(x, int) and not isinstance(x, bool),
        "boolean": lambda x: isinstance(x, bool),
        "array": lambda x: (
            isinstance(x, str) or (isinstance(x, list) and all(isinstance(i, str) for i in x))
        ),
    }
    if not ok[p.type](v):
        want = "a string or a list of strings" if p.type == "array" else f"a JSON {p.type}"
        raise HTTPError(400, f"parameter {p.name!r} must be {want}, not {json.dumps(v)[:80]}")
    return [v] if p.type == "array" and isinstance(v, str) else v


def status_for(exc: MemstoreError) -> int:
    """The HTTP status for a library error: the caller's fault is 4xx, the store's state is 5xx."""
    if isinstance(exc, NotPermitted):
        return 403
    if isinstance(exc, UsageError):
        return 400
    if isinstance(exc, SecretsFound):
        return 422
    if isinstance(exc, LockTimeout):
        return 503
    return 500


def openapi(version: str) -> dict:
    """The OpenAPI 3.1 description of ENDPOINTS."""
    error = {"$ref": "#/components/schemas/Error"}
    paths = {}
    for ep in ENDPOINTS.values():
        ops = {}
        errors = {
            "400": {
                "description": "Bad request: the message names the parameter or the body problem.",
                "content": {"application/json": {"schema": error}},
            },
            "500": {
                "description": "The store could not answer.",
                "content": {"application/json": {"schema": error}},
            },
            "401": {
                "description": "The server has tokens (--tokens) and the request's bearer token is "
                "missing or unknown.",
                "content": {"application/json": {"schema": error}},
            },
            "429": {
                "description": "The caller is over its rate (--rate); Retry-After says when to retry.",
                "content": {"application/json": {"schema": error}},
            },
        }
        if ep.writes:
            errors["403"] = {
                "description": "The server is read-only (started without --writable), or the write needs a flag "
                "it was not started with (--allow-secrets-override, --allow-wide-forget); the message names it.",
                "content": {"application/json": {"schema": error}},
            }
        ok = {
            "200": {
                "description": "The result, as `ct ... --json` prints it.",
                "content": {"application/json": {"schema": {"type": "object"}}},
            }
        }
        props = {p.name: _schema(p) for p in ep.params}
        required = [p.name for p in ep.params if p.required]
        if "GET" in ep.methods:
            ops["get"] = {
                "summary": ep.summary,
                "operationId": ep.path.strip("/"),
                "parameters": [
                    {
                        "name": p.name,
                        "in": "query",
                        "required": p.required,
                        "description": p.help,
                        "schema": _schema(p),
                        **({"explode": True} if p.type == "array" else {}),
                    }
                    for p in ep.params
                ],
                "responses": {**ok, **errors},
            }
        if "POST" in ep.methods:
            body = {"type": "object", "properties": props, "additionalProperties": False}
            if required:
                body["required"] = required
            ops["post"] = {
                "summary": ep.summary,
                "operationId": ep.path.strip("/") + ("_post" if "GET" in ep.methods else ""),
                "requestBody": {
                    "required": bool(required),
                    "content": {"application/json": {"schema": body}},
                },
                "responses": {**ok, **errors},
            }
        paths[ep.path] = ops
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "memstore",
            "version": version,
            "description": "A git-native memory store: search, recall, add, context, where, stats.",
        },
        "paths": paths,
        # a bearer token when the server was started with --tokens; none otherwise
        "security": [{}, {"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "status"],
                    "properties": {"error": {"type": "string"}, "status": {"type": "integer"}},
                }
            },
        },
    }


def _schema(p: Param) -> dict:
    s = {"type": p.type, "description": p.help}
    if p.type == "array":
        s["items"] = {"type": "string"}
    if p.default is not None:
        s["default"] = p.default
    return s


class _Arriving(io.RawIOBase):
    """A connection's incoming bytes, for the request being read: each read waits at most
    `pause` seconds and none goes on past `deadline` (time.monotonic()). A per-read timeout
    alone lets a client that sends a byte every few seconds hold its thread for ever."""

    def __init__(self, sock, pause: float, deadline: float):
        self.sock, self.pause, self.deadline = sock, pause, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive whole in time")
        self.sock.settimeout(min(self.pause, left))
        return self.sock.recv_into(buf)


class _Handler(BaseHTTPRequestHandler):
    server_version = "memstore"
    app: "App"  # set on the subclass made per server
    arrive = ARRIVE  # seconds the request has to arrive whole (line, headers, body)

    def setup(self):
        super().setup()
        arriving = _Arriving(self.connection, self.timeout, time.monotonic() + self.arrive)
        self.rfile.close()  # (the socket's own file: closing it leaves the socket open)
        self.rfile = io.BufferedReader(arriving)

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_DELETE(self):
        self._handle("DELETE")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_OPTIONS(self):  # a CORS preflight gets a JSON 405 and no Access-Control-Allow-* headers
        self._handle("OPTIONS")

    def _handle(self, method: str):
        try:
            status, body = (
                200,
                self.app.answer(
                    method, self.path, self.headers, self._body, client=self.client_address[0]
                ),
            )
            headers = {}
        except HTTPError as exc:
            status, body, headers = (
                exc.status,
                {"error": exc.message, "status": exc.status},
                exc.headers,
            )
        self.connection.settimeout(self.timeout)  # the answer is not held to the request's deadline
        if isinstance(body, Page):
            data, ctype, headers = body.body, body.content_type, {**PAGE_HEADERS, **headers}
        else:
            data, ctype = (
                json.dumps(body, ensure_ascii=False).encode("utf-8"),
                "application/json; charset=utf-8",
            )
            headers = {**JSON_HEADERS, **headers}
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding"):
            raise HTTPError(
                411, "send the body with a Content-Length (chunked bodies are not read)"
            )
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise HTTPError(400, "Content-Length is not a number") from None
        if n > MAX_BODY:
            raise HTTPError(413, f"body of {n} bytes is over the {MAX_BODY}-byte limit")
        if n <= 0:
            return b""
        try:
            data = self.rfile.read(n)
        except TimeoutError:
            self.close_connection = True
            raise HTTPError(
                408,
                f"the body did not arrive in time (a pause over {self.timeout:g} s, or over "
                f"{self.arrive:g} s for the whole request; Content-Length {n})",
            ) from None
        if len(data) < n:  # the client stopped early: a cut-off body must never be acted on
            self.close_connection = True
            raise HTTPError(
                400, f"body is {len(data)} bytes, shorter than its Content-Length of {n}"
            )
        return data

    def log_message(self, fmt, *args):
        if self.app.log:
            who = getattr(self.app.caller, "name", "")
            sys.stderr.write(f"{self.address_string()} {f'({who}) ' if who else ''}{fmt % args}\n")


def host_name(host: str) -> str:
    """The name in a Host header or an --allowed-host value: no port, no brackets, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    return host.rstrip(".")


def is_loopback_name(name: str) -> bool:
    """localhost, any address in 127.0.0.0/8, or ::1."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_origin(headers, allowed_hosts=frozenset()) -> None:
    """403 unless the request names this server (Host) and comes from no other web origin."""
    host = (headers.get("Host") or "").strip()
    name = host_name(host)
    if not (is_loopback_name(name) or name in allowed_hosts):
        also = f" or {', '.join(sorted(allowed_hosts))}" if allowed_hosts else ""
        raise HTTPError(
            403,
            f"Host {host!r} is not a loopback name{also}; this server answers only the names it serves",
        )
    origin = headers.get("Origin")
    if origin is not None and origin.strip().lower() not in (
        f"http://{host.lower()}",
        f"https://{host.lower()}",
    ):
        raise HTTPError(403, f"requests from the web origin {origin!r} are not allowed")
    site = (headers.get("Sec-Fetch-Site") or "").strip().lower()
    if site in ("cross-site", "same-site"):
        raise HTTPError(
            403, f"the browser marks this request {site}; only this server's own page may ask"
        )


class App:
    """Routes requests to ENDPOINTS and runs the store calls on one worker thread."""

    def __init__(
        self,
        root: Path,
        allow_remote: bool = False,
        log: bool = True,
        writable: bool = False,
        allowed_hosts=(),
        perms: Permissions = Permissions(),
        tokens=None,
        rate: float = limits.RATE,
    ):
        from .. import __version__

        self.root, self.allow_remote, self.log, self.version = (
            Path(root),
            allow_remote,
            log,
            __version__,
        )
        self.writable, self.perms = writable, perms
        self.allowed_hosts = frozenset(host_name(h) for h in allowed_hosts)
        self.tokens = tokens  # memstore.serve.tokens.Tokens, or None: no authentication
        self.caller = threading.local()  # .name: the token of the request this thread answers
        self.rate = limits.RateLimit(rate)
        self.assets = load_assets()
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memstore-serve")
        self._store = None

    def _st(self):
        if self._store is None:
            from ..store import Store

            self._store = Store.open(self.root)
        return self._store

    def answer(self, method: str, target: str, headers, read_body, client: str = "") -> dict | Page:
        """The JSON answer (or the page, or one of its files) for one request, or HTTPError."""
        self.caller.name = ""
        self._check_origin(headers)
        url = urlsplit(target)
        path = url.path.rstrip("/") or "/"
        grant = self._check_token(method, path, headers, client)
        if path == "/openapi.json" or path == "/" or path.startswith("/assets/"):
            if method != "GET":
                raise HTTPError(405, f"{path} answers GET only", {"Allow": "GET"})
            if path == "/":
                if wants_html(headers):
                    return self.assets["index.html"]
                return {
                    "name": "memstore",
                    "version": self.version,
                    "store": str(self.root),
                    "endpoints": sorted(ENDPOINTS),
                    "openapi": "/openapi.json",
                    "page": "/",
                    "writable": self.writable,
                }
            if path.startswith("/assets/"):
                asset = self.assets.get(path[len("/assets/") :])
                if asset is None:
                    raise HTTPError(
                        404,
                        f"no file {path}; the page's files are {', '.join(sorted(self.assets))}",
                    )
                return asset
            return openapi(self.version)
        ep = ENDPOINTS.get(path)
        if ep is None:
            raise HTTPError(
                404,
                f"no endpoint {path}; see /openapi.json (endpoints: {', '.join(sorted(ENDPOINTS))})",
            )
        if method not in ep.methods:
            raise HTTPError(
                405,
                f"{path} answers {' and '.join(ep.methods)}, not {method}",
                {"Allow": ", ".join(ep.methods)},
            )
        if ep.writes and not self.writable:
            raise HTTPError(
                403,
                f'this server is read-only, so {path} does not write; start it with "ct serve --writable" to allow it',
            )
        if ep.writes and grant is not None and not grant.writes:
            raise HTTPError(
                403,
                f"{path} writes, and this request's token may only read (its line in the tokens "
                "file says 'read'); use a write token",
            )
        if method == "POST":
            raw, from_query = self._json_body(headers, read_body()), False
            if url.query:
                raise HTTPError(400, "give POST parameters in the JSON body, not the query string")
        else:
            raw, from_query = parse_qs(url.query, keep_blank_values=True), True
        params = parse_params(ep, raw, from_query)
        return self._call(ep, params)

    def _check_token(self, method: str, path: str, headers, client: str):
        """The grant of the request's bearer token (None on a server without tokens); HTTPError
        401 without a token or with a wrong one, 429 when its caller is over the rate. The page
        and its files (no memory in them) are served without a token: the page asks for one."""
        if self.tokens is not None:
            page = path.startswith("/assets/") or (path == "/" and wants_html(headers))
            if page and method == "GET":
                return None
        grant = checked_caller(self.tokens, self.rate, headers.get("Authorization"), client)
        if grant is not None:
            self.caller.name = grant.name  # the request log says which token wrote what
        return grant

    def _check_origin(self, headers) -> None:
        check_origin(headers, self.allowed_hosts)

    @staticmethod
    def _json_body(headers, body: bytes) -> dict:
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if body and ctype != "application/json":
            raise HTTPError(
                415, f"send the body as application/json, not {ctype or 'no Content-Type'}"
            )
        if not body.strip():
            return {}
        raw = parse_json(body)
        if not isinstance(raw, dict):
            raise HTTPError(
                400,
                f"body must be a JSON object, not {type(raw).__name__ if raw is not None else 'null'}",
            )
        return raw

    def _call(self, ep: Endpoint, params: dict) -> dict:
        from ..secrets.policy import user_message  # every message masked for secrets

        names = [p.name for p in ep.params]

        def said(exc) -> str:  # the library's message, naming this endpoint's parameters
            return limits.in_parameters(user_message(exc), names)

        def run():
            try:
                out = ep.call(self._st(), params, self.perms)
                if self.perms.send_secrets or not isinstance(out, dict):
                    return out
                from .web.mask import mask_fields  # as ct chat masks what it sends an LLM

                return mask_fields(out)
            except MemstoreError as exc:
                raise HTTPError(status_for(exc), said(exc)) from None
            except (
                ValueError
            ) as exc:  # bad values the library rejects (a malformed time, an empty query)
                raise HTTPError(400, said(exc)) from None

        try:
            return self.pool.submit(run).result()
        except HTTPError:
            raise
        except (
            Exception
        ) as exc:  # a bug: say so in JSON, keep serving, and leave a trace for the operator
            import traceback

            traceback.print_exc(file=sys.stderr)
            raise HTTPError(500, f"internal error: {type(exc).__name__}: {exc}") from None

    def close(self) -> None:
        self.pool.shutdown(wait=True)  # let a write in progress finish its commit


BEARER = 'Bearer realm="memstore"'


def checked_caller(tokens, rate, authorization: str | None, client: str):
    """The grant of the request's bearer token (None on a server without `tokens`), once its
    caller (the token; without one, or with a wrong one, the address) is within `rate`
    (limits.RateLimit): HTTPError 401 for a missing or wrong token, 429 over the rate. A wrong
    token counts against its address, so guesses are as bounded as any other request."""
    grant = None
    if tokens is not None:
        try:
            grant = check_bearer(tokens, authorization)
        except HTTPError:
            _within(rate, f"address {client}")
            raise
    _within(rate, grant.name if grant is not None else f"address {client}")
    return grant


def _within(rate, caller: str) -> None:
    wait = rate.take(caller)
    if wait is not None:
        raise HTTPError(
            429,
            f"too many requests: this server answers {rate.rate:g} a second per caller "
            f"(bursts of {rate.burst}); try again in {wait:.2f} s",
            {"Retry-After": str(max(1, math.ceil(wait)))},
        )


def check_bearer(tokens, authorization: str | None):
    """The grant of the `Authorization: Bearer TOKEN` header among `tokens`; HTTPError 401 (with
    `WWW-Authenticate: Bearer`) when it is missing, not a bearer token, or no token of the file."""
    if not authorization:
        raise HTTPError(
            401,
            "this server needs a token: send the header 'Authorization: Bearer TOKEN' "
            "(the user who started it can make one with: ct tokens new)",
            {"WWW-Authenticate": BEARER},
        )
    scheme, _, presented = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not presented.strip():
        raise HTTPError(
            401,
            f"the Authorization header must be 'Bearer TOKEN', not a {scheme[:20]!r} one",
            {"WWW-Authenticate": BEARER},
        )
    grant = tokens.find(presented.strip())
    if grant is None:
        raise HTTPError(
            401,
            "the bearer token is not one this server knows",
            {"WWW-Authenticate": f'{BEARER}, error="invalid_token"'},
        )
    return grant


def bind_address(
    host: str, port: int, allow_remote: bool, allowed_hosts=(), tokens: bool = False
) -> tuple[int, tuple]:
    """(address family, socket address) for host:port; UsageError for a non-loopback host without
    `tokens` (authentication), without allow_remote, or without the host names its clients will
    use (`allowed_hosts`)."""
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise UsageError(f"cannot resolve --host {host!r}: {exc.strerror}") from None
    family, _, _, _, sockaddr = infos[0]
    for info in infos:
        addr = ipaddress.ip_address(info[4][0].split("%")[0])
        if addr.is_loopback:
            continue
        if not tokens:
            raise UsageError(
                f"refusing to serve on {host or '*'} ({addr}) without tokens: it is not a loopback "
                "address, and without them anyone who can reach it could read all of memory",
                "Make a token with 'ct tokens new' and pass its file with --tokens FILE, or use "
                "--host 127.0.0.1.",
            )
        if not allow_remote:
            raise UsageError(
                f"refusing to serve on {host or '*'} ({addr}): not a loopback address, and the "
                "API would answer other machines",
                "Use --host 127.0.0.1, or pass --allow-remote to serve other machines anyway.",
            )
        if not allowed_hosts:
            raise UsageError(
                f"serving on {host or '*'} ({addr}) needs the names clients will reach it by: requests "
                "naming any other host are refused, so a web page cannot reach it through DNS rebinding",
                "Add --allowed-host NAME (repeat it for each name or address, e.g. --allowed-host "
                "memory.lan --allowed-host 192.168.1.20).",
            )
    return family, sockaddr


_BUSY = json.dumps(
    {"error": "the server is busy (too many open connections); try again", "status": 503}
).encode()


class _Server(HTTPServer):
    """An HTTP server whose connections are answered by a bounded pool of threads.

    At most `pending` connections are held at once (in work or queued for a thread); one more is
    answered 503 at once and closed, so idle or half-open connections cannot pile up threads.
    """

    request_queue_size = (
        128  # the listen backlog: a burst of connects is accepted, then bounded here
    )

    def __init__(self, family, addr, handler, workers: int = WORKERS, pending: int = PENDING):
        self.address_family = family
        super().__init__(addr, handler)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memstore-http")
        self._slots = threading.BoundedSemaphore(max(pending, workers))

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self._refuse_busy(request)
            return
        try:
            self._pool.submit(self._work, request, client_address)
        except RuntimeError:  # the pool is shut down: the server is closing
            self._slots.release()
            self.shutdown_request(request)

    def _work(self, request, client_address):
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self._slots.release()

    def _refuse_busy(self, request):
        head = (
            "HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"X-Content-Type-Options: nosniff\r\nRetry-After: 1\r\nContent-Length: {len(_BUSY)}\r\n"
            "Connection: close\r\n\r\n"
        )
        try:
            request.settimeout(1.0)
            request.sendall(head.encode() + _BUSY)
        except OSError:
            pass
        finally:
            self.shutdown_request(request)

    def server_close(self):
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def make_server(
    root,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_remote: bool = False,
    log: bool = True,
    writable: bool = False,
    *,
    allowed_hosts=(),
    allow_secrets_override: bool = False,
    allow_wide_forget: bool = False,
    allow_share: bool = False,
    send_secrets: bool = False,
    timeout: float = TIMEOUT,
    arrive: float = ARRIVE,
    workers: int = WORKERS,
    pending: int = PENDING,
    tokens=None,
    rate: float = limits.RATE,
) -> HTTPServer:
    """A bound, not yet serving, HTTP server for the store at `root` (`server.app` holds the App).

    Read-only unless `writable`: then /add and /forget may commit to the store, /add storing a
    detected secret verbatim only with `allow_secrets_override`, /forget removing more than
    limits.MAX_FORGET records only with `allow_wide_forget`, /share sharing only with
    `allow_share` (see limits.bounded_share). A non-loopback `host` needs
    `tokens` (memstore.serve.tokens.Tokens), `allow_remote` and `allowed_hosts`; with tokens every
    request but the page's files needs one. Each caller may send `rate` requests a second (0: no
    limit); a connection idle for `timeout` seconds is closed, and one whose request has not
    arrived whole `arrive` seconds after it was accepted.
    """
    family, addr = bind_address(host, port, allow_remote, allowed_hosts, tokens=tokens is not None)
    perms = Permissions(
        secrets_override=allow_secrets_override,
        wide_forget=allow_wide_forget,
        share=allow_share,
        send_secrets=send_secrets,
    )
    app = App(
        root,
        allow_remote=allow_remote,
        log=log,
        writable=writable,
        allowed_hosts=allowed_hosts,
        perms=perms,
        tokens=tokens,
        rate=rate,
    )
    handler = type("Handler", (_Handler,), {"app": app, "timeout": timeout, "arrive": arrive})
    try:
        server = _Server(family, addr, handler, workers=workers, pending=pending)
    except OSError as exc:
        app.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    server.app = app
    return server


def url_of(server) -> str:
    host, port = server.server_address[:2]
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def serve(server, ready=None) -> None:
    """Serve until SIGINT or SIGTERM; a write in progress finishes before the process exits.

    `ready()` runs once the signals are handled here, so a caller that announces the address in
    it can be stopped cleanly the moment it has read that line.
    """
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt

    # SIGINT too, explicitly: a process started with SIGINT ignored (a background job of a
    # script, a supervisor) would otherwise keep Python from ever raising KeyboardInterrupt
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if ready is not None:
            ready()
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.server_close()
        server.app.close()
