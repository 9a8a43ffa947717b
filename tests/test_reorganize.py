"""ct reorganize and ct diff: the four axioms, the drift veto, Ship of Theseus, trivial turns, one commit."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import commits, ct, git_clean, make_store
from memstore.format import tree as treefmt
from memstore.retrieve.search import search
from memstore.retrieve.context import build_context
from memstore.tree.reorganize import reorganize
from tree_scenarios import branchy, CODE, DISTRACTORS, SNAKE, THESEUS, converse, filler, subject_of


def shown(hits) -> set[str]:
    """The records a search shows: each hit, and a question shown under the answer that took its
    slot (memstore/retrieve/answers.py)."""
    return {h.id for h in hits} | {
        h.parts["question"]["id"] for h in hits if isinstance(h.parts.get("question"), dict)
    }


def _interleave(main, noise):
    out = []
    for i, ex in enumerate(main):
        out.append(ex)
        out.append(noise[i % len(noise)])
    return out


def test_ship_of_theseus_is_consolidated_in_one_commit(tmp_path):
    st = branchy(make_store(tmp_path / "s"))
    ids = converse(
        st,
        _interleave(THESEUS, DISTRACTORS)
        + [
            (
                "Final unrelated question about knitting wool socks.",
                "Use merino wool and a 2.5 mm needle for socks.",
            )
        ],
    )
    before = treefmt.read(st.root)
    owner = before.topic_of()
    theseus_ids = [pair[0] for pair in ids[0:20:2]]
    assert len({owner[i] for i in theseus_ids}) >= 8, "one branch per return to the subject"
    n_commits = len(commits(st.root))
    res = reorganize(st, threshold=0.3)
    after = treefmt.read(st.root)
    owner = after.topic_of()
    assert len({owner[i] for i in theseus_ids}) == 1
    assert len(commits(st.root)) == n_commits + 1 and git_clean(st.root)
    assert commits(st.root)[0].startswith(f"Reorganize topics: merge {len(res.merges)}")
    # the older topic absorbed the newer ones (axiom 1)
    keeper = owner[theseus_ids[0]]
    assert keeper == before.topic_of()[theseus_ids[0]]
    # every merged line is still found by search and by context
    for rid in theseus_ids:
        text = st.index().record_at(
            st.index().conn.execute("SELECT rowid FROM records WHERE id=?", (rid,)).fetchone()[0]
        )["text"]
        assert rid in shown(search(st, text, k=5))
    ctx = build_context(st, "Ship of Theseus planks identity", recent=0)
    assert keeper in {p["path"][-1]["id"] for p in ctx.sections["topics"]}
    # ct diff explains it
    out = ct("-C", st.root, "diff", "HEAD~1").stdout
    branches = len({before.topic_of()[i] for i in theseus_ids})
    merged_lines = [line for line in out.splitlines() if line.startswith("  merged ")]
    assert len(merged_lines) == len(res.merges) == branches - 1 and "Theseus" in out
    js = json.loads(ct("-C", st.root, "diff", "HEAD~1", "HEAD", "--json").stdout)
    assert {m["into"] for m in js["merged"]} == {keeper}


def test_semantic_drift_veto_keeps_python_snake_and_language_apart(tmp_path):
    st = branchy(make_store(tmp_path / "s"))
    ids = converse(
        st,
        [
            SNAKE[0],
            DISTRACTORS[0],
            CODE[0],
            DISTRACTORS[1],
            SNAKE[1],
            DISTRACTORS[2],
            CODE[1],
            DISTRACTORS[3],
        ],
    )
    owner = treefmt.read(st.root).topic_of()
    snake = {owner[ids[0][0]], owner[ids[4][0]]}
    code = {owner[ids[2][0]], owner[ids[6][0]]}
    assert not snake & code
    res = reorganize(
        st, threshold=0.0
    )  # let every pair through the similarity gate: only the veto decides
    after = treefmt.read(st.root).topic_of()
    assert after[ids[0][0]] == after[ids[4][0]], "the two snake branches merge"
    assert after[ids[2][0]] == after[ids[6][0]], "the two code branches merge"
    assert after[ids[0][0]] != after[ids[2][0]], "snake and language never merge"
    assert any("python" in v["reason"] for v in res.vetoed)
    assert res.veto == "offline"


def test_only_frozen_topics_move_and_dry_run_changes_nothing(tmp_path):
    st = make_store(tmp_path / "s")
    converse(st, [THESEUS[0], DISTRACTORS[0], THESEUS[1]])
    tree = treefmt.read(st.root)
    live = tree.live_path()
    head = st.git.head()
    plan = reorganize(st, threshold=0.3, dry_run=True)
    assert st.git.head() == head and git_clean(st.root) and plan.dry_run
    reorganize(st, threshold=0.3)
    after = treefmt.read(st.root)
    assert live <= set(after.topics), "the live path is never merged away"
    assert after.current == tree.current


def test_prune_trivial_archives_in_the_tree_only(tmp_path):
    st = make_store(tmp_path / "s")
    ids = converse(
        st,
        [
            DISTRACTORS[0],
            ("ok thanks", "You're welcome!"),
            ("Sarah is allergic to peanuts.", "Noted."),
            DISTRACTORS[1],
            DISTRACTORS[2],
        ],
    )
    proc = ct("-C", st.root, "reorganize", "--prune-trivial", "--threshold", "0.99")
    assert "archive 2 trivial turns" in proc.stdout
    tree = treefmt.read(st.root)
    assert set(ids[1]) <= set(tree.archived)
    assert ids[2][0] in tree.topic_of(), "a short fact is not small talk"
    assert {ids[1][0]} <= {h.id for h in search(st, "ok thanks", k=5)}, (
        "archived turns stay in the index"
    )
    assert "archived 2 trivial turns" in ct("-C", st.root, "diff", "HEAD~1").stdout
    assert git_clean(st.root)


def test_a_few_hundred_turns_acceptance(tmp_path):
    st = branchy(make_store(tmp_path / "s"))
    converse(
        st,
        filler(160, seed=3) + [("Final question about knitting wool socks.", "Use merino wool.")],
        batch=40,
    )
    before = treefmt.read(st.root)
    n = len(commits(st.root))
    out = json.loads(ct("-C", st.root, "reorganize", "--json").stdout)  # default threshold 0.55
    assert out["merged"] > 0 and len(commits(st.root)) == n + 1 and git_clean(st.root)
    assert f"merge {out['merged']}" in commits(st.root)[0]
    diff = json.loads(ct("-C", st.root, "diff", "HEAD~1", "--json").stdout)
    assert len(diff["merged"]) == out["merged"]
    after = treefmt.read(st.root)
    owner = after.topic_of()
    assert sorted(owner) == sorted(before.topic_of()), "no record left the tree"
    for m in diff["merged"]:
        for rid in before.topics[m["id"]].records[:2]:
            assert owner[rid] == m.get("now_in", m["into"])
            row = (
                st.index()
                .conn.execute("SELECT rowid FROM records WHERE id=?", (rid,))
                .fetchone()[0]
            )
            text = st.index().record_at(row)["text"]
            assert rid in shown(search(st, text, k=10))
            ctx = build_context(st, text, recent=0)
            assert text in {h["text"] for h in ctx.sections["recall"]}
            assert owner[rid] in {n["id"] for p in ctx.sections["topics"] for n in p["path"]}
    first = before.topics[diff["merged"][0]["id"]].records[0]
    row = st.index().conn.execute("SELECT rowid FROM records WHERE id=?", (first,)).fetchone()[0]
    text = st.index().record_at(row)["text"]
    hits = json.loads(
        ct("-C", st.root, "context", text, "--json", "--recent", "0", "--budget", "800").stdout
    )
    assert text in {h["text"] for h in hits["sections"]["recall"]} and hits["tokens"] <= 800

    # merges join branches of the same subject (the filler has eight), not just any two topics
    def subject(topic):
        found = Counter()
        for rid in topic.records:
            row = (
                st.index()
                .conn.execute("SELECT rowid FROM records WHERE id=?", (rid,))
                .fetchone()[0]
            )
            found[subject_of(st.index().record_at(row)["text"])] += 1
        return found.most_common(1)[0][0]

    crossed = [
        m
        for m in out["merges"]
        if subject(before.topics[m["older"]]) != subject(before.topics[m["newer"]])
    ]
    assert len(crossed) <= max(1, len(out["merges"]) // 50)
    assert (
        len([t for t in after.topics.values() if t.records])
        < len([t for t in before.topics.values() if t.records]) / 2
    )


def test_diff_bad_revision_is_a_usage_error(store):
    proc = ct("-C", store.root, "diff", "nope~3", check=False)
    assert proc.returncode == 2 and "not a revision" in proc.stderr


@pytest.mark.model
def test_drift_veto_with_the_real_model(tmp_path):
    """With real semantics the snake/language pair clears a realistic threshold; the veto still holds."""
    st = make_store(tmp_path / "s", embedder="minilm")
    ids = converse(
        st, [SNAKE[0], DISTRACTORS[0], CODE[0], DISTRACTORS[1], SNAKE[1], DISTRACTORS[2]]
    )
    res = reorganize(st, threshold=0.2)
    after = treefmt.read(st.root).topic_of()
    assert after[ids[0][0]] == after[ids[4][0]]
    assert after[ids[0][0]] != after[ids[2][0]]
    assert res.pairs >= 1
