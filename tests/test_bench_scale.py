"""The scale benchmark's share of `ct add` spent in git (memstore/bench/scale.py) is measured from
git's trace2 events, which git writes only to an absolute path: with the default `--base .bench`
the table said "0 ms" inside git for every size until the path was made absolute."""

from __future__ import annotations

from pathlib import Path

from conftest import make_store


def test_git_s_part_of_ct_add_is_measured_from_a_relative_base(tmp_path, monkeypatch):
    from memstore.bench import scale

    store = make_store(tmp_path / "s")
    monkeypatch.chdir(tmp_path)
    trace = Path("add-0.trace")  # relative, as the default base gives
    scale._ct_add(store.root, "a turn for the trace", trace, "2026-12-05T10:00:00Z")
    assert (tmp_path / trace).exists()
    assert scale._git_seconds(trace) > 0
