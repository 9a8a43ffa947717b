"""Issue 29/32: a topic tree a person can use, placed at a cost that depends on the write.

Subtree counts on every face, names that are phrases and never export artefacts or store-wide
boilerplate, a return to a subject joining its topic instead of nesting or branching, and a
placement whose work is bounded whatever the size of the tree.
"""

from __future__ import annotations

import json
import random

import numpy as np

from conftest import ct, write_turns
from memstore.format import tree as treefmt
from memstore.format.topics import Topic, Tree
from memstore.serve.web import views
from memstore.tree import naming, topicdata
from memstore.tree.render import as_json, subtree_counts
from tree_scenarios import DISTRACTORS, THESEUS, converse

ARTEFACTS = {"response", "cleared", "truncated", "bytes", "pdf", "png", "gee", "attachment"}


def _words(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = "bcdfghklmnprstvz"
    vowels = "aeiou"
    return ["".join(rng.choice(letters) + rng.choice(vowels) for _ in range(3)) for _ in range(n)]


def _sessions(store, n: int, seed: int, start_day: int = 1) -> None:
    """`n` conversations about made-up, unrelated subjects (no two share a word), one write."""
    vocab = _words(6 * n, seed)
    rows = []
    for i in range(n):
        w = vocab[6 * i : 6 * i + 6]
        ts = f"2026-{1 + (start_day + i // 28) % 12:02d}-{1 + i % 28:02d}T{i % 20:02d}:00:00Z"
        rows.append((ts, "user", f"Tell me about {w[0]} {w[1]} and {w[2]} {w[3]}.", f"s{seed}-{i}"))
        rows.append(
            (
                ts.replace(":00:00Z", ":00:30Z"),
                "assistant",
                f"{w[0]} {w[1]} {w[4]} {w[5]}.",
                f"s{seed}-{i}",
            )
        )
    write_turns(store, rows, fields=("ts", "role", "text", "session"))


# ----- 1. bounded fan-out, and counts of the whole subtree everywhere ---------------------------


def test_parents_count_every_record_under_them_on_each_face(store):
    _sessions(store, 24, seed=1)
    tree = treefmt.read(store.root)
    groups = [t for t in tree.topics.values() if not t.records]
    assert groups, "24 unrelated subjects under a fan-out of 5 need groups"
    counts = subtree_counts(tree)
    for tid in tree.topics:
        under = tree.descendants(tid) | {tid}
        assert counts[tid] == sum(len(tree.topics[d].records) for d in under)
    page = {t["id"]: t for t in views.tree(store, {})["topics"]}
    for g in groups:
        assert page[g.id]["under"] == counts[g.id] > 0 and page[g.id]["records"] == 0
    top = sum(counts[t.id] for t in tree.children(None))
    assert top == tree.record_count() == 48
    js = json.loads(ct("-C", store.root, "tree", "--json").stdout)
    assert sum(t["under"] for t in js["topics"]) == 48
    assert as_json(tree)["topics"][0]["under"] == counts[as_json(tree)["topics"][0]["id"]]


def test_fan_out_stays_bounded_over_many_writes(store):
    for k in range(6):
        _sessions(store, 8, seed=10 + k, start_day=k)
    tree = treefmt.read(store.root)
    assert max(len(kids) for kids in tree.children_map().values()) <= 5
    assert tree.record_count() == 96
    assert max(len(tree.ancestry(t)) for t in tree.topics) <= 5


# ----- 2. names are phrases, never artefacts or boilerplate ------------------------------------


def test_export_artefacts_never_name_a_topic(store):
    rows = []
    for i, (q, a) in enumerate(DISTRACTORS[:6]):
        rows.append((f"2026-11-0{i + 1}T10:00:00Z", "user", f"[Response Cleared] {q}", f"s{i}"))
        rows.append(
            (
                f"2026-11-0{i + 1}T10:01:00Z",
                "assistant",
                f"{a} [GEE export truncated: 4,096 Bytes] notes.pdf image.png attachment",
                f"s{i}",
            )
        )
    write_turns(store, rows, fields=("ts", "role", "text", "session"))
    tree = treefmt.read(store.root)
    for t in tree.topics.values():
        words = {w.lower().strip(",") for w in t.name.split()}
        assert not words & ARTEFACTS, t.name
        assert t.name != "Untitled topic"


def test_boilerplate_every_record_holds_names_nothing():
    texts = [f"Sent from my phone. {q}" for q, _ in DISTRACTORS[:3]]

    class Rarity:
        """A store of 200 records where every record says 'Sent from my phone'."""

        def store_size(self):
            return 200

        def weights(self, terms):
            return {t: 0.05 if t in {"sent", "phone"} else 0.9 for t in terms}

    name = naming.phrase_name(texts, Rarity().weights)
    assert "phone" not in name.lower() and "sent" not in name.lower()


def test_a_name_is_a_phrase_people_write():
    assert naming.offline_name(["My bike tire keeps going flat after every ride."]) == "Bike tire"
    name = naming.offline_name(
        [
            "How long should I knead sourdough bread dough?",
            "Knead sourdough bread dough for ten minutes.",
        ]
    )
    assert "sourdough bread" in name.lower() and "," not in name


# ----- 3. fewer topics, nothing unrelated nested ------------------------------------------------


def test_a_return_to_a_subject_joins_its_topic(store):
    def interleave(main, noise):
        return [x for i, ex in enumerate(main) for x in (ex, noise[i % len(noise)])]

    ids = converse(store, interleave(THESEUS, DISTRACTORS))
    tree = treefmt.read(store.root)
    owner = tree.topic_of()
    theseus = {owner[pair[0]] for pair in ids[0:20:2]}
    assert len(theseus) <= 2, "returns to the Ship of Theseus join its topic"
    real = [t for t in tree.topics.values() if t.records]
    assert len(real) <= 14  # was one topic per return: 20 or more


def test_unrelated_subjects_never_nest_under_each_other(store):
    _sessions(store, 30, seed=3)
    tree = treefmt.read(store.root)
    for t in tree.topics.values():
        if t.records and t.parent is not None:
            assert not tree.topics[t.parent].records, f"{t.name} nested under a real topic"


# ----- 4. placement work bounded by the write, not the tree -------------------------------------


def test_a_group_vector_reads_a_bounded_sample(store):
    class Data:
        def __init__(self):
            self.reads = 0

        def centroid(self, rids, last=None):
            pick = rids[-last:] if last else rids
            self.reads += len(pick)
            return np.ones(4, np.float32) / 2

        def tail_centroid(self, rids, last):
            return self.centroid(rids, last)

    def tree_of(n):
        tree = Tree()
        tree.topics["g"] = Topic("g", "group", records=[])
        for i in range(n):
            tree.topics[f"t{i}"] = Topic(
                f"t{i}", f"t{i}", parent="g", records=[f"r{i}-{j}" for j in range(50)]
            )
        return tree

    small, big = Data(), Data()
    topicdata.topic_vector(tree_of(20), small, "g", {})
    topicdata.topic_vector(tree_of(400), big, "g", {})
    assert big.reads == small.reads <= topicdata.GROUP_SAMPLE * topicdata.TOPIC_RECORDS


def test_a_one_turn_write_reads_as_much_with_ten_times_the_tree(tmp_path):
    from conftest import make_store

    reads = {}
    for n in (20, 200):
        st = make_store(tmp_path / f"s{n}")
        _sessions(st, n, seed=n)
        before = topicdata.STATS["vectors"]
        write_turns(
            st,
            [("2027-06-01T10:00:00Z", "user", "How do I repot a fiddle leaf fig?", "new")],
            fields=("ts", "role", "text", "session"),
        )
        reads[n] = topicdata.STATS["vectors"] - before
    # a beam descent: the work grows with the depth (the logarithm), not with the topics
    assert reads[200] <= 1500, reads


def test_a_group_opens_on_the_records_under_it(store):
    from memstore.serve.web import views

    _sessions(store, 24, seed=5)
    tree = treefmt.read(store.root)
    group = next(t for t in tree.topics.values() if not t.records)
    counts = subtree_counts(tree)
    own = views.topic(store, {"id": group.id, "offset": 0, "limit": 500})
    assert own["total"] == 0 and own["records"] == []
    out = views.topic(store, {"id": group.id, "offset": 0, "limit": 500, "under": True})
    assert out["total"] == counts[group.id] == len(out["records"]) > 0
    under = {r for d in tree.descendants(group.id) for r in tree.topics[d].records}
    assert {r["id"] for r in out["records"]} == under
    times = [r["ts"] for r in out["records"]]
    assert times == sorted(times)


def test_the_topic_bench_measures_an_existing_stores_tree(store):
    """`python -m memstore.bench.topics --store DIR`: a real export's tree, each conversation a
    session; every placed turn counted once, purity and spread read from the tree as written."""
    from memstore.bench.topics import main

    converse(store, THESEUS[:3] + DISTRACTORS[:3])
    out = store.root.parent / "figures.json"
    assert main(["--store", str(store.root), "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    placed = treefmt.read(store.root).topic_of()
    assert got["records"] == len(placed) and got["topics"] >= 1
    assert 0 < got["purity"] <= 1 and got["topics_per_session"] >= 1


def test_a_group_whose_member_has_no_texts_is_named_from_that_members_new_name(store, monkeypatch):
    """A write names its topics and its groups in one pass; a group's member without texts stands
    in by its name, and that name is the one this write just gave it (as when groups were named
    after their members), never the member's name from before."""
    from memstore.tree import fanout
    from memstore.tree.assign import Placer

    _sessions(store, 4, seed=5)
    tree = treefmt.read(store.root)
    placer = Placer(store, tree, topicdata.RecordData(store))
    a, b = sorted((t for t in tree.topics.values() if t.records), key=lambda t: t.id)[:2]
    gid = fanout._make_group(tree, placer.data, None, [a, b], None, placer.kids, placer.unnamed)
    real = placer.data.texts
    monkeypatch.setattr(  # the members' records are read for their own names, not the group's
        placer.data,
        "texts",
        lambda rids, limit=None: ([], []) if limit else real(rids, limit),
    )
    before = a.name
    job = (a.id, ["Quasar telemetry calibration drifts"], ["user"], "texts", True)
    placer._name_offline([job], None)
    assert a.name != before and "Quasar" in a.name
    texts = [a.name, b.name]
    assert tree.topics[gid].name == naming.offline_name(
        texts, placer.data.rarity, fallback=fanout.GROUP
    )
    assert tree.topics[gid].summary == fanout.group_summary(
        sorted([a, b], key=lambda t: (t.created, t.id))
    )


def test_a_big_write_names_each_group_once_from_the_members_it_ended_with(store, monkeypatch):
    from memstore.tree import fanout

    calls = []
    real = fanout.group_texts  # what every group's naming reads, once per name

    def counted(tree, members, data, kids=None, stand_ins=None):
        calls.append(len(members))
        return real(tree, members, data, kids, stand_ins)

    monkeypatch.setattr(fanout, "group_texts", counted)
    _sessions(store, 120, seed=3)
    tree = treefmt.read(store.root)
    cmap = tree.children_map()
    groups = [t for t in tree.topics.values() if not t.records and cmap.get(t.id)]
    assert len(groups) >= 10
    # one name per group, made when the regrouping is done: none for a split that a later one undid
    assert len(calls) <= len(groups)
    for g in groups:
        assert g.summary.startswith(f"{len(cmap[g.id])} related topics: "), g.summary
        # the names its members ended with, nested groups' too (never a placeholder of the write)
        members = sorted(cmap[g.id], key=lambda t: (t.created, t.id))
        assert g.summary == fanout.group_summary(members), g.summary


def test_the_topic_bench_times_ct_add_on_copies_of_stores(tmp_path):
    """`python -m memstore.bench.topics --ct-add A,B`: real `ct add` processes on copies (the
    stores measured are left as they were), interleaved, with wall and CPU medians and ratios."""
    from conftest import make_store, git_clean
    from memstore.bench.topics import main

    roots = []
    for n in (4, 12):
        st = make_store(tmp_path / f"s{n}")
        _sessions(st, n, seed=n)
        roots.append(st.root)
    heads = [(r / ".git" / "HEAD").read_text() for r in roots]
    logs = [sorted(p.name for p in (r / "log").rglob("*.jsonl")) for r in roots]
    out = tmp_path / "add.json"
    argv = ["--data", str(tmp_path / "none"), "--runs", "2", "--out", str(out)]
    assert main(["--ct-add", ",".join(map(str, roots)), *argv]) == 0
    got = json.loads(out.read_text())
    assert [row["placed"] for row in got["rows"]] == [8 + 3, 24 + 3]  # a warm-up and 2 timed adds
    assert all(len(row["wall_samples"]) == 2 and row["cpu_s"] > 0 for row in got["rows"])
    assert got["cpu_ratio"] == got["rows"][1]["cpu_s"] / got["rows"][0]["cpu_s"]
    for r, head, names in zip(roots, heads, logs):
        assert (r / ".git" / "HEAD").read_text() == head and git_clean(r)
        assert sorted(p.name for p in (r / "log").rglob("*.jsonl")) == names


def test_the_topic_bench_times_another_checkout_in_turn(tmp_path):
    """`--against DIR`: each add is also made by the memstore in DIR (its own process, its own
    folder, so `python -m` finds that code first), on its own copy of the same store."""
    import shutil
    from pathlib import Path

    from conftest import make_store
    from memstore.bench.topics import main

    st = make_store(tmp_path / "s")
    _sessions(st, 4, seed=4)
    other = tmp_path / "other"
    shutil.copytree(
        Path(__file__).resolve().parent.parent / "memstore",
        other / "memstore",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    with open(other / "memstore" / "__init__.py", "a") as fh:  # each process of that code says so
        fh.write("\nopen(__file__ + '.ran', 'a').write('x')\n")
    out = tmp_path / "add.json"
    argv = ["--data", str(tmp_path / "none"), "--runs", "2", "--out", str(out)]
    assert main(["--ct-add", str(st.root), "--against", str(other), *argv]) == 0
    got = json.loads(out.read_text())
    assert (other / "memstore" / "__init__.py.ran").read_text() == "xxx"  # a warm-up, 2 timed
    assert got["against"]["rows"][0]["code"] == str(other.resolve())
    assert got["rows"][0]["placed"] == got["against"]["rows"][0]["placed"] == 8 + 3


def test_a_one_turn_write_reads_its_topics_vectors_in_a_batch(tmp_path, monkeypatch):
    """A few turns' write reads the stored vectors of the topics it looks at (the ancestry, the top
    level and a few records under each) in one batch, not one exact read per topic."""
    from conftest import make_store

    from memstore.index import exact

    calls = []
    real = exact.rows

    def counted(index, vrows, *a, **k):
        calls.append(len(vrows))
        return real(index, vrows, *a, **k)

    st = make_store(tmp_path / "s")
    _sessions(st, 60, seed=3)
    st.index()
    monkeypatch.setattr(exact, "rows", counted)
    write_turns(
        st,
        [("2027-06-01T10:00:00Z", "user", "How do I repot a fiddle leaf fig?", "new")],
        fields=("ts", "role", "text", "session"),
    )
    assert calls and max(calls) >= 40, calls  # the batch
    # 47 reads without it on four such stores (one per topic looked at), 14-24 with it
    assert len(calls) <= 32, calls


def test_a_small_write_names_its_topics_without_walking_the_whole_tree(store, monkeypatch):
    """The tree's order (members before their group) only matters where the naming is shared by
    two processes; a one-turn write into a big store must not read every topic for it."""
    from memstore.tree import fanout

    _sessions(store, 40, seed=9)
    walks = []
    real = fanout.Kids.post_order
    monkeypatch.setattr(fanout.Kids, "post_order", lambda self: walks.append(1) or real(self))
    write_turns(
        store,
        [("2026-12-01T10:00:00Z", "user", "A new question about quasar telemetry drift.", "new")],
        fields=("ts", "role", "text", "session"),
    )
    assert walks == []
    assert "Quasar" in " ".join(t.name for t in treefmt.read(store.root).topics.values())


def test_steering_an_assistant_names_no_topic(store):
    """ "continue" is how people steer an agent (a third of one real export's user turns): it names
    nothing, the subject does."""
    rows = []
    for s, subject in enumerate(("wetland seep mapping", "glacier velocity radar")):
        for i in range(6):
            ts = f"2026-04-0{s + 1}T10:{i:02d}:00Z"
            if i % 2:
                rows.append((ts, "assistant", f"Here is more on {subject} step {i}.", f"c{s}"))
            else:
                rows.append((ts, "user", "continue" if i else f"Help me with {subject}.", f"c{s}"))
    rows += [(f"2026-04-03T10:0{i}:00Z", "user", "Continue", "c2") for i in range(3)]
    write_turns(store, rows, fields=("ts", "role", "text", "session"))
    tree = treefmt.read(store.root)
    names = [t.name + " " + t.summary for t in tree.topics.values()]
    assert names and not any("continue" in n.lower() for n in names), names
    assert any("wetland" in n.lower() for n in names) and any("glacier" in n.lower() for n in names)
