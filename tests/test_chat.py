"""LLM paths with the real `openai` client against the loopback server: chat, topic naming, the veto."""

from __future__ import annotations

import json

from conftest import commits, ct, git_clean, make_store
from conftest_openai import openai_server  # noqa: F401  (fixture)
from memstore.format import tree as treefmt
from memstore.tree.reorganize import reorganize
from tree_scenarios import (
    branchy,
    DISTRACTORS,
    SARAH_ALLERGY,
    SARAH_CAKE,
    THESEUS,
    WEATHER,
    converse,
)

CHAT = "/v1/chat/completions"


def _records(st):
    st.index()
    rows = st.index().conn.execute("SELECT rowid FROM records ORDER BY ts, rowid").fetchall()
    return [st.index().record_at(r[0]) for r in rows]


def test_chat_once_answers_from_memory_and_stores_both_turns(tmp_path, openai_server):
    st = make_store(tmp_path / "s")
    converse(st, [SARAH_ALLERGY, *WEATHER])
    openai_server.replies = ["A vanilla sponge cake, with no peanuts because of Sarah's allergy."]
    n = len(commits(st.root))
    out = ct(
        "-C",
        st.root,
        "chat",
        "--once",
        "Which cake should I bake for Sarah?",
        "--session",
        "kitchen",
    ).stdout
    assert "vanilla sponge" in out
    prompt = openai_server.bodies(CHAT)[0]["messages"]
    assert SARAH_ALLERGY[0] in prompt[0]["content"], "the allergy line reaches the model as context"
    assert prompt[-1] == {"role": "user", "content": "Which cake should I bake for Sarah?"}
    recs = _records(st)[-2:]
    assert [r["role"] for r in recs] == ["user", "assistant"] and recs[1]["text"].startswith(
        "A vanilla sponge"
    )
    assert recs[1]["model"] and all(r["session"] == "kitchen" for r in recs)
    assert {r["id"] for r in recs} <= set(treefmt.read(st.root).topic_of())
    assert len(commits(st.root)) == n + 1 and git_clean(st.root)


def test_chat_failure_stores_no_error_text(tmp_path, openai_server):
    st = make_store(tmp_path / "s")
    openai_server.fail_next(500, times=5)
    proc = ct("-C", st.root, "chat", "--once", "Hello, are you there today?", check=False)
    assert (
        proc.returncode == 1 and "failed" in proc.stderr and "no answer was stored" in proc.stderr
    )
    recs = _records(st)
    assert [r["role"] for r in recs] == ["user"]
    assert git_clean(st.root)


def test_chat_repl_history_and_verbose_debug_files(tmp_path, openai_server):
    st = make_store(tmp_path / "s")
    openai_server.replies = [
        "First answer about the lake cabin.",
        "Second answer, remembering the first.",
    ]
    proc = ct(
        "-C",
        st.root,
        "chat",
        "--verbose",
        input="Tell me about the lake cabin trip\nAnd what else?\n\n",
    )
    assert "First answer" in proc.stdout and "Second answer" in proc.stdout
    second = openai_server.bodies(CHAT)[1]["messages"]
    assert {"role": "assistant", "content": "First answer about the lake cabin."} in second
    debug = sorted((st.root / ".memstore" / "chat-debug").iterdir())
    assert len(debug) == 6 and any(p.name.endswith("-prompt.json") for p in debug)
    assert json.loads(next(p for p in debug if p.name.endswith("-prompt.json")).read_text())[
        "messages"
    ]
    assert len(_records(st)) == 4 and git_clean(st.root)


def test_chat_without_an_endpoint_says_what_to_set(store, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    proc = ct(
        "-C",
        store.root,
        "chat",
        "--once",
        "hi",
        check=False,
        env={"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""},
    )
    assert proc.returncode == 1 and "OPENAI_BASE_URL" in proc.stderr
    assert git_clean(store.root) and len(commits(store.root)) == 1


def _topic_llm(body):
    prompt = body["messages"][-1]["content"]
    if "belongs_to_current" in prompt:
        cont = "umbrella" in prompt
        return (
            'Sure! Here is my answer:\n```json\n{"belongs_to_current": %s, "new_topic_name": "Boston Weather", '
            '"new_topic_parent_index": N/A,}\n```' % ("True" if cont else "False")
        )
    if "topic name" in prompt:
        return "Topic: Peanut Allergy Care"
    return "A short summary of the segment."


def test_llm_names_and_classifies_when_opted_in(tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("MEMSTORE_LLM_TOPICS", "1")
    openai_server.replies = _topic_llm
    st = make_store(tmp_path / "s")
    ids = converse(st, [SARAH_ALLERGY, *WEATHER], batch=1)
    tree = treefmt.read(st.root)
    owner = tree.topic_of()
    first, weather = tree.topics[owner[ids[0][0]]], tree.topics[owner[ids[1][0]]]
    assert first.name == "Peanut Allergy Care" and first.named_by == "llm"
    assert weather.name == "Boston Weather" and owner[ids[2][0]] == weather.id
    assert openai_server.bodies(CHAT), "the real openai client made the calls"


def test_llm_failures_fall_back_offline_and_never_store_error(tmp_path, openai_server, monkeypatch):
    monkeypatch.setenv("MEMSTORE_LLM_TOPICS", "1")
    openai_server.replies = lambda body: "Error"
    st = make_store(tmp_path / "s")
    converse(st, [SARAH_ALLERGY, *WEATHER, SARAH_CAKE], batch=1)
    openai_server.fail_next(503, times=50)
    converse(st, [DISTRACTORS[0]], start="2026-11-02T09:00:00", batch=1)
    tree = treefmt.read(st.root)
    for t in tree.topics.values():
        assert "error" not in t.name.lower() and "error" not in t.summary.lower()
        assert t.named_by == "offline"
    assert tree.record_count() == 10 and git_clean(st.root)


def test_reorganize_llm_veto_and_fallback(tmp_path, openai_server):
    st = branchy(make_store(tmp_path / "s"))
    converse(
        st, [THESEUS[0], DISTRACTORS[0], THESEUS[1], DISTRACTORS[1], THESEUS[2], DISTRACTORS[2]]
    )
    openai_server.replies = lambda body: (
        '{"related": false, "reason": "the scripted model says no"}'
    )
    res = reorganize(st, threshold=0.3, dry_run=True)
    assert res.veto == "llm" and not res.merges and res.vetoed
    assert all(v["by"] == "llm" and v["reason"] == "the scripted model says no" for v in res.vetoed)
    openai_server.replies = lambda body: "I think they are related, not sure how to format that."
    res = reorganize(st, threshold=0.3)
    assert res.merges and all(m["by"] == "offline (llm failed)" for m in res.merges)
    assert commits(st.root)[0].startswith("Reorganize topics: merge") and git_clean(st.root)


def test_a_model_reply_holding_a_lone_surrogate_is_kept_as_a_replacement_character(
    tmp_path, openai_server, monkeypatch
):
    """A reply is data from a stranger: half an emoji (a lone UTF-16 surrogate, which JSON can
    carry as an escape) in a name or summary once made every write's tree update fail ("topic tree
    not updated": UTF-8 cannot hold it). It is kept as U+FFFD; the tree is written."""
    monkeypatch.setenv("MEMSTORE_LLM_TOPICS", "1")
    openai_server.replies = lambda body: (
        '{"belongs_to_current": false, "new_topic_name": "Quasar \\ud800 drift",'
        ' "new_topic_parent_index": 0}'
        if "JSON" in str(body)
        else "Quasar \udc80 talk about telemetry"
    )
    st = make_store(tmp_path / "s")
    for i in range(3):
        out = ct(
            "-C",
            st.root,
            "add",
            "--session",
            f"s{i}",
            "--ts",
            f"2026-01-01T10:0{i}:00Z",
            f"quasar telemetry drift number {i} today",
        )
        assert out.returncode == 0 and "not updated" not in out.stderr, out.stderr
    tree = treefmt.read(st.root)
    texts = [t.name + t.summary for t in tree.topics.values()]
    assert tree.record_count() == 3 and any("\ufffd" in x for x in texts)
    assert all(x.encode("utf-8") for x in texts) and git_clean(st.root)


def test_a_veto_reason_is_kept_storable_and_scrubbed(tmp_path, openai_server):
    st = branchy(make_store(tmp_path / "s"))
    converse(st, [THESEUS[0], DISTRACTORS[0], THESEUS[1], DISTRACTORS[1]])
    token = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Y"
    openai_server.replies = lambda body: json.dumps(
        {"related": False, "reason": f"no \ud800 {token}"}
    )
    res = reorganize(st, threshold=0.3, dry_run=True)
    assert res.vetoed and all(v["by"] == "llm" for v in res.vetoed)
    for v in res.vetoed:
        assert "\ufffd" in v["reason"] and token not in v["reason"], v["reason"]
        v["reason"].encode("utf-8")


def test_a_chat_answer_holding_a_lone_surrogate_is_stored_with_its_question(
    tmp_path, openai_server
):
    """The model's answer is someone else's words: half an emoji in it must not lose the exchange
    (the user's own text with one is refused, naming where)."""
    st = make_store(tmp_path / "s")
    openai_server.replies = ["A lemon cake \udc80 with sprinkles for the party."]
    out = ct("-C", st.root, "chat", "--once", "Which cake should I bake for the party?").stdout
    assert "lemon cake" in out
    recs = _records(st)[-2:]
    assert [r["role"] for r in recs] == ["user", "assistant"]
    assert recs[1]["text"] == "A lemon cake \ufffd with sprinkles for the party."
    assert git_clean(st.root)
