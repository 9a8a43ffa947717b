"""Checks that ContextTape's own ISStore reads every memstore writer folder as the day logs say.

Two halves in one file. Run with memstore's Python, it builds small stores (float32 and int8
vectors) through the real write path — or takes `--store PATH` — works out from the day logs which
text/vector pairs each writer folder must hold, then runs this same file with ContextTape's Python
(`--ct-side`, which imports only contexttape and numpy) to list what ISStore actually sees, and
compares: same pairs, equal texts, vectors equal to 1e-6 after dequantisation, and each record's
own vector finds its own text first. Exit 0 when all agree, 1 with one line per difference.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CT_PYTHON = REPO / ".bench" / "ctvenv" / "bin" / "python"
TOL = 1e-6

# Texts with the shapes that break naive readers: multi-byte UTF-8, CJK, emoji, quotes, newlines.
TEXTS = [
    ("2026-11-23T09:15:00Z", "user", "Let's cap the trip budget at 2,400 euros."),
    ("2026-11-23T09:15:40Z", "assistant", "Noted: budget capped at 2,400 € for the Lisbon trip."),
    ("2026-11-23T21:02:00Z", "user", "先週の火曜日に話した予算の件、覚えてる？"),
    ("2026-11-24T07:30:00Z", "user", "Remind me to book the \"night train\" — tickets open Friday.\nAlso: pack the charger 🔌."),
    ("2026-11-24T07:31:10Z", "assistant", "I'll remind you Friday morning about the night-train tickets."),
    ("2026-11-24T18:45:00Z", "tool", '{"calendar": "added", "when": "2026-11-28T08:00"}'),
    ("2026-11-24T23:59:59Z", "user", "Über-long line " + "lorem ipsum " * 200),
]


# ----- ContextTape side (contexttape + numpy only) ----------------------------------------------


def ct_side(folders: list[str]) -> dict:
    import numpy as np
    from contexttape import ISStore

    out = {}
    for folder in folders:
        st = ISStore(folder)
        pairs = st.list_pairs()
        entries = []
        for tid, eid in pairs:
            vec = st.read_vector(eid)
            hits = st.search_by_vector(np.asarray(vec, np.float32), top_k=1)
            entries.append({"tid": tid, "eid": eid, "text": st.read_text(tid),
                            "vec": [float(x) for x in vec], "top": hits[0][1] if hits else None})
        out[folder] = {"pairs": entries, "stat": st.stat()}
    return out


# ----- memstore side ---------------------------------------------------------------------------------


def build_stores(base: Path) -> list[Path]:
    """Two small stores written through Store.write: float32 and int8 vectors, two days each."""
    from memstore.store import Store

    roots = []
    for dtype in ("float32", "int8"):
        store = Store.init(base / f"store-{dtype}", embedder="hash", timezone="UTC", dtype=dtype)
        recs = [store.normalize({"ts": ts, "role": role, "text": text, "session": "compat"})
                for ts, role, text in TEXTS]
        store.write(recs[:4], "Add compat turns (part 1)")
        store.write(recs[4:], "Add compat turns (part 2)")  # a second write appends to an existing shard
        roots.append(store.root)
    return roots


def expected_pairs(root: Path, reembed: bool) -> tuple[dict[str, dict], list[str]]:
    """{shard folder: {(tid, vid): (text, vector)}} from the day logs, read by memstore's own code."""
    import numpy as np

    from memstore.format import log as logfmt
    from memstore.format.segment import decode_vector, read_segment, segment_name
    from memstore.store import Store

    store = Store.open(root, search_parents=False)
    problems: list[str] = []
    shards: dict[str, dict] = {}
    pending = []
    for day, path in logfmt.list_days(store.root).items():
        for ln in logfmt.read_lines(path):
            if ln.record is None:
                problems.append(f"{path}:{ln.line_no}: {ln.error}")
                continue
            seg = ln.record.get("seg")
            if not isinstance(seg, dict):
                continue
            folder = str(store.root / seg["shard"])
            header, payload = read_segment(Path(folder) / segment_name(int(seg["vec"])))
            vec = decode_vector(header, payload)
            shards.setdefault(folder, {})[(int(seg["text"]), int(seg["vec"]))] = (ln.record["text"], vec)
            pending.append((ln.record["text"], vec, header.scale, f"{seg['shard']}/{segment_name(int(seg['vec']))}"))
    if reembed and pending:
        # The stored vector must be what the store's embedder gives for the text (int8: within half a step).
        fresh = store.embedder.embed_batch([t for t, _, _, _ in pending])
        dtype = store.config.setting("vector_dtype")
        for (text, vec, scale, where), f in zip(pending, fresh):
            tol = TOL if dtype == "float32" else scale / 2 + TOL
            err = float(np.max(np.abs(vec - f)))
            if err > tol:
                problems.append(f"{where}: stored vector differs from the embedder's by {err:.3g} (> {tol:.3g})")
    return shards, problems


def compare(expected: dict[str, dict], seen: dict, root: Path) -> list[str]:
    import numpy as np

    problems = []
    for folder, want in sorted(expected.items()):
        rel = os.path.relpath(folder, root)
        got = {(e["tid"], e["eid"]): e for e in seen[folder]["pairs"]}
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        if missing:
            problems.append(f"{rel}: ContextTape does not list pairs {missing} that the day logs name")
        if extra:
            problems.append(f"{rel}: ContextTape lists pairs {extra} that no day-log record names")
        for key in sorted(set(want) & set(got)):
            text, vec = want[key]
            e = got[key]
            name = f"{rel}/segment_{key[0]}.is"
            if e["text"] != text:
                problems.append(f"{name}: ContextTape reads text {e['text'][:60]!r}, the log says {text[:60]!r}")
            ct_vec = np.asarray(e["vec"], np.float32)
            if ct_vec.shape != vec.shape:
                problems.append(f"{rel}/segment_{key[1]}.is: ContextTape reads {ct_vec.shape[0]} dims, memstore {vec.shape[0]}")
            elif float(np.max(np.abs(ct_vec - vec))) > TOL:
                problems.append(f"{rel}/segment_{key[1]}.is: vectors differ by {float(np.max(np.abs(ct_vec - vec))):.3g}")
            if e["top"] != key[0]:
                problems.append(f"{name}: ContextTape's search_by_vector with the record's own vector returns text "
                                f"segment {e['top']} first, not {key[0]}")
    return problems


def check(roots: list[Path], ct_python: Path, reembed: bool) -> int:
    failures = 0
    for root in roots:
        expected, problems = expected_pairs(root, reembed)
        if not expected:
            problems.append("no record in the day logs references a segment")
        proc = subprocess.run([str(ct_python), __file__, "--ct-side", *sorted(expected)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"compat: FAIL {root}: ContextTape could not read the store:\n{proc.stderr.strip()[-2000:]}", file=sys.stderr)
            failures += 1
            continue
        problems += compare(expected, json.loads(proc.stdout), root)
        n_pairs = sum(len(v) for v in expected.values())
        if problems:
            failures += 1
            print(f"compat: FAIL {root} ({len(problems)} problem(s)):", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
        else:
            print(f"compat: ok {root.name}: ContextTape's ISStore lists the same {n_pairs} text/vector pairs "
                  f"in {len(expected)} writer folder(s) as the day logs (texts equal, vectors within {TOL:g})")
    return 1 if failures else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", action="append", type=Path, help="Check this store (repeatable) instead of building two.")
    ap.add_argument("--ct-python", type=Path, default=Path(os.environ.get("CT_PYTHON", DEFAULT_CT_PYTHON)),
                    help="The Python of the virtualenv that holds contexttape.")
    ap.add_argument("--reembed", action="store_true",
                    help="Also check each stored vector against a fresh embedding of its text (always on for built stores).")
    ap.add_argument("--ct-side", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ct_side is not None:
        json.dump(ct_side(args.ct_side), sys.stdout)
        return 0
    if not args.ct_python.exists():
        print(f"compat: {args.ct_python} does not exist; run scripts/ct_venv.sh first", file=sys.stderr)
        return 2
    if args.store:
        return check([p.resolve() for p in args.store], args.ct_python, args.reembed)
    with tempfile.TemporaryDirectory(prefix="memstore-compat-") as tmp:
        return check(build_stores(Path(tmp)), args.ct_python, reembed=True)


if __name__ == "__main__":
    sys.exit(main())
