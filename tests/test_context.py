"""ct context: cross-branch synthesis, the newer fact, a needle in 200 messages, and a budget that holds."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st_

from conftest import ct, make_store
from memstore.format import tree as treefmt
from memstore.retrieve.context import build_context
from tree_scenarios import (
    branchy,
    BIKE,
    NEEDLE,
    NUTS_NOW,
    SARAH_ALLERGY,
    SARAH_CAKE,
    SARAH_SCENARIO,
    SARAH_THAI,
    WEATHER,
    WINDY,
    converse,
    filler,
)


@pytest.fixture(scope="module")
def sarah(tmp_path_factory):
    st = branchy(make_store(tmp_path_factory.mktemp("sarah") / "s"))
    ids = converse(st, SARAH_SCENARIO, batch=1)
    return st, dict(zip(SARAH_SCENARIO, ids))


def _topics_in(ctx) -> set[str]:
    return {p["path"][-1]["id"] for p in ctx.sections["topics"]}


def test_cross_branch_synthesis_surfaces_the_three_sarah_branches(sarah):
    st, ids = sarah
    tree = treefmt.read(st.root)
    owner = tree.topic_of()
    sarah_topics = {owner[ids[x][0]] for x in (SARAH_ALLERGY, SARAH_CAKE, SARAH_THAI)}
    noise_topics = {owner[ids[x][0]] for x in (*WEATHER, *BIKE, *WINDY)}
    assert len(sarah_topics) == 3 and not sarah_topics & noise_topics, (
        "three separate Sarah branches"
    )
    ctx = build_context(st, "What cake should I bake for Sarah's party?", recent=0)
    assert _topics_in(ctx) == sarah_topics
    recalled = {h["text"] for h in ctx.sections["recall"]}
    assert {SARAH_ALLERGY[0], SARAH_CAKE[0], SARAH_THAI[0]} <= recalled
    noise = {t for pair in (*WEATHER, *BIKE, *WINDY) for t in pair}
    assert not recalled & noise
    assert "Boston" not in ctx.text and "tire" not in ctx.text


def test_memory_overwrite_surfaces_the_newer_fact(tmp_path):
    st = make_store(tmp_path / "s")
    converse(st, [SARAH_ALLERGY, *WEATHER, *BIKE], start="2026-10-01T09:00:00")
    converse(st, [NUTS_NOW], start="2026-11-20T09:00:00")
    ctx = build_context(st, "Can Sarah eat peanuts?")
    texts = [h["text"] for h in ctx.sections["recall"]]
    assert SARAH_ALLERGY[0] in texts and NUTS_NOW[0] in texts
    assert texts.index(NUTS_NOW[0]) > texts.index(SARAH_ALLERGY[0]), (
        "oldest first: the correction reads last"
    )
    recall_text = ctx.text[ctx.text.index("## Recalled lines") :]
    assert recall_text.index(NUTS_NOW[0]) > recall_text.index(SARAH_ALLERGY[0])
    assert "later lines are newer facts" in ctx.text


def test_needle_in_200_messages(tmp_path):
    st = make_store(tmp_path / "s")
    chat = filler(100)
    chat[57] = NEEDLE
    converse(st, chat, batch=25)
    assert st.index().stats()["records"] == 200
    ctx = build_context(st, "what is the wifi password at the lake cabin?", budget=800)
    assert NEEDLE[0] in {h["text"] for h in ctx.sections["recall"]}
    assert ctx.tokens <= 800


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    st = make_store(tmp_path_factory.mktemp("big") / "s")
    converse(st, filler(150) + [SARAH_ALLERGY, SARAH_CAKE], batch=40)
    return st


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    budget=st_.integers(min_value=1, max_value=1200),
    query=st_.sampled_from(
        [
            "espresso grinder",
            "Sarah's cake",
            "how should a beginner approach scales",
            "taxes and receipts for travel",
            "zzz nothing matches",
            "chess",
        ]
    ),
)
def test_budget_is_never_exceeded(big, budget, query):
    ctx = build_context(big, query, budget=budget)
    assert big.embedder.count_tokens(ctx.text) <= budget if ctx.text else True
    assert ctx.tokens <= budget


def test_cli_context_budget_800_and_json(big):
    out = ct(
        "-C", big.root, "context", "tips on espresso and milk frothing", "--budget", "800"
    ).stdout
    assert 0 < big.embedder.count_tokens(out) <= 800
    js = json.loads(ct("-C", big.root, "context", "espresso", "--budget", "800", "--json").stdout)
    assert set(js["sections"]) == {"markers", "topics", "recall", "recent"}
    assert js["tokens"] <= 800 and js["budget"] == 800
    recall = js["sections"]["recall"]
    assert recall and "espresso" in recall[0]["text"].lower()
    full = json.loads(ct("-C", big.root, "context", "espresso", "--json").stdout)
    assert full["tokens"] > js["tokens"] or full["dropped"] == 0
    assert len(full["sections"]["topics"]) <= 3


def test_markers_and_recent_turns_appear(store):
    converse(store, [SARAH_ALLERGY, SARAH_CAKE])
    ct("-C", store.root, "mark", "Decide on the cake recipe")
    ctx = build_context(store, "cake recipe")
    assert ctx.sections["markers"] and "Decide on the cake recipe" in ctx.text
    assert ctx.sections["recent"][-1]["text"] == SARAH_CAKE[1]
    none = build_context(store, "cake recipe", recent=0)
    assert none.sections["recent"] == []


@pytest.mark.model
def test_cross_branch_synthesis_with_the_real_model(tmp_path):
    st = make_store(tmp_path / "s", embedder="minilm")
    ids = dict(zip(SARAH_SCENARIO, converse(st, SARAH_SCENARIO, batch=10)))
    owner = treefmt.read(st.root).topic_of()
    sarah_topics = {owner[ids[x][0]] for x in (SARAH_ALLERGY, SARAH_CAKE, SARAH_THAI)}
    noise_topics = {owner[ids[x][0]] for x in (*WEATHER, *BIKE, *WINDY)}
    assert not sarah_topics & noise_topics
    ctx = build_context(st, "What cake should I bake for Sarah's party?", recent=0, budget=800)
    assert _topics_in(ctx) == sarah_topics
    recalled = {h["text"] for h in ctx.sections["recall"]}
    assert {SARAH_ALLERGY[0], SARAH_CAKE[0], SARAH_THAI[0]} <= recalled
    assert "Boston" not in ctx.text and "tire" not in ctx.text
    newer = build_context(st, "Is Sarah allergic to anything?", recent=0)
    assert SARAH_ALLERGY[0] in {h["text"] for h in newer.sections["recall"]}


def test_document_chunks_are_recalled_by_their_file(store, tmp_path):
    doc = tmp_path / "cabin.md"
    doc.write_text("# Lake cabin\n\nThe lake cabin key is under the blue flower pot by the door.\n")
    ct("-C", store.root, "ingest-path", doc)
    converse(store, [SARAH_ALLERGY])
    ctx = build_context(store, "where is the lake cabin key?", recent=0)
    assert any(h["type"] == "doc" for h in ctx.sections["recall"])
    assert "document " in ctx.text and "blue flower pot" in ctx.text
