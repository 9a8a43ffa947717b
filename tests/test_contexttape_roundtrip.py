"""The ContextTape round trip against the REAL contexttape from PyPI (default suite).

`make install` creates `.bench/ctvenv` (scripts/ct_venv.sh; its own venv because contexttape also
installs a `ct` command); the fixture runs the same script, which returns at once when it is there.
ContextTape's side runs in that venv through tests/contexttape_side.py (contexttape + numpy only).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ct, git_clean, write_turns

REPO = Path(__file__).resolve().parent.parent
CT_VENV = Path(os.environ.get("CT_VENV", REPO / ".bench" / "ctvenv"))
SIDE = Path(__file__).resolve().parent / "contexttape_side.py"

TURNS = [
    "Let's cap the trip budget at 2,400 euros.",
    "Flights to Lisbon cost 400 euros for two.",
    "The flat in Alfama is booked for five nights.",
    "Tram 28 crosses the old town; go early.",
    "Remind me to water the ficus on Fridays.",
    "The ficus lost leaves after the move.",
    "Release happens on Thursdays after the full test run.",
    "A failing test blocks the release.",
    "The household budget is 1,650 euros a month.",
    "Groceries go up to 420 euros in December.",
    "Book the night train; tickets open on Friday.",
    "Pack the charger and the passports.",
    "The dentist appointment moved to the 14th.",
    "Insurance for the car is 555 a year now.",
    "Marathon training: long run on Sunday mornings.",
    "Yoga on Tuesday evenings at the studio.",
]
QUERIES = [
    "trip budget euros",
    "ficus water",
    "release tests Thursday",
    "night train tickets",
    "car insurance",
    "running on Sunday",
    "old town tram",
    "household groceries",
]


@pytest.fixture(scope="module")
def ct_python():
    subprocess.run(
        ["bash", str(REPO / "scripts" / "ct_venv.sh")],
        check=True,
        env={**os.environ, "CT_VENV": str(CT_VENV)},
    )
    return CT_VENV / "bin" / "python"


def side(ct_python, job: dict) -> dict:
    proc = subprocess.run(
        [str(ct_python), str(SIDE)], input=json.dumps(job), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def search_ids(root, queries, k, tmp_path) -> list[list[dict]]:
    """`ct search --mode vector` for every query in one process (--queries: JSON lines out)."""
    qfile = tmp_path / "queries.txt"
    qfile.write_text("\n".join(queries) + "\n")
    out = ct("-C", root, "search", "--mode", "vector", "-k", k, "--queries", qfile).stdout
    return [json.loads(line)["hits"] for line in out.splitlines()]


def _store(tmp_path, dtype):
    from memstore.ingest.path import ingest_path
    from memstore.store import Store

    st = Store.init(tmp_path / f"store-{dtype}", embedder="hash", timezone="UTC", dtype=dtype)
    rows = [
        (
            f"2026-11-{20 + i // 6:02d}T{8 + i % 6:02d}:00:00Z",
            "user" if i % 2 == 0 else "assistant",
            t,
            "s",
        )
        for i, t in enumerate(TURNS)
    ]
    write_turns(st, rows[:10], fields=("ts", "role", "text", "session"))
    write_turns(st, rows[10:], fields=("ts", "role", "text", "session"))
    docs = tmp_path / f"docs-{dtype}"
    docs.mkdir()
    (docs / "checklist.md").write_text(
        "# Lisbon checklist\n\nPassports, flight confirmation, the flat booking.\n"
    )
    ingest_path(st, docs)
    # a superseded record stays out of both searches
    (docs / "checklist.md").write_text(
        "# Lisbon checklist\n\nPassports and the night train tickets.\n"
    )
    ingest_path(st, docs)
    return st


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_export_opens_in_contexttape_with_the_same_top_hits(tmp_path, ct_python, dtype):
    st = _store(tmp_path, dtype)
    out = tmp_path / "tape"
    res = json.loads(ct("-C", st.root, "export", "contexttape", out, "--json").stdout)
    assert (
        res["skipped"] == 0 and res["pairs"] == len(TURNS) + 2
    )  # the turns, the live chunk, the meta record
    assert sorted(p.name for p in out.iterdir())[:2] == ["memstore-export.json", "segment_0.is"]
    tid_to_id = {
        tid: rid for tid, rid in json.loads((out / "memstore-export.json").read_text())["pairs"]
    }

    qvecs = [st.embedder.embed_query(q).tolist() for q in QUERIES]
    got = side(ct_python, {"search": str(out), "queries": qvecs, "k": 5})
    assert got["pairs"] == res["pairs"]
    for q, hits, ours_iss, ours_ms in zip(
        QUERIES, search_ids(st.root, QUERIES, 5, tmp_path), got["isstore"], got["multistore"]
    ):
        mine = [h["id"] for h in hits]
        assert len(mine) == 5
        assert [tid_to_id[t] for t in ours_iss] == mine, q
        assert [tid_to_id[t] for t in ours_ms] == mine, q
    assert git_clean(st.root)

    again = ct("-C", st.root, "export", "contexttape", out, check=False)
    assert again.returncode == 2 and "not an empty folder" in again.stderr


def test_import_of_a_store_written_by_contexttape_itself(tmp_path, ct_python, store):
    texts = [
        "Photosynthesis turns light into chemical energy.",
        "user: remind me to water the ficus on Fridays",
        "assistant: the ficus needs water on Fridays",
        "Mitochondria are the powerhouse of the cell.",
    ]
    vecs = store.embedder.embed_batch(texts, "passage")
    tape = tmp_path / "tape"
    made = side(
        ct_python,
        {
            "write": str(tape),
            "items": [[t, v.tolist(), i == 3] for i, (t, v) in enumerate(zip(texts, vecs))],
        },
    )
    assert made["pairs"] == [[0, 1], [2, 3], [4, 5], [6, 7]]

    model = store.config.embedder["model"]
    res = json.loads(
        ct("-C", store.root, "import", "contexttape", tape, "--model", model, "--json").stdout
    )
    assert res["added"] == 4 and res["notes"] == []
    assert git_clean(store.root)
    for text, hits in zip(texts, search_ids(store.root, texts, 1, tmp_path)):
        assert hits[0]["text"] == text
    roles = sorted(
        json.loads(line)["role"]
        for p in (store.root / "log").rglob("*.jsonl")
        for line in p.read_text().splitlines()
    )
    assert roles == ["assistant", "system", "system", "user"]
    # ContextTape's float32 vectors come in as they were written
    from memstore.store import Store

    st = Store.open(store.root)
    idx = st.index()
    row = idx.conn.execute("SELECT vrow FROM records WHERE id = ?", (res["ids"][0],)).fetchone()[0]
    assert row >= 0 and np.isfinite(vecs[0]).all()
