"""ct recall: time phrase → window → ranked verbatim lines (best first), with honest fallback levels."""

from __future__ import annotations

import json

import pytest

from conftest import ct, git_clean, make_store, write_turns
from memstore.retrieve.recall import (
    ALL_TIME,
    IN_WINDOW,
    NOTHING,
    OUTSIDE_WINDOW,
    RECENT,
    WHOLE_WINDOW,
    WINDOW_ONLY,
    content_words,
    recall,
)

TZ = "Europe/Berlin"
NOW = "2026-11-30T10:00:00"  # Monday morning on the store's wall clock (09:00 UTC)

# Three days of dated turns, local (Berlin) wall-clock times; "yesterday evening" is 2026-11-29 17:00-22:00.
TURNS = [
    ("2026-11-28T19:00:00", "user", "ana", "trip", "First idea for the trip budget: 3000 euros."),
    ("2026-11-28T19:05:00", "assistant", "nova", "trip", "Noted, 3000 euros as a starting budget."),
    (
        "2026-11-29T09:00:00",
        "user",
        "ana",
        "work",
        "Morning. The project budget review is on Friday.",
    ),
    ("2026-11-29T18:10:00", "user", "ana", "trip", "Let's cap the trip budget at 2,400 euros."),
    ("2026-11-29T18:12:00", "assistant", "nova", "trip", "Agreed: the budget cap is 2,400 euros."),
    ("2026-11-29T18:20:00", "user", "ana", "work", "Reminder: send the slides to Bo."),
    ("2026-11-29T18:30:00", "user", "ana", "trip", "Shall we order pizza tonight?"),
    ("2026-11-29T19:45:00", "assistant", "nova", "trip", "Budget split: 1,500 travel, 900 food."),
    ("2026-11-29T21:30:00", "user", "ana", "trip", "予算は2400ユーロにしよう。"),
    ("2026-11-29T22:30:00", "user", "ana", "trip", "Late note: the budget might need a buffer."),
    ("2026-11-30T08:00:00", "user", "ana", "trip", "Good morning, flights are booked."),
]
EVENING_BUDGET = [
    "[2026-11-29 18:10] ana: Let's cap the trip budget at 2,400 euros.",
    "[2026-11-29 18:12] nova: Agreed: the budget cap is 2,400 euros.",
    "[2026-11-29 19:45] nova: Budget split: 1,500 travel, 900 food.",
]


def _write(store, turns, **extra):
    write_turns(store, turns, fields=("ts", "role", "actor", "session", "text"), **extra)


@pytest.fixture
def berlin(tmp_path):
    st = make_store(tmp_path / "berlin", timezone=TZ)
    _write(st, TURNS)
    # A document chunk that mentions the budget and is dated yesterday evening: not conversation.
    doc = st.normalize(
        {
            "ts": "2026-11-29T18:40:00",
            "role": "system",
            "actor": "document",
            "type": "doc",
            "session": "",
            "text": "Budget policy handbook: travel budget rules.",
            "source": {"path": "handbook.md", "chunk": 0, "chunks": 1},
        }
    )
    st.write([doc], "Ingest handbook.md")
    return st


def _texts(res):
    return [h.hit.text for h in res.hits]


def test_end_to_end_yesterday_evening_budget_only_those_lines_best_first(berlin):
    out = ct(
        "-C",
        berlin.root,
        "recall",
        "--now",
        NOW,
        "what did we say yesterday evening about the budget",
    ).stdout
    lines = out.splitlines()
    assert lines[0].startswith("[NOW] 2026-11-30 10:00 Mon (Europe/Berlin)")
    assert "yesterday evening" in lines[1] and "2026-11-29 17:00 to 2026-11-29 22:00" in lines[1]
    assert "matched in the window" in lines[1]
    timed = [ln for ln in lines if ln.startswith("[2026")]
    assert sorted(timed) == EVENING_BUDGET and "verbatim, best first" in out
    assert "handbook" not in out and "pizza" not in out and "review is on Friday" not in out
    assert git_clean(berlin.root)


def test_json_shape(berlin):
    data = json.loads(
        ct(
            "-C",
            berlin.root,
            "recall",
            "--now",
            NOW,
            "--json",
            "what did we say yesterday evening about the budget",
        ).stdout
    )
    assert set(data) >= {"query", "window", "level", "hits", "notes", "now"}
    assert data["query"] == "what did we say yesterday evening about the budget"
    assert data["window"] == {
        "start": "2026-11-29T16:00:00.000000Z",
        "end": "2026-11-29T21:00:00.000000Z",
        "granularity": "part_of_day",
        "phrase": "yesterday evening",
    }
    assert data["level"] == IN_WINDOW and data["now"] == "2026-11-30T09:00:00.000000Z"
    hits = data["hits"]
    assert sorted(h["text"] for h in hits) == sorted(ln.split(": ", 1)[1] for ln in EVENING_BUDGET)
    assert [h["score"] for h in hits] == sorted(
        (h["score"] for h in hits), reverse=True
    )  # best first
    for h in hits:
        assert {"id", "ts", "actor", "role", "type", "text", "session", "day", "flags"} <= set(h)
        assert "exact" in h["flags"] and "low_confidence" not in h["flags"]


def test_no_time_phrase_gives_a_null_window(berlin):
    data = json.loads(ct("-C", berlin.root, "recall", "--now", NOW, "--json", "flights").stdout)
    assert data["window"] is None and data["level"] == ALL_TIME
    assert [h["text"] for h in data["hits"]] == ["Good morning, flights are booked."]


@pytest.mark.parametrize(
    "question", ["yesterday evening", "what did we talk about yesterday evening?"]
)
def test_no_keywords_lists_the_whole_window_in_time_order(berlin, question):
    res = recall(berlin, question, now=NOW)
    assert res.level == WHOLE_WINDOW and res.keywords == ""
    assert _texts(res) == [t[4] for t in TURNS if "2026-11-29T17" < t[0] < "2026-11-29T22"]
    assert res.window_lines == 6


def test_nothing_in_window_still_ranks_the_window_then_labels_outside_matches(berlin):
    res = recall(berlin, "what did we say yesterday evening about flights", now=NOW)
    assert res.level == WINDOW_ONLY and res.window_lines == 6
    assert any("the window matched, the words did not" in n and "flights" in n for n in res.notes)
    window = [t[4] for t in TURNS if "2026-11-29T17" < t[0] < "2026-11-29T22"]
    assert sorted(_texts(res)[:-1]) == sorted(window)
    assert all(h.flags[0] == "window_only" for h in res.hits[:-1])
    assert (
        _texts(res)[-1] == "Good morning, flights are booked."
        and "outside_window" in res.hits[-1].flags
    )
    out = ct("-C", berlin.root, "recall", "--now", NOW, "yesterday evening flights").stdout
    assert "[2026-11-30 08:00] [outside] ana: Good morning, flights are booked." in out
    assert "[window] ana: Shall we order pizza tonight?" in out
    assert "no line in the window matched the words; its lines ranked by closeness" in out


def test_outside_matches_are_the_nearest_in_time(berlin):
    res = recall(berlin, "budget in March", now=NOW, k=2)
    assert res.level == OUTSIDE_WINDOW and res.window_lines == 0
    assert any("Nothing on record in 'in March'" in n for n in res.notes)
    # The two budget lines closest to March... are the earliest ones, in time order.
    assert _texts(res) == [
        "First idea for the trip budget: 3000 euros.",
        "Noted, 3000 euros as a starting budget.",
    ]


def test_nothing_anywhere_is_reported_as_absence(berlin):
    # A window that holds lines answers with them, saying that only the window matched.
    res = recall(berlin, "what did we say yesterday evening about quantum chromodynamics", now=NOW)
    assert res.level == WINDOW_ONLY and len(res.hits) == 6
    assert all("window_only" in h.flags and "outside_window" not in h.flags for h in res.hits)
    assert any("contains 'quantum chromodynamics' or clearly means it" in n for n in res.notes)
    proc = ct("-C", berlin.root, "recall", "--now", NOW, "quantum chromodynamics")
    assert "no match" in proc.stdout and "Absence is reported as absence" in proc.stdout
    empty = recall(berlin, "what did we say in March about quantum chromodynamics", now=NOW)
    assert empty.level == NOTHING and empty.hits == [] and empty.window_lines == 0


def test_around_adds_neighbours_of_the_same_session_only(berlin):
    res = recall(berlin, "the last time we talked about pizza", now=NOW, around=1)
    assert res.occurrence == "last"
    assert _texts(res) == [
        "Agreed: the budget cap is 2,400 euros.",
        "Shall we order pizza tonight?",
        "Budget split: 1,500 travel, 900 food.",
    ]
    assert [("context" in h.flags) for h in res.hits] == [True, False, True]
    # The 18:20 line sits between them in time but belongs to another session.
    assert "Reminder: send the slides to Bo." not in _texts(res)
    out = ct("-C", berlin.root, "recall", "--now", NOW, "--around", "1", "pizza").stdout
    assert (
        "  [2026-11-29 18:12] nova: Agreed" in out
        and "\n[2026-11-29 18:30] ana: Shall we order pizza" in out
    )


def test_docs_are_left_out_unless_asked(berlin):
    assert all(h.hit.type != "doc" for h in recall(berlin, "yesterday evening", now=NOW).hits)
    assert all(h.hit.type != "doc" for h in recall(berlin, "handbook", now=NOW).hits)
    with_docs = recall(berlin, "yesterday evening", now=NOW, docs=True)
    assert "Budget policy handbook: travel budget rules." in _texts(with_docs)
    ranked = recall(berlin, "yesterday evening handbook", now=NOW, docs=True)
    assert ranked.level == IN_WINDOW and _texts(ranked) == [
        "Budget policy handbook: travel budget rules."
    ]
    out = ct(
        "-C", berlin.root, "recall", "--now", NOW, "--docs", "yesterday evening handbook"
    ).stdout
    assert "document (doc): Budget policy handbook" in out


def test_first_and_last_time_pick_an_occurrence_not_a_date(berlin):
    first = recall(berlin, "the first time we talked about the trip budget", now=NOW)
    assert first.window is None and first.occurrence == "first"
    assert _texts(first) == ["First idea for the trip budget: 3000 euros."]
    assert any("The first time: 2026-11-28" in n for n in first.notes)
    last = recall(berlin, "the last time we talked about the budget", now=NOW)
    assert _texts(last)[-1] == "Late note: the budget might need a buffer."
    assert all(h.hit.ts.startswith("2026-11-29") for h in last.hits)


def test_k_caps_ranked_hits(berlin):
    res = recall(berlin, "budget", now=NOW, k=2)
    assert res.level == ALL_TIME and len(res.hits) == 2
    assert res.hits[0].hit.score >= res.hits[1].hit.score


def test_japanese_question(berlin):
    res = recall(berlin, "昨日の夜、予算について何を話した？", now=NOW)
    assert res.window is not None and res.window.phrase == "昨日の夜" and res.keywords == "予算"
    assert _texts(res) == ["予算は2400ユーロにしよう。"]


def test_low_confidence_hits_are_flagged(tmp_path):
    st = make_store(tmp_path / "s", timezone=TZ)
    _write(
        st,
        [
            ("2026-11-29T18:00:00", "user", "ana", "t", "Budget split"),
            ("2026-11-29T18:05:00", "user", "ana", "t", "Shall we order pizza tonight?"),
        ],
    )
    res = recall(st, "yesterday evening budgetary", now=NOW)
    # "budgetary" is not the word "budget" (no exact match), only a resemblance by meaning.
    assert res.level == IN_WINDOW and _texts(res) == ["Budget split"]
    assert "low_confidence" in res.hits[0].flags and "exact" not in res.hits[0].flags
    out = ct("-C", st.root, "recall", "--now", NOW, "yesterday evening budgetary").stdout
    assert "[2026-11-29 18:00] [maybe] ana: Budget split" in out


def test_no_phrase_and_no_keywords_shows_the_latest_lines(berlin):
    res = recall(berlin, "what did we say?", now=NOW, k=2)
    assert res.level == RECENT
    assert _texts(res) == [
        "Late note: the budget might need a buffer.",
        "Good morning, flights are booked.",
    ]


def test_recall_sees_a_line_added_after_the_last_index_update(berlin):
    recall(berlin, "budget", now=NOW)
    berlin.add("The hotel budget is 600 euros.", session="trip", ts="2026-11-30T09:30:00")
    assert "The hotel budget is 600 euros." in _texts(
        recall(berlin, "this morning budget", now=NOW)
    )


def test_multiline_text_stays_verbatim(tmp_path):
    st = make_store(tmp_path / "s", timezone=TZ)
    _write(st, [("2026-11-29T18:00:00", "user", "ana", "t", "Budget:\n- flights 800\n- hotel 600")])
    out = ct("-C", st.root, "recall", "--now", NOW, "yesterday evening").stdout
    assert "[2026-11-29 18:00] ana: Budget:\n    - flights 800\n    - hotel 600\n" in out


def test_bad_input_is_a_usage_error(berlin):
    proc = ct("-C", berlin.root, "recall", "--now", "not-a-time", "budget", check=False)
    assert proc.returncode == 2 and "--now" in proc.stderr
    proc = ct("-C", berlin.root, "recall", "   ", check=False)
    assert proc.returncode == 2 and "needs a question" in proc.stderr


def test_content_words():
    assert content_words("what did we say about the budget") == "budget"
    assert content_words("what happened with the trip budget?") == "trip budget"
    assert content_words("Budget and budget") == "Budget"
    assert content_words("予算について何を話した") == "予算"
    assert content_words("what did we talk about") == ""


def test_now_may_be_a_naive_datetime_on_the_store_clock(berlin):
    import datetime as dt

    a = recall(berlin, "yesterday evening budget", now=dt.datetime(2026, 11, 30, 10, 0))
    b = recall(berlin, "yesterday evening budget", now=NOW)
    assert a.now == b.now == "2026-11-30T09:00:00.000000Z" and a.window == b.window
