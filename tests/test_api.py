"""The Python API: docs/python-api.md's examples run as written, and Store's verbs return typed results."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import commits, git_clean, needs_minilm_weights

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "python-api.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.model
@needs_minilm_weights  # the examples use the default embedder
def test_the_documented_examples_run(tmp_path, monkeypatch, capsys):
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)
    scope: dict = {"__name__": "python_api_doc"}
    for i, block in enumerate(blocks, 1):
        exec(compile(block, f"docs/python-api.md (python block {i})", "exec"), scope)
    out = capsys.readouterr().out
    assert "Let's cap the trip budget at 2,400 euros." in out
    assert 'in_window 2026-11-24 ["Let\'s cap the trip budget at 2,400 euros."' in out
    store = scope["store"]
    assert git_clean(store.root)
    assert commits(store.root)[0] == "Mark done: waiting for Ana's hotel numbers"


def test_verbs_return_typed_results(store):
    import memstore
    from memstore import Hit, RecallResult, Stats, WriteResult

    res = store.add(
        "The museum closes at 18:00 on Mondays.",
        role="assistant",
        session="trip",
        ts="2026-11-20T10:00:00Z",
    )
    assert isinstance(res, WriteResult) and res.commit and res.to_json()["added"] == 1
    store.add("Flights are booked for the 3rd.", session="trip", ts="2026-11-27T10:00:00Z")

    hits = store.search("museum", k=5)
    assert hits and isinstance(hits[0], Hit) and hits[0].text.startswith("The museum")
    assert (
        store.search(
            "museum", since=dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc), mode="exact"
        )
        == []
    )
    assert [h.text for h in store.search("flights", until="2026-11-25", mode="exact")] == []
    assert len(store.search("flights", since=1764000000.0, role=["user"], mode="exact")) == 1
    assert store.search("museum", session="other", mode="exact") == []

    rec = store.recall("what about the museum on 20 November 2026", now="2026-11-30T12:00:00Z")
    assert isinstance(rec, RecallResult) and rec.level == "in_window"
    assert [h.hit.text for h in rec.hits] == ["The museum closes at 18:00 on Mondays."]

    st = store.stat()
    assert isinstance(st, Stats) and st.records == 2 and st.to_json()["records"] == 2
    assert store.fsck().ok
    assert [e["subject"] for e in store.history(max_count=1)] == [
        "Add user turn: Flights are booked for the 3rd."
    ]
    assert memstore.Marker is type(store.mark("pack the rain jacket"))
    assert store.where().markers[0].text == "pack the rain jacket"
    assert git_clean(store.root)


def test_errors_are_memstore_errors(tmp_path, store):
    from memstore import Store
    from memstore.errors import NotAStoreError, UsageError

    with pytest.raises(UsageError, match="mode must be one of"):
        store.search("x", mode="fuzzy")
    with pytest.raises(NotAStoreError):
        Store.open(tmp_path / "nowhere")
    with pytest.raises(UsageError, match="no ContextTape segments"):
        (tmp_path / "empty").mkdir()
        store.import_("contexttape", tmp_path / "empty")


def test_import_memstore_stays_light():
    code = (
        "import sys, memstore; from memstore import Store; "
        "assert 'numpy' not in sys.modules and 'memstore.retrieve.search' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_every_result_type_imports_without_numpy():
    """docs/python-api.md: every result type imports from `memstore` without numpy, a model or git."""
    from memstore.results import RESULT_TYPES

    names = sorted(RESULT_TYPES) + ["Store"]
    code = (
        "import sys; from memstore import " + ", ".join(names) + "; "
        "heavy = [m for m in ('numpy', 'git', 'onnxruntime', 'torch') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_tree_verbs(store):
    from memstore import ReorgResult, TreeDiff

    store.add(
        "Let's plan the garden: tomatoes along the south fence.",
        session="garden",
        ts="2026-11-20T10:00:00Z",
    )
    store.add("The tomatoes need staking in June.", session="garden", ts="2026-11-20T10:01:00Z")
    d = store.diff("HEAD~1", "HEAD")  # the second turn joined the topic the first one opened
    assert isinstance(d, TreeDiff) and not d.empty and d.grew
    n = len(commits(store.root))
    r = store.reorganize(dry_run=True, offline=True)
    assert (
        isinstance(r, ReorgResult)
        and r.dry_run
        and r.commit is None
        and len(commits(store.root)) == n
    )
    assert git_clean(store.root)


def test_log_dates_are_on_the_store_clock(tmp_path):
    """`ct log`, Store.log and the page's history show commit times in the store's timezone, as every
    other view does (git writes them in the committing process's offset)."""
    import os

    from memstore import Store

    st = Store.init(tmp_path / "s", embedder="hash", timezone="Asia/Tokyo")
    env = {**os.environ, "TZ": "UTC"}
    subprocess.run(
        [sys.executable, "-m", "memstore", "-C", str(st.root), "add", "one turn"],
        check=True,
        env=env,
        capture_output=True,
    )
    [entry, *_] = st.log(1)
    assert entry["date"].endswith("+09:00"), entry["date"]
