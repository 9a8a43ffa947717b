"""Times a load of the web page `ct serve` shows: the requests a browser makes to open it, server side.

A page load is the page, its two files, the overview (totals, per-day counts, markers) and the last
day's lines (the timeline opens on it). They are fetched one after another from a real server on loopback, so
the figure is an upper bound on the server's work (a browser fetches the files in parallel).
Run alone: `python -m memstore.bench.web --store PATH`; `page_load_timing` adds the row to `make bench`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import urllib.request

BUDGET_S = 0.300  # product budget: a page load on the 100k-record store, server side
BUDGET_AT = 100_000


def _get(base: str, path: str, accept: str = "application/json") -> bytes:
    req = urllib.request.Request(base + path, headers={"Accept": accept})
    with urllib.request.urlopen(req, timeout=60) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}")
        return resp.read()


def load_once(base: str) -> tuple[float, dict]:
    """Seconds for one page load, and seconds per request."""
    parts = {}
    t0 = time.perf_counter()
    for path, accept in (
        ("/", "text/html"),
        ("/assets/app.css", "text/css"),
        ("/assets/app.js", "*/*"),
        ("/view/overview", None),
    ):
        t = time.perf_counter()
        body = _get(base, path, accept or "application/json")
        parts[path] = time.perf_counter() - t
        if path == "/view/overview":
            days = json.loads(body)["days"]
    if days:
        t = time.perf_counter()
        _get(base, f"/view/day?day={days[-1]['day']}")
        parts["/view/day"] = time.perf_counter() - t
    return time.perf_counter() - t0, parts


def page_load(root, loads: int = 10) -> dict:
    """Serve the store at `root` on a free loopback port and time `loads` page loads after a first one.

    Returns seconds: `first` (a fresh server: opening the store and its index), `p50`, `max`, `cpu`
    (process CPU time per load, server and client together), and the median of each request in `parts`.
    """
    from ..serve.http import make_server, url_of

    server = make_server(root, port=0, log=False)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        base = url_of(server)
        first, _ = load_once(base)
        cpu0 = time.process_time()
        runs = [load_once(base) for _ in range(loads)]
        cpu = (
            time.process_time() - cpu0
        ) / loads  # server and client threads; steadier than wall time when busy
    finally:
        server.shutdown()
        server.server_close()
        server.app.close()
        thread.join(timeout=5)
    totals = [t for t, _ in runs]
    parts = {p: statistics.median(r[1][p] for r in runs) for p in runs[0][1]}
    return {
        "first": first,
        "p50": statistics.median(totals),
        "max": max(totals),
        "cpu": cpu,
        "loads": loads,
        "parts": parts,
    }


def page_load_timing(b, store, n: int) -> dict:
    """Add the page-load row to a speed benchmark `b` (memstore.bench.speed.Bench) for the store of `n` records."""
    res = page_load(store.root)
    worst = max(res["parts"], key=res["parts"].get)
    budget, ok = (
        (f"≤ {BUDGET_S * 1000:.0f} ms @100k", res["p50"] <= BUDGET_S)
        if n >= BUDGET_AT
        else ("", None)
    )
    b.add(
        "web page load (`ct serve`: page, files, overview with per-day counts, last day; server side, sequential)",
        f"{n:,}",
        f"{res['p50'] * 1000:.1f} ms",
        ratio=f"max {res['max'] * 1000:.1f} ms of {res['loads']}; CPU {res['cpu'] * 1000:.1f} ms per load; "
        f"first load {res['first'] * 1000:.0f} ms; "
        f"slowest request {worst} {res['parts'][worst] * 1000:.1f} ms",
        budget=budget,
        ok=ok,
    )
    b.raw.setdefault("web", {})[n] = res
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m memstore.bench.web", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--store", required=True, help="The store to serve.")
    ap.add_argument("--loads", type=int, default=10)
    args = ap.parse_args(argv)
    res = page_load(args.store, loads=args.loads)
    print(
        json.dumps(
            {
                k: (round(v * 1000, 2) if isinstance(v, float) else v)
                for k, v in res.items()
                if k != "parts"
            }
            | {"parts_ms": {k: round(v * 1000, 2) for k, v in res["parts"].items()}},
            indent=1,
        )
    )
    return 0 if res["p50"] <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
