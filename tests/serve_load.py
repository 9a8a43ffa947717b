"""A load test of `ct serve --tokens` on loopback: concurrent clients, each with its own token,
searching (and, for the write tokens, adding now and then) for a bounded count of requests;
reports the error count and the latency percentiles.

Used by tests/test_serve_load.py; alone it builds a store in a temporary folder and prints the
figures docs/serve.md quotes:

    python tests/serve_load.py --clients 20 --requests 50
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ct_server import ct_server

QUERIES = (
    "budget for the offsite",
    "venue in Lisbon",
    "flights and hotel",
    "what did we decide about the launch",
    "standup time",
    "cat knocked over a plant",
)
TOPICS = ("budget", "venue", "flights", "launch", "standup", "garden", "hiring", "release")


def fill(st, n: int = 300) -> None:
    """`n` turns over a few days in one commit, so searches have something to rank."""
    recs = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        recs.append(
            st.normalize(
                {
                    "ts": f"2026-03-{10 + i % 10:02d}T{8 + i % 12:02d}:{i % 60:02d}:00Z",
                    "role": "user" if i % 2 else "assistant",
                    "session": f"s{i % 7}",
                    "text": f"Note {i} about the {topic}: we talked over the {topic} plan, item {i}.",
                }
            )
        )
    st.write(recs, f"Add {n} turns for the load test")


def make_tokens(folder: Path, clients: int, writers: int) -> tuple[Path, list[tuple[str, bool]]]:
    """A tokens file (mode 600) with one token per client, the first `writers` of them write
    tokens, stored hashed; → (path, [(token, writes)])."""
    pairs = [(f"load-client-{i:03d}-{os.urandom(12).hex()}", i < writers) for i in range(clients)]
    path = folder / "tokens"
    path.write_text(
        "".join(
            f"sha256:{hashlib.sha256(t.encode()).hexdigest()} {'write' if w else 'read'}\n"
            for t, w in pairs
        )
    )
    path.chmod(0o600)
    return path, pairs


@contextmanager
def ct_serve(root, tokens_path, env=None):
    """`ct -q serve --writable --tokens FILE --port 0` in its own process; yields its base URL."""
    args = ["-q", "-C", root, "serve", "--port", "0", "--writable", "--tokens", tokens_path]
    with ct_server(args, env=env) as base:
        yield base


def _one(base: str, token: str, path: str, body: dict | None) -> tuple[int, float, str]:
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(base + path, data=data, headers=headers)
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            resp.read()
            status, why = resp.status, ""
    except urllib.error.HTTPError as exc:
        status, why = exc.code, exc.read().decode("utf-8", "replace")[:200]
    except OSError as exc:  # refused, reset, timed out: an error like any other
        status, why = 0, f"{type(exc).__name__}: {exc}"
    return status, time.perf_counter() - start, why


def load(base: str, pairs, requests: int, add_every: int = 10) -> dict:
    """Each client (token, writes) sends `requests` requests at once with the others: searches,
    and for a write client an add every `add_every`-th request. → the figures."""
    from urllib.parse import quote

    def client(i: int, token: str, writes: bool):
        out = []
        for n in range(requests):
            if writes and n % add_every == add_every - 1:
                body = {"text": f"load client {i} request {n}", "session": f"load-{i}"}
                out.append(("add", *_one(base, token, "/add", body)))
            else:
                q = QUERIES[(i + n) % len(QUERIES)]
                out.append(("search", *_one(base, token, f"/search?k=5&query={quote(q)}", None)))
        return out

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
        futures = [pool.submit(client, i, t, w) for i, (t, w) in enumerate(pairs)]
        results = [r for f in futures for r in f.result()]
    seconds = time.perf_counter() - start
    errors = [(kind, status, why) for kind, status, _, why in results if status != 200]

    def pct(values, p):
        values = sorted(values)
        return round(values[max(0, math.ceil(p / 100 * len(values)) - 1)] * 1000, 1)

    lat = [s for _, _, s, _ in results]
    searches = [s for kind, _, s, _ in results if kind == "search"]
    adds = [s for kind, _, s, _ in results if kind == "add"]
    return {
        "clients": len(pairs),
        "requests": len(results),
        "searches": len(searches),
        "adds": len(adds),
        "errors": len(errors),
        "first_errors": errors[:5],
        "seconds": round(seconds, 2),
        "per_second": round(len(results) / seconds, 1),
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "search_p50_ms": pct(searches, 50),
        "search_p99_ms": pct(searches, 99),
        **({"add_p50_ms": pct(adds, 50), "add_p99_ms": pct(adds, 99)} if adds else {}),
    }


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--requests", type=int, default=50, help="requests per client")
    ap.add_argument("--writers", type=int, default=4, help="clients with a write token")
    ap.add_argument("--add-every", type=int, default=10)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from memstore.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache"), "TZ": "UTC"}
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parent.parent), env.get("PYTHONPATH")) if p
        )
        os.environ.update({"XDG_CACHE_HOME": env["XDG_CACHE_HOME"]})
        st = Store.init(tmp / "s", embedder="hash", timezone="UTC")
        fill(st)
        path, pairs = make_tokens(tmp, args.clients, args.writers)
        with ct_serve(st.root, path, env) as base:
            figures = load(base, pairs, args.requests, args.add_every)
        print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
