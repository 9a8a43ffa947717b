"""A tiny run of the speed benchmark, so the harness (and `ct bench`) cannot silently rot."""

from __future__ import annotations

import json

import numpy as np

from conftest import ct, git_clean


def test_synthetic_store_is_a_valid_store_and_cached(tmp_path):
    from memstore.bench import synth

    store, info = synth.build_store(tmp_path, 120, per_day=40, log=lambda m: None)
    assert info["n"] == 120 and info["days"] == 3
    assert git_clean(store.root)
    assert ct("-C", store.root, "fsck").returncode == 0
    index = store.index()
    assert index.stats()["records"] == 120 and index.stats()["vectors"] == 120
    # The second call reuses the folder instead of building again.
    again, info2 = synth.build_store(tmp_path, 120, per_day=40, log=lambda m: None)
    assert again.root == store.root and info2 == info


def test_synthetic_texts_are_deterministic():
    from memstore.bench.synth import TextSource, synth_records

    assert TextSource(4).texts(5) == TextSource(4).texts(5)
    a, b = synth_records(30, 10), synth_records(30, 10)
    assert [r["id"] for r in a] == [r["id"] for r in b]
    assert len({r["id"] for r in a}) == 30


def test_bare_scan_matches_full_sort():
    from memstore.bench.speed import bare_scan

    rng = np.random.default_rng(1)
    m = rng.standard_normal((500, 16)).astype(np.float32)
    q = rng.standard_normal(16).astype(np.float32)
    assert bare_scan(m, q, 7).tolist() == np.argsort(-(m @ q))[:7].tolist()


def test_ct_bench_tiny_run_writes_report(tmp_path):
    out = tmp_path / "bench.md"
    proc = ct(
        "bench",
        "--sizes",
        "60,120",
        "--per-day",
        "30",
        "--queries",
        "3",
        "--repeats",
        "1",
        "--ingest-n",
        "20",
        "--base",
        tmp_path / "cache",
        "--no-contexttape",
        "--no-minilm",
        "--million",
        "3000",
        "--ann-sizes",
        "2000,3000",
        "--public-sizes",
        "90",
        "--out",
        out,
        check=False,
        env={"MEMSTORE_BENCH_SCALE": "60"},
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1 only when a budget fails on this machine
    text = out.read_text(encoding="utf-8")
    assert text == proc.stdout.rstrip("\n") + "\n" or text.strip() == proc.stdout.strip()
    for needle in (
        "| measure |",
        "warm hybrid query",
        "vector part of a query",
        "fresh `ct search` process",
        "incremental reindex after one new day",
        "full index rebuild",
        "bytes per record: vector segment",
        "ingest overhead beyond embedding",
        "Machine:",
        "Command: `ct bench",
        "fresh `ct add` process",
        "what a fresh `ct add` spends before any work",
        "warm hybrid candidates + fusion",
        "fresh `ct where` process",
        "## Scale",
        "`ct add` wall time",
        "`git clone` (local, with checkout)",
        "bytes on disk per record ≤ 1.3",
        "public `Store.search` hybrid, top 10, warm — vs the internal `search()` call",
        "each query after an idle pause (the watch's periodic look due)",
        "the warm internal hybrid call",
        "fresh process after one public hybrid `Store.search`: private anonymous memory / RSS",
        "disposable index (.memstore/) bytes per record",
    ):
        assert needle in text, needle
    assert (
        "1,612 / 460 B" in text
    )  # header + 384 float32s (or int8s) + what sealing adds (inner header, AEAD tag)
    assert "heavy imports: none" in text
    raw = json.loads((tmp_path / "cache" / "last.json").read_text())
    assert set(raw["queries"]) == {"60", "120"}
    assert set(raw["public"]) == {"60", "120", "90"}  # the public path also on --public-sizes
    mem = raw["memory"]["120"]  # measured in a fresh process: private pages within its RSS
    assert 0 < mem["Anonymous"] <= mem["Private_Clean"] + mem["Private_Dirty"] <= mem["Rss"]
    assert mem["index_bytes"]["vectors"] == 120 * 384  # int8 codes
    assert mem["index_bytes"]["errors"] == 120 * 4 and mem["index_bytes"]["scales"] == 384 * 4
    floor = raw["fresh_add_floor"]  # measured: start-up, then more with every module an add loads
    assert 0 < floor["start-up"] < floor["all"] and floor["numpy"] > 0 and floor["git"] > 0
    # The one-new-day step undoes itself: the cached store is back to its 120 records, git clean.
    from memstore.bench import synth
    from memstore.store import Store

    st = Store.open(tmp_path / "cache" / f"store-v{synth.SYNTH_VERSION}-120-30-float32")
    assert st.index().stats()["records"] == 120 and git_clean(st.root)


def test_versus_tiny_run_times_every_command_on_both_sides(tmp_path, capsys):
    """`python -m memstore.bench.versus` against this same tree: both stores built, every command
    timed on both sides, a ratio for each in the table."""
    from pathlib import Path

    from memstore.bench import versus

    here = Path(versus.__file__).resolve().parents[2]
    out = tmp_path / "raw.json"
    assert (
        versus.main(
            ["--other", str(here), "--n", "60", "--per-day", "30", "--runs", "1"]
            + ["--base", str(tmp_path / "v"), "--json", str(out)]
        )
        == 0
    )
    table = capsys.readouterr().out
    for cmd, _ in versus.COMMANDS:
        assert f"| `ct {cmd}` |" in table
    raw = json.loads(out.read_text())
    assert len(raw) == 2 and all(len(t[c]) == 1 for t in raw.values() for c, _ in versus.COMMANDS)
