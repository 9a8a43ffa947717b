"""What encryption costs: ct add, a 10k-turn import, warm search and bytes per record, encrypted
against plaintext, on the hash embedder (docs/security.md quotes the ratios).

    python scripts/bench_encrypt.py [--turns 10000] [--adds 20] [--searches 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

WORDS = (
    "budget plan trip garden cake party river mountain code review deploy bug test meeting "
    "coffee train ticket hotel museum dinner recipe invoice report draft design sprint goal "
    "release tomorrow yesterday weekend morning evening kitchen window paint bicycle library"
).split()


def turns_file(path: Path, n: int) -> None:
    rng = random.Random(7)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            day, sec = divmod(i, 200)
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
            f.write(
                json.dumps(
                    {
                        "ts": f"2026-10-{1 + day % 28:02d}T{8 + sec // 60 % 12:02d}:{sec % 60:02d}:00Z",
                        "role": "user" if i % 2 == 0 else "assistant",
                        "session": f"s{day}",
                        "text": f"turn {i}: {text}",
                    }
                )
                + "\n"
            )


def committed_bytes(root: Path) -> int:
    total = 0
    for top in ("log", "tree", "packs", "markers.jsonl"):
        p = root / top
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def measure(base: Path, encrypt: bool, src: Path, turns: int, adds: int, searches: int) -> dict:
    from memstore.store import Store

    root = base / ("enc" if encrypt else "plain")
    base.mkdir(parents=True, exist_ok=True)
    st = Store.init(root, embedder="hash", timezone="UTC", encrypt=encrypt)
    t0 = time.perf_counter()
    res = st.import_("jsonl", src)
    imp = time.perf_counter() - t0
    st.index()
    times = []
    for i in range(adds):
        t0 = time.perf_counter()
        st.add(f"note {i}: the {WORDS[i % len(WORDS)]} is ready", ts=f"2026-11-01T09:{i:02d}:00Z")
        times.append(time.perf_counter() - t0)
    st = Store.open(root)
    st.search("budget meeting tomorrow")  # warm: index and caches
    qs = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(searches)]
    stimes = []
    for q in qs:
        t0 = time.perf_counter()
        st.search(q, k=10)
        stimes.append(time.perf_counter() - t0)
    n = turns + adds
    return {
        "import_s": imp,
        "imported": getattr(res, "added", None),
        "add_ms": statistics.median(times) * 1000,
        "search_ms": statistics.median(stimes) * 1000,
        "bytes_per_record": committed_bytes(root) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--adds", type=int, default=20)
    ap.add_argument("--searches", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["XDG_CONFIG_HOME"] = str(base / "config")
        os.environ["MEMSTORE_EMBED_CACHE"] = str(base / "cache.sqlite")
        from memstore.store import Store

        Store.new_identity()  # the default identity, in the temporary config folder
        src = base / "turns.jsonl"
        turns_file(src, args.turns)
        warm = base / "warm.jsonl"
        turns_file(warm, 50)
        for kind in ("plaintext", "encrypted"):  # first use of each path: imports, caches
            measure(base / f"warm-{kind}", kind == "encrypted", warm, 50, 2, 2)
        out = {
            kind: measure(base, kind == "encrypted", src, args.turns, args.adds, args.searches)
            for kind in ("plaintext", "encrypted")
        }
    p, e = out["plaintext"], out["encrypted"]
    print(f"{'':22}{'plaintext':>12}{'encrypted':>12}{'ratio':>8}")
    for key, label in (
        ("add_ms", "ct add (ms, median)"),
        ("import_s", f"import {args.turns} (s)"),
        ("search_ms", "warm search (ms)"),
        ("bytes_per_record", "bytes per record"),
    ):
        print(f"{label:22}{p[key]:12.2f}{e[key]:12.2f}{e[key] / p[key]:8.2f}")


if __name__ == "__main__":
    main()
