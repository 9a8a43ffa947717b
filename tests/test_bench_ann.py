"""The optional IVF-vs-HNSW benchmark (memstore/bench/ann_vs_hnsw.py, `make bench-ann`).

The end-to-end run needs chromadb, which lives in its own venv (.bench/chromavenv, created by
scripts/chroma_venv.sh from PyPI on first use), so it is marked slow.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from memstore.bench import ann_vs_hnsw


def test_recall_counts_shared_ids_per_query():
    truth = np.array([list(range(10)), list(range(10, 20))])
    found = [list(range(10)), list(range(15, 25))]
    assert ann_vs_hnsw.recall(found, truth) == pytest.approx(0.75)


@pytest.mark.slow
def test_small_run_end_to_end(tmp_path, capsys, monkeypatch):
    from memstore.index import ann

    monkeypatch.setattr(ann, "IVF_MIN_ROWS", 1000)  # the store's call takes the IVF path here
    out = tmp_path / "r.json"
    assert (
        ann_vs_hnsw.main(
            [
                "--n",
                "4000",
                "--queries",
                "40",
                "--block",
                "10",
                "--target",
                "0.9999",
                "--base",
                str(ann_vs_hnsw.ROOT / ".bench"),
                "--json",
                str(out),
            ]
        )
        == 0
    )
    r = json.loads(out.read_text())
    rows = {x["name"]: x for x in r["rows"]}
    assert rows["memstore exact scan (numpy float32)"]["recall10"] == 1.0
    ivf = [x for n, x in rows.items() if n.startswith("memstore IVF")]
    assert [x["recall10"] for x in ivf] == sorted(x["recall10"] for x in ivf)
    # The store's own call finds what the same functions find without its SQL.
    calls = [x for n, x in rows.items() if n.startswith("memstore vector_candidates ivf")]
    assert [x["recall10"] for x in calls] == [x["recall10"] for x in ivf] and len(ivf) == 4
    chroma = [x for n, x in rows.items() if n.startswith("chromadb HNSW")]
    assert chroma and all(x["samples"] == 40 and x["p50_ms"] > 0 for x in chroma)
    # The last ef_search tried (raised, served by a fresh child) recalls at least the default's.
    cal = list(r["ef_calibration"].values())
    assert cal[-1] >= cal[0]
    assert "| configuration | recall@10 |" in capsys.readouterr().out
