"""Time the topic tree's op log at scale: cold replay, cached read, and one write, for N placed records.

Usage: python scripts/bench_tree_ops.py [N]   (default 100000; prints CPU seconds, which a busy
machine distorts less than wall time). The log is what N single-record `ct add`s leave: per write a
`place`, a `set` of last_active and a `current`, with a new topic every 40 records, over N/1000 days.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

from memstore.format import tree as treefmt
from memstore.format import treelog


def iso(us: int) -> str:
    return dt.datetime.fromtimestamp(us / 1e6, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def build(root: Path, n: int) -> int:
    t0, tid, lines = 1_780_000_000_000_000, None, 0
    for day in range((n + 999) // 1000):
        out = []
        for i in range(day * 1000, min(n, day * 1000 + 1000)):
            at = t0 + i * 1000
            ops = []
            if i % 40 == 0:
                tid = f"t{i:012x}"
                ops.append(
                    {
                        "op": "topic",
                        "topic": tid,
                        "name": f"topic {i}",
                        "summary": "s" * 120,
                        "parent": None,
                        "created": iso(at),
                        "last_active": iso(at),
                        "named_by": "offline",
                    }
                )
            ops += [
                {"op": "place", "topic": tid, "records": [f"01rec{i:020d}"]},
                {"op": "set", "topic": tid, "last_active": iso(at)},
                {"op": "current", "topic": tid},
            ]
            out += [treelog.dumps({"at": iso(at + k), **op}) for k, op in enumerate(ops)]
        path = treelog.shard_path(root, (dt.date(2026, 1, 1) + dt.timedelta(days=day)).isoformat())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(out) + "\n")
        lines += len(out)
    return lines


def timed(label: str, fn):
    start = time.process_time()
    value = fn()
    print(f"{label:44} {time.process_time() - start:8.3f} s")
    return value


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    root = Path(tempfile.mkdtemp(prefix="tree-ops-"))
    (root / ".memstore").mkdir()
    lines = build(root, n)
    size = sum(p.stat().st_size for p in treelog.shards(root))
    print(
        f"{n} records, {lines} op lines in {len(treelog.shards(root))} shards, {size / 1e6:.1f} MB"
    )
    ops = timed("parse every line", lambda: treelog.read_ops(root)[0])
    timed("apply (replay)", lambda: treelog.replay(ops))
    tree = timed("read, cold (replay and fill the cache)", lambda: treefmt.read(root))
    tree = timed("read, cached", lambda: treefmt.read(root))
    tree.topics[tree.current].records.append("01new")
    timed("write one placement (a whole tree given)", lambda: treefmt.write(root, tree))
    timed("read after that write (cache kept)", lambda: treefmt.read(root))
    part, base = timed(
        "read for a write, in part (as ct add)", lambda: treefmt.read_for_write(root, lazy=True)
    )
    part.topics[part.current].records.append("01new2")
    timed("write one placement (tree read in part)", lambda: treefmt.write(root, part, base=base))
    timed("read after that write (cache kept)", lambda: treefmt.read(root))
    print(f"cache: {(root / '.memstore' / treefmt.CACHE).stat().st_size / 1e6:.1f} MB in {root}")


if __name__ == "__main__":
    main()
