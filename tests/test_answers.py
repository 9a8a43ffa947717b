"""Answers before their questions (issue 29): a hit that only asks ranks right below the reply that answered it,\nand the real-export echo benchmark's own parts (memstore/bench/echo_real.py)."""

from __future__ import annotations

import json

import pytest

from conftest import ct, write_turns
from memstore.retrieve.answers import is_question

BUDGET = [
    ("2026-11-10T20:15:00Z", "user", "Monthly review: groceries ran 80 euros over.", "nov", "ana"),
    (
        "2026-11-10T20:18:00Z",
        "user",
        "Decision: the household budget stays at 1,650, groceries get 420 from December.",
        "nov",
        "ana",
    ),
    (
        "2026-11-29T21:30:00Z",
        "user",
        "What did we decide about the grocery budget again?",
        "late",
        "ana",
    ),
    (
        "2026-11-29T21:31:00Z",
        "assistant",
        "On November 10 you decided the household budget stays at 1,650.",
        "late",
        None,
    ),
    ("2026-11-30T08:00:00Z", "user", "What did we decide about the grocery budget?", "next", "ana"),
    ("2026-11-30T08:01:00Z", "user", "Never mind, I found the note.", "next", "ana"),
]
QUESTION = "What did we decide about the grocery budget again?"
ANSWER = "On November 10 you decided the household budget stays at 1,650."


@pytest.mark.parametrize(
    "text",
    [
        "What did we decide about the grocery budget again?",
        "how did Plutarch describe the ship?  ",
        "Which hotel? And for how many nights?",
        "Where did I leave the keys",
        'Did you say "Tuesday"?"',
    ],
)
def test_bare_questions(text):
    assert is_question(text)


@pytest.mark.parametrize(
    "text",
    [
        "I bought Nike Pegasus shoes last week. Can you suggest socks that go with them?",
        "Decision: the budget stays at 1,650.",
        "Groceries ran over",
        "What " + "really " * 60 + "matters?",  # long turns carry context of their own
        "",
    ],
)
def test_not_bare_questions(text):
    assert not is_question(text)


def _texts(hits):
    return [h.text for h in hits]


def test_the_answer_ranks_above_its_question(store):
    write_turns(store, BUDGET)
    plain = store.search(QUESTION, k=3, mode="exact")
    texts = _texts(plain)
    assert texts.index(ANSWER) == texts.index(QUESTION) - 1
    answer, question = plain[texts.index(ANSWER)], plain[texts.index(QUESTION)]
    assert answer.parts["answers"] == question.id and question.parts["answered_by"] == answer.id
    assert answer.score == question.score  # the answer takes the question's place and score


def test_every_mode_and_the_json_link_the_exchange(store):
    write_turns(store, BUDGET)
    for mode in ("hybrid", "vector", "exact"):
        texts = _texts(store.search(QUESTION, k=10, mode=mode))
        assert texts.index(ANSWER) < texts.index(QUESTION), mode
    out = json.loads(ct("-C", store.root, "search", QUESTION, "--json", "--explain").stdout)
    by_text = {h["text"]: h for h in out["hits"]}
    assert by_text[ANSWER]["parts"]["answers"] == by_text[QUESTION]["id"]
    lines = ct("-C", store.root, "search", QUESTION, "-k", "10").stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if ANSWER in line)
    assert "answers the question below" in lines[at - 1] and QUESTION in lines[at + 2]


def test_an_answer_below_k_takes_the_question_slot_with_the_question_under_it(store):
    write_turns(store, BUDGET)
    answer = next(h for h in store.search(ANSWER, k=10, mode="exact") if h.text == ANSWER)
    question = next(h for h in store.search(QUESTION, k=10, mode="exact") if h.text == QUESTION)
    hits = store.search(QUESTION, k=1, mode="exact")
    # the answer ranks above its question: it is the hit, the question comes under it
    assert _texts(hits) == [ANSWER] and hits[0].score == question.score
    assert hits[0].parts["answers"] == question.id
    asked = hits[0].parts["question"]
    assert asked == {"id": question.id, "ts": question.ts, "role": "user", "text": QUESTION}
    assert answer.id == hits[0].id
    out = json.loads(ct("-C", store.root, "search", QUESTION, "-k", "1", "--json").stdout)
    assert [h["question"] for h in out["hits"]] == [asked]  # --json shows it without --explain
    lines = ct("-C", store.root, "search", QUESTION, "-k", "1").stdout.splitlines()
    assert "answers the question below" in lines[0] and lines[1].strip() == ANSWER
    assert lines[2].strip() == f"asked (user): {QUESTION}"


def test_a_context_pack_keeps_the_question_with_the_answer_in_its_slot(store):
    """The prompt gets the exchange, question first in time, even when the answer alone would not
    pass the context's relevance check for a query worded like the question."""
    write_turns(store, BUDGET)
    recalled = [r["text"] for r in store.context(QUESTION, k=1, recent=0).sections["recall"]]
    assert ANSWER in recalled and QUESTION in recalled
    assert recalled.index(QUESTION) < recalled.index(ANSWER)


def test_the_page_masks_a_secret_in_the_question_under_its_answer(store):
    from memstore.serve.web.mask import MARK
    from memstore.serve.web.views import search

    token = "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    asked = f"Is the deploy token {token} still valid?"
    store.add(asked, role="user", session="s", ts="2026-11-29T21:30:00Z", allow_secrets=True)
    store.add(
        "No: it was revoked on Monday.", role="assistant", session="s", ts="2026-11-29T21:31:00Z"
    )
    p = {"query": "deploy token still valid", "k": 1, "mode": "exact"}
    p.update(since=None, until=None, role=None, session=None, now=None)
    out = search(store, p)
    assert token not in json.dumps(out)
    [hit] = out["hits"]
    assert hit["text"] == "No: it was revoked on Monday."
    shown = hit["parts"]["question"]["text"]
    assert token not in shown and MARK in shown


def test_no_other_hit_is_pushed_out(store):
    from memstore.retrieve.search import search

    write_turns(store, BUDGET)
    store.index()
    for k in (1, 2, 3):
        plain = search(store, QUESTION, k=k, mode="exact", answers=False)
        hits = search(store, QUESTION, k=k, mode="exact")
        assert len(hits) == len(plain)
        # the same k hits, the question's slot held by its answer or the question after it
        shown = {h.id for h in hits} | {
            h.parts["question"]["id"] for h in hits if "question" in h.parts
        }
        assert {h.id for h in plain} <= shown, k
        assert len({h.id for h in hits}) == len(hits)  # no hit twice


def test_the_reply_must_pass_the_filters(store):
    write_turns(store, BUDGET)
    hits = store.search(QUESTION, k=3, mode="exact", role=["user"])
    assert ANSWER not in _texts(hits) and _texts(hits)[0] == QUESTION


def test_a_question_followed_by_its_own_side_keeps_its_place(store):
    write_turns(store, BUDGET)
    hits = store.search("What did we decide about the grocery budget?", k=10, mode="exact")
    texts = _texts(hits)
    # "next" session: the user spoke again, nobody answered; that question is not moved
    i = texts.index("What did we decide about the grocery budget?")
    assert not {"answered_by", "answer"} & set(hits[i].parts)
    assert not any("answers" in h.parts for h in hits[:i])


def test_a_forgotten_reply_is_no_answer(store):
    write_turns(store, BUDGET)
    reply = next(h for h in store.search(ANSWER, k=10, mode="exact") if h.text == ANSWER)
    store.forget([reply.id])
    hits = store.search(QUESTION, k=3, mode="exact")
    assert ANSWER not in _texts(hits) and _texts(hits)[0] == QUESTION


# ----- memstore/bench/echo_real.py ---------------------------------------------------------------

AIDER_LOG = """
# aider chat started at 2025-03-02 10:00:00

> Aider v0.86.2
> Model: some-model

#### Where do the build logs go?  
> Initial repo scan can be slow.

<thinking-content-0a1b>
The user asks about logs.
</thinking-content-0a1b>

They go to build/logs, one file per run.

#### Add file to the chat? (Y)es/(N)o [Yes]: n  
#### /architect  
#### Thanks. Now rename them  
#### by date.  

Done: build/logs/2025-03-02.log.

# aider chat started at 2025-03-03 09:00:00

#### How do I run the tests?  

Run make test.
"""


def test_an_aider_log_becomes_turns():
    from memstore.bench.echo_real import convert_aider

    turns = convert_aider(AIDER_LOG, "demo")
    assert [(t["role"], t["text"]) for t in turns] == [
        ("user", "Where do the build logs go?"),
        ("assistant", "They go to build/logs, one file per run."),
        ("user", "Thanks. Now rename them\nby date."),
        ("assistant", "Done: build/logs/2025-03-02.log."),
        ("user", "How do I run the tests?"),
        ("assistant", "Run make test."),
    ]
    assert [t["ts"] for t in turns[:2]] == ["2025-03-02T10:00:00Z", "2025-03-02T10:00:01Z"]
    assert turns[0]["session"] == "demo-20250302T100000" != turns[4]["session"]


@pytest.mark.parametrize(
    "question, query",
    [
        ("WHERE IS IT SAVED?", "is it saved"),
        ("how do i copy in bash", "do i copy in bash"),
        ("What now?", None),  # one word left: too little to ask again
        ("Thanks, any update?", "thanks any update"),
    ],
)
def test_a_question_reworded(question, query):
    from memstore.bench.echo_real import reworded

    assert reworded(question) == query


def test_classify_an_echo():
    from memstore.bench.echo_real import classify

    q, a = "Q", "A"
    assert classify([{"id": "x"}, {"id": "y"}], q, a) is None
    assert classify([{"id": "A"}, {"id": "Q"}], q, a) == "above"
    assert classify([{"id": "A", "parts": {"answers": q, "question": {"id": q}}}], q, a) == "above"
    assert classify([{"id": "Q", "parts": {"answer": {"id": a}}}], q, a) == "with"
    assert classify([{"id": "Q"}, {"id": "A"}], q, a) == "missing"


def test_the_benchmark_runs_on_an_export_folder(tmp_path):
    from memstore.bench.echo_real import main

    export = tmp_path / "data" / "demo"
    export.mkdir(parents=True)
    (export / ".aider.chat.history.md").write_text(AIDER_LOG, encoding="utf-8")
    (export / "SOURCE").write_text("github.com/someone/demo, .aider.chat.history.md, commit abc")
    out = tmp_path / "r.json"
    args = ["--data", str(tmp_path / "data"), "--work", str(tmp_path / "w"), "--embedder", "hash"]
    assert main([*args, "--json", str(out)]) == 0
    [res] = json.loads(out.read_text())["exports"]
    assert res["records"] == 6 and res["cases"] == 2 and res["import"] == "jsonl"
    verbatim = res["forms"]["verbatim"]
    assert verbatim["asked"] == 2 and verbatim["echoes"] == 2 and verbatim["above"] == 2
    assert res["source"].startswith("github.com/someone/demo")


SPECSTORY = """<!-- Generated by SpecStory -->

# Available Tasks Inquiry (2025-04-28 14:34:13)

_**User**_

what tasks are available?

---

_**Assistant**_

<details>
            <summary>Searched codebase "available tasks"</summary>
| File | Lines |
</details>

---

Here are the available tasks: #001 and #004.

---

_**Assistant**_

Task #004 is in progress.

---

_**User**_

start #001

---
"""


def test_a_specstory_chat_becomes_turns():
    from memstore.bench.echo_real import convert_specstory

    turns = convert_specstory(SPECSTORY, "chat")
    assert [(t["role"], t["text"]) for t in turns] == [
        ("user", "what tasks are available?"),
        ("assistant", "Here are the available tasks: #001 and #004.\n\nTask #004 is in progress."),
        ("user", "start #001"),
    ]
    assert turns[0]["ts"] == "2025-04-28T14:34:13Z" and turns[2]["ts"] == "2025-04-28T14:34:15Z"
    assert {t["session"] for t in turns} == {"chat"}


# ----- the quality harness's echo counts (memstore/bench/lme.py, quality.py) ---------------------


def test_the_harness_counts_a_question_shown_under_its_answer():
    from memstore.bench import lme

    hs = lme.Haystack(records=[], gold_turns={"q1"})
    reply = {"q1": "a1", "q2": "a2"}
    # a1 took q1's slot (q1 shown under it); q2 is a hit of its own with its answer below ten
    top, carried = ["x", "a1", "q2", "y"], {"a1": "q1"}
    assert lme.shown(top, carried) == ["x", "a1", "q1", "q2", "y"]
    echo = lme.echoes(top, hs, {"q1", "q2"}, reply, carried)
    assert echo == {"top1": False, "echoes": 2, "answer_above": 1, "answer_in_slot": 1}
    # the turn metric sees the question shown under the answer, and all ten hits besides
    ten = [f"h{i}" for i in range(9)] + ["a1"]
    metrics = lme.score(ten, hs, set(), lme.shown(ten, carried))
    assert metrics["turn_recall_any@10"] == 1.0
    assert lme.score(ten, hs, set(), ten)["turn_recall_any@10"] == 0.0


def test_the_real_export_table_goes_under_question_echoes(tmp_path):
    from memstore.bench import quality
    from memstore.bench.quality_report import _echo_real

    figures = {
        "command": "python -m memstore.bench.echo_real --data exports",
        "exports": [
            {
                "name": "demo",
                "source": "github.com/someone/demo, chats/, commit abc",
                "import": "jsonl",
                "records": 6,
                "cases": 2,
                "forms": {
                    form: {
                        "asked": 2,
                        "echoes": 2,
                        "above": 2,
                        "with": 0,
                        "missing": 0,
                        "without_step": {"echoes": 2, "above": 0},
                    }
                    for form in ("reworded", "verbatim")
                },
            }
        ],
    }
    text = "\n".join(_echo_real(figures))
    assert "#### Real exports" in text and "| demo | 6 | 2 | reworded (2) | 2 | 2 (100%) |" in text
    assert "github.com/someone/demo, chats/, commit abc" in text
    assert "`python -m memstore.bench.echo_real --data exports`" in text
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    args = quality.parse_args(["--echo-real", str(bad), "--data", str(tmp_path)])
    with pytest.raises(Exception, match="bad.json: not the JSON of memstore.bench.echo_real"):
        quality.run(args)
