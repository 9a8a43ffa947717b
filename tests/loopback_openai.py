"""A small real OpenAI-compatible HTTP server on 127.0.0.1, for tests that use the real `openai` client.

It serves POST /v1/embeddings (deterministic hashing-embedder vectors), POST /v1/chat/completions
(replies from a script the test sets, streamed or not) and GET /v1/models, and records every request.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

MAX_BODY = 8 * 1024 * 1024  # bounded: a runaway test cannot make the server buffer without limit
MAX_RECORDED = 10_000


class LoopbackOpenAI:
    """Start with `with LoopbackOpenAI() as server:`; point clients at `server.base_url`.

    `replies` is a list of strings (used in order) or a callable taking the request body and
    returning a string. `fail_next(status, times)` makes the next requests fail, e.g. 503 to test
    retries. `requests` holds (method, path, headers with lower-case names, body) for each request.
    """

    def __init__(self, replies=None, dim: int = 384, model: str = "loopback-chat"):
        self.replies = replies if replies is not None else []
        self.dim = dim
        self.model = model
        self.requests: list[tuple[str, str, dict, dict]] = []
        self._failures: list[int] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- what tests use ---

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def fail_next(self, status: int = 503, times: int = 1) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    def bodies(self, path: str) -> list[dict]:
        """JSON bodies of the requests received at `path` (e.g. "/v1/chat/completions")."""
        with self._lock:
            return [body for _, p, _, body in self.requests if p == path]

    def start(self) -> LoopbackOpenAI:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- what the handler calls ---

    def _record(self, method, path, headers, body) -> int | None:
        with self._lock:
            if len(self.requests) < MAX_RECORDED:
                self.requests.append((method, path, headers, body))
            return self._failures.pop(0) if self._failures else None

    def _embeddings(self, body: dict) -> dict:
        from memstore.adapters.hashing import HashEmbedder

        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(t, str) and t for t in inputs)
        ):
            raise _BadRequest("'input' must be a non-empty string or a list of non-empty strings")
        dim = int(body.get("dimensions") or self.dim)
        vecs = HashEmbedder(dim=dim).embed_batch(inputs)
        vecs[np.linalg.norm(vecs, axis=1) == 0, 0] = (
            1.0  # no words to hash: still a unit vector, as a model gives
        )
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode()
                if as_base64
                else v.tolist(),
            }
            for i, v in enumerate(vecs)
        ]
        tokens = sum(len(t.split()) for t in inputs)
        return {"object": "list", "data": data, "model": body.get("model", ""),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}  # fmt: skip

    def _reply(self, body: dict) -> str:
        with self._lock:
            if callable(self.replies):
                return str(self.replies(body))
            if not self.replies:
                raise _BadRequest("loopback server: the test's reply script is used up", status=500)
            return str(self.replies.pop(0))

    def _completion(self, body: dict, text: str) -> dict:
        return {
            "id": f"chatcmpl-loopback-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 1,
                "completion_tokens": max(1, len(text.split())),
                "total_tokens": 2,
            },
        }


class _BadRequest(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _handler_for(server: LoopbackOpenAI):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the openai client (httpx) expects
        timeout = 10  # seconds a connection may sit idle: no test hangs on a stuck client

        def log_message(self, *args):  # keep test output clean
            pass

        def do_GET(self):
            server._record("GET", self.path, _lower(self.headers), {})
            if self.path.rstrip("/") == "/v1/models":
                models = [{"id": m, "object": "model", "created": 0, "owned_by": "loopback"}
                          for m in ("text-embedding-3-small", server.model)]  # fmt: skip
                return self._json(200, {"object": "list", "data": models})
            self._json(404, _error(f"no route {self.path}"))

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self.close_connection = True
                return self._json(413, _error("request body too large"))
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                return self._json(400, _error("body is not JSON"))
            status = server._record("POST", self.path, _lower(self.headers), body)
            if status is not None:
                # retry-after-ms keeps the client's backoff (normally 0.5 s and up) short in tests
                return self._json(
                    status, _error(f"injected failure {status}"), {"retry-after-ms": "10"}
                )
            try:
                if self.path == "/v1/embeddings":
                    return self._json(200, server._embeddings(body))
                if self.path == "/v1/chat/completions":
                    text = server._reply(body)
                    if body.get("stream"):
                        return self._stream(body, text)
                    return self._json(200, server._completion(body, text))
            except _BadRequest as e:
                return self._json(e.status, _error(str(e)))
            self._json(404, _error(f"no route {self.path}"))

        def _json(self, status: int, payload: dict, headers: dict | None = None):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, body: dict, text: str):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")  # the end of the stream is the end of the body
            self.end_headers()
            self.close_connection = True
            base = {"id": "chatcmpl-loopback", "object": "chat.completion.chunk", "created": int(time.time()),
                    "model": body.get("model", server.model)}  # fmt: skip
            pieces = [{"role": "assistant", "content": ""}] + [
                {"content": w} for w in _pieces(text)
            ]
            for delta in pieces:
                chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())

    return Handler


def _pieces(text: str) -> list[str]:
    """Split text into word-sized deltas that join back to exactly the text."""
    out, word = [], ""
    for ch in text:
        word += ch
        if ch == " ":
            out.append(word)
            word = ""
    return out + [word] if word else out


def _lower(headers) -> dict:
    return {k.lower(): v for k, v in headers.items()}


def _error(message: str) -> dict:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    }
