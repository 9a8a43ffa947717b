"""Answers before their questions (issue 29): a hit that only asks ranks right below the reply that answered it."""

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


def test_an_answer_below_k_comes_with_its_question_as_one_exchange(store):
    write_turns(store, BUDGET)
    answer = next(h for h in store.search(ANSWER, k=10, mode="exact") if h.text == ANSWER)
    hits = store.search(QUESTION, k=1, mode="exact")
    # the k hits stay the ones that matched (none pushed out); the question carries its answer
    assert _texts(hits) == [QUESTION] and "answered_by" not in hits[0].parts
    reply = hits[0].parts["answer"]
    assert reply["id"] == answer.id and reply["text"] == ANSWER and reply["role"] == answer.role
    lines = ct("-C", store.root, "search", QUESTION, "-k", "1").stdout.splitlines()
    assert (
        lines[1].strip() == QUESTION and lines[2].strip() == f"answered ({answer.role}): {ANSWER}"
    )


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
