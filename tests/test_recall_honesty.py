"""Recall honesty on an imported lossless-memory store: every answer states its fallback level, weak hits are flagged.

lossless-memory's recall said "[maybe]" for weak semantic hits and printed an L2/L3 note when it fell
back to the whole range or to all time. `ct recall --json` must say the same things as data.
"""

from __future__ import annotations

import json

import pytest

from conftest import ct, git_clean, make_store
from test_import_lossless import _lines

NOW = (
    "2026-03-04T12:00:00"  # Wednesday noon in Tokyo; "yesterday evening" is 2026-03-03 17:00-22:00
)
DAY3 = [
    {
        "ts": "2026-03-03T20:10:00+09:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "Let's cap the Lisbon budget at 2,400 euros.",
        "model": None,
        "session": "m1",
    },
    {
        "ts": "2026-03-03T20:12:00+09:00",
        "actor": "Nova",
        "role": "ai",
        "type": "text",
        "text": "Budget agreed.",
        "model": "claude-x",
        "session": "m1",
    },
    {
        "ts": "2026-03-03T21:00:00+09:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "Shall we order pizza tonight?",
        "model": None,
        "session": "m1",
    },
]
DAY1 = [  # older data: wall-clock JST without an offset
    {
        "ts": "2026-03-01T10:00:00",
        "actor": "Sam",
        "role": "user",
        "type": "text",
        "text": "The hotel deposit is 300 euros.",
        "model": None,
        "session": "m0",
    },
]


@pytest.fixture(scope="module")
def tokyo(tmp_path_factory):
    base = tmp_path_factory.mktemp("honesty")
    data = base / "ll"
    (data / "main").mkdir(parents=True)
    (data / "main" / "2026-03-03.jsonl").write_text(_lines(DAY3), encoding="utf-8")
    (data / "main" / "2026-03-01.jsonl").write_text(_lines(DAY1), encoding="utf-8")
    st = make_store(base / "store", timezone="Asia/Tokyo")
    ct("-C", st.root, "import", "lossless-memory", data, "--source-timezone", "Asia/Tokyo")
    assert git_clean(st.root)
    return st


def recall_json(st, question):
    return json.loads(ct("-C", st.root, "recall", "--json", "--now", NOW, question).stdout)


def test_matched_in_window(tokyo):
    res = recall_json(tokyo, "what did we say yesterday evening about the budget")
    assert res["level"] == "in_window" and res["window"]["phrase"] == "yesterday evening"
    assert sorted(h["text"] for h in res["hits"]) == sorted([DAY3[0]["text"], DAY3[1]["text"]])
    assert all("exact" in h["flags"] and "low_confidence" not in h["flags"] for h in res["hits"])
    assert {h["role"] for h in res["hits"]} == {
        "user",
        "assistant",
    }  # lossless-memory's "ai" is the assistant


def test_whole_window_when_there_are_no_keywords(tokyo):
    res = recall_json(tokyo, "yesterday evening")
    assert res["level"] == "whole_window" and res["window_lines"] == 3
    assert [h["text"] for h in res["hits"]] == [r["text"] for r in DAY3]


def test_meaning_only_hit_is_flagged_low_confidence(tokyo):
    res = recall_json(tokyo, "yesterday evening budgetary")
    # "budgetary" is not the word "budget": only a resemblance by meaning, so it is kept but flagged.
    assert res["level"] == "in_window"
    assert [h["text"] for h in res["hits"]] == ["Budget agreed."]
    assert "low_confidence" in res["hits"][0]["flags"] and "exact" not in res["hits"][0]["flags"]
    out = ct("-C", tokyo.root, "recall", "--now", NOW, "yesterday evening budgetary").stdout
    assert "[maybe] Nova: Budget agreed." in out


def test_outside_window_is_labelled(tokyo):
    res = recall_json(tokyo, "what did we say yesterday evening about the hotel deposit")
    # The window holds lines, so they come first, marked as matched by the window alone.
    assert res["level"] == "window_only"
    assert sorted(h["text"] for h in res["hits"][:3]) == sorted(r["text"] for r in DAY3)
    assert all("window_only" in h["flags"] for h in res["hits"][:3])
    assert [h["text"] for h in res["hits"][3:]] == [DAY1[0]["text"]]
    assert "outside_window" in res["hits"][3]["flags"]
    assert any("OUTSIDE the window" in n for n in res["notes"])
    assert any("the window matched, the words did not" in n for n in res["notes"])
    # The naive 10:00 was read as Tokyo time: 01:00 UTC.
    assert res["hits"][3]["ts"] == "2026-03-01T01:00:00.000000Z"
    empty = recall_json(
        tokyo, "what did we say in January about the hotel deposit"
    )  # an empty window
    assert empty["level"] == "outside_window" and [h["text"] for h in empty["hits"]] == [
        DAY1[0]["text"]
    ]


def test_nothing_is_reported_as_nothing(tokyo):
    res = recall_json(tokyo, "yesterday evening quantum chromodynamics")
    assert res["level"] == "window_only" and len(res["hits"]) == 3
    assert all("window_only" in h["flags"] for h in res["hits"])
    res = recall_json(tokyo, "in January quantum chromodynamics")
    assert res["level"] == "nothing" and res["hits"] == []
    assert any("anywhere else either" in n for n in res["notes"])
