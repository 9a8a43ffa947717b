"""What encryption costs: Store.add (what `ct add` runs), a 10k-turn JSONL import, warm search and
committed bytes per record, encrypted against plaintext, on the hash embedder; then the time of
`ct encrypt --rewrite-history` of the plaintext store. Times are CPU
seconds of the process and its git children (wall time on a shared machine measures the load).

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


def cpu() -> float:
    """CPU seconds of this process and its finished children (git): on a shared machine wall
    time mostly measures the neighbours."""
    import resource

    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def build(base: Path, encrypt: bool, src: Path) -> tuple:
    from memstore.store import Store

    base.mkdir(parents=True, exist_ok=True)
    root = base / ("enc" if encrypt else "plain")
    st = Store.init(root, embedder="hash", timezone="UTC", encrypt=encrypt)
    t0, w0 = cpu(), time.perf_counter()
    st.import_("jsonl", src)
    took = (cpu() - t0, time.perf_counter() - w0)
    st.index()
    return root, took


def measure(base: Path, src: Path, turns: int, adds: int, searches: int) -> dict:
    """Both stores side by side; adds and searches interleaved, so both meet the same load."""
    from memstore.store import Store

    out = {}
    for kind in ("plaintext", "encrypted"):
        root, (imp_cpu, imp_wall) = build(base, kind == "encrypted", src)
        out[kind] = {"root": root, "import_cpu_s": imp_cpu, "import_wall_s": imp_wall}
    stores = {k: Store.open(v["root"]) for k, v in out.items()}
    add = {k: [] for k in out}
    for i in range(adds):
        for k, st in stores.items():
            t0 = cpu()
            st.add(
                f"note {i}: the {WORDS[i % len(WORDS)]} is ready", ts=f"2026-11-01T09:{i:02d}:00Z"
            )
            add[k].append(cpu() - t0)
    stores = {k: Store.open(v["root"]) for k, v in out.items()}
    for st in stores.values():
        st.search("budget meeting tomorrow")  # warm: index and caches
    qs = [" ".join(random.Random(i).sample(WORDS, 3)) for i in range(searches)]
    found = {k: [] for k in out}
    for q in qs:
        for k, st in stores.items():
            t0 = cpu()
            st.search(q, k=10)
            found[k].append(cpu() - t0)
    for k in out:
        out[k]["add_cpu_ms"] = statistics.median(add[k]) * 1000
        out[k]["search_cpu_ms"] = statistics.median(found[k]) * 1000
        out[k]["bytes_per_record"] = committed_bytes(out[k]["root"]) / (turns + adds)
    # Last: `ct encrypt --rewrite-history` of the plaintext store (the import and every add: one
    # commit each), the history rewrite's git-filter-repo process included in the CPU time.
    st = Store.open(out["plaintext"]["root"])
    t0, w0 = cpu(), time.perf_counter()
    st.encrypt(rewrite_history=True)
    out["encrypt_rewrite"] = (cpu() - t0, time.perf_counter() - w0, 2 + adds)
    return out


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
        measure(base / "warm", warm, 50, 2, 2)  # first use of each path: imports, caches
        out = measure(base / "run", src, args.turns, args.adds, args.searches)
    p, e = out["plaintext"], out["encrypted"]
    print(f"{'':22}{'plaintext':>12}{'encrypted':>12}{'ratio':>8}")
    for key, label in (
        ("add_cpu_ms", "add, CPU ms (median)"),
        ("import_cpu_s", f"import {args.turns}, CPU s"),
        ("import_wall_s", f"import {args.turns}, wall s"),
        ("search_cpu_ms", "warm search, CPU ms"),
        ("bytes_per_record", "bytes per record"),
    ):
        print(f"{label:22}{p[key]:12.2f}{e[key]:12.2f}{e[key] / p[key]:8.2f}")
    c, w, commits = out["encrypt_rewrite"]
    print(
        f"ct encrypt --rewrite-history of the plaintext store ({args.turns + args.adds} records, "
        f"{commits} commits): {c:.2f} CPU s, {w:.2f} wall s"
    )


if __name__ == "__main__":
    main()
