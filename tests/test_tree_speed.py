"""What a big write's topic placement and naming cost, counted in work done (not wall time):
crowded parents are regrouped as the write goes, each topic is named once, texts without export
artefacts skip the artefact pattern, and naming gives what it always gave."""

from __future__ import annotations

import random

import pytest

from memstore.format import tree as treefmt
from memstore.tree import assign, fanout, naming

SYLLABLES = "ka lo mi ne ru sa ti vo ze bu da fe gi ho ju".split()


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(4))


def _distinct_turns(store, n: int, seed: int = 7) -> list[dict]:
    """`n` user turns, each its own session about its own made-up words: `n` new topics."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        words = " ".join(_word(rng) for _ in range(6))
        out.append(
            store.normalize(
                {
                    "ts": f"2026-11-{1 + k // 600:02d}T{(k // 60) % 10:02d}:{k % 60:02d}:00Z",
                    "role": "user",
                    "text": f"Tell me about {words}.",
                    "session": f"s{k}",
                }
            )
        )
    return out


def test_a_big_write_regroups_crowded_parents_as_it_goes(store, monkeypatch):
    """The children of one parent never pile up during a write (they would be every new topic of
    an import, and every later turn would compare itself with all of them): the topics a turn's
    placement looks at stay bounded however many topics the write makes."""
    crowd, looked = [], []
    real = assign.Placer.place

    def watched(self, rec, vec):
        tid = real(self, rec, vec)
        crowd.append(max(len(self.kids.of(p)) for p in list(self.kids.map)))
        looked.append(self.visited)
        return tid

    monkeypatch.setattr(assign.Placer, "place", watched)
    monkeypatch.setattr(assign, "REGROUP_AT", 4)  # (crowded at 21 children: a small test write)
    # Topic ids from a counter: ties between equal scores go by id, so random ids made the tree,
    # and how many topics a turn looked at, differ from run to run (81 in 2 of 25 runs).
    ids = (f"t{n:05d}" for n in range(1_000_000))
    monkeypatch.setattr(treefmt, "new_topic_id", lambda: next(ids))
    monkeypatch.setattr(fanout, "new_topic_id", lambda: next(ids))
    store.write(_distinct_turns(store, 150), "Import 150 turns")
    tree = treefmt.read(store.root)
    assert len([t for t in tree.topics.values() if t.records]) >= 120
    limit = assign.REGROUP_AT * assign.max_children(store) + 1
    assert max(crowd) <= limit, max(crowd)
    assert max(looked) <= 80, max(looked)  # ancestry, the recent topics, a bounded beam descent
    assert max(len(k) for k in tree.children_map().values()) <= assign.max_children(store)


def test_each_topic_a_write_makes_is_named_once(store, monkeypatch):
    calls = []
    real = naming.phrase_name  # (what offline_name and offline_many name a topic with)

    def counted(*a, **k):
        if k.get("fallback") != fanout.GROUP:  # a topic's name, not a group's
            calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(naming, "phrase_name", counted)
    store.write(_distinct_turns(store, 12), "Import 12 turns")
    tree = treefmt.read(store.root)
    named = [t for t in tree.topics.values() if t.records]
    assert len(named) >= 10 and len(calls) == len(named)
    assert all(t.name and t.name != assign.UNNAMED for t in named)


def test_a_long_live_topic_keeps_the_name_of_its_first_turn(store):
    """A topic still current after the write with more than RENAME_UNTIL records is not renamed by
    the write: it keeps the name its first turn gave it (named in `finish` now, not on creation)."""
    texts = SOURDOUGH
    t = _one_chat(store, texts)
    assert len(t.records) == len(texts) > assign.RENAME_UNTIL
    assert t.name == naming.offline_name([texts[0]])


SOURDOUGH = [
    "My sourdough starter smells like acetone after feeding.",
    "Should I feed the sourdough starter twice a day?",
    "The sourdough starter doubled in six hours today.",
    "How warm should the sourdough starter be kept?",
    "My sourdough loaf came out dense and gummy.",
    "Is rye flour better for a sourdough starter?",
    "The sourdough crust is too pale after baking.",
    "Can I keep the sourdough starter in the fridge?",
    "My sourdough starter has a layer of grey liquid.",
    "What hydration works for a first sourdough loaf?",
]


def _one_chat(store, texts: list[str]):
    """One write of one conversation's user turns; the topic current after it."""
    recs = [
        store.normalize(
            {"ts": f"2026-11-01T10:{k:02d}:00Z", "role": "user", "text": t, "session": "bread"}
        )
        for k, t in enumerate(texts)
    ]
    store.write(recs, "Import one chat")
    tree = treefmt.read(store.root)
    return tree.topics[tree.current]


class _Counting:
    """Stands in for the compiled artefact pattern and counts what it is asked to run on."""

    def __init__(self, pattern):
        self.pattern, self.texts = pattern, []

    def sub(self, repl, text):
        self.texts.append(text)
        return self.pattern.sub(repl, text)


def test_texts_without_artefacts_skip_the_artefact_pattern(monkeypatch):
    plain = "My bike tire keeps going flat after every ride, even at 80 psi."
    kinds = [
        "see ```print(1)``` there",
        "the `make` call",
        "[Response Cleared] ok",
        "<b>bold</b> text",
        "go to HTTP://example.org now",
        "or Www.example.org instead",
        "mail me at a@b.io please",
        "open Report.PDF today",
        "commit DEADBEEFCAFE1 is it",
        "abcdefabcdef and more",
    ]
    counting = _Counting(naming._ARTEFACT_SPANS)
    monkeypatch.setattr(naming, "_ARTEFACT_SPANS", counting)
    assert naming._clean(plain) == plain and counting.texts == []
    for text in kinds:
        assert naming._clean(text) == counting.pattern.sub(" . ", text) != text
    assert counting.texts == kinds  # every kind the pattern knows is still looked for


def test_has_words_is_the_count_of_content_words_read_no_further_than_needed():
    texts = ["", "ok", "yes please", "why the bike?", "ok ok tire", "a bike tire", "the the"]
    for text in texts:
        for n in range(4):
            assert naming.has_words(text, n) == (len(naming.words(text)) >= n), (text, n)


def test_key_terms_and_phrases_on_a_known_topic():
    """The counting moved to Counter's C loop; what a topic's texts give is what it always gave."""
    texts = [
        "My bike tire keeps going flat after every ride. The Bike shop said the tire is fine.",
        "Bike tires: check the inner tube for a thorn; a slow puncture in the tire is likely.",
        "What pressure should the bike tire have? Sarah said 80 psi.",
        "Road bike tires usually run at 80 to 100 psi; Sarah is right.",
    ]
    roles = ["user", "assistant", "user", "assistant"]
    assert naming.key_terms(texts, 4) == ["bike", "tire", "Sarah", "psi"]
    assert naming.term_set(texts, 3) == {"tire", "bike", "sarah"}
    assert naming.key_phrases(texts, 3, roles=roles) == ["bike tire", "Sarah", "psi"]
    assert naming.phrase_name(texts, roles=roles) == "Bike tire"


def test_the_build_bench_reports_its_time_in_placement(tmp_path, monkeypatch):
    """`python -m memstore.bench.topics --build N`: the import's time in topic placement and naming
    (`placing_s`) beside its end-to-end time."""
    from memstore.bench import topics as bench

    turns = [
        {
            "id": f"tm-{k:05d}",
            "ts": f"2026-11-01T10:{k:02d}:00Z",
            "role": "user" if k % 2 == 0 else "assistant",
            "actor": "user" if k % 2 == 0 else "assistant",
            "type": "text",
            "text": f"Turn {k} about the {['garden', 'bike', 'oven'][k // 10]} again.",
            "session": f"s{k // 10}",
        }
        for k in range(30)
    ]
    monkeypatch.setattr(bench, "timing_records", lambda data, n: turns[:n])
    got = bench.build(tmp_path / "none", 30, tmp_path / "built", lambda msg: None)
    assert got["records"] == 30 and got["topics"] >= 1
    assert 0 < got["placing_s"] < got["seconds"]


def test_content_words_are_the_text_modules_with_each_distinct_token_judged_once(monkeypatch):
    from memstore.text import content_words

    texts = [
        "Sarah's bike-tire isn't 'flat' -- it's the tube's valve… (CO2 cartridge?) o'clock ok",
        "The the THE bike bike, tire; tire! a an of 'em rock-'n'-roll x1 3d ÉCOLE naïve café",
    ]
    judged = []
    memo = naming._WordMemo(lambda token: judged.append(token) or naming._content_word(token))
    monkeypatch.setattr(naming, "_CONTENT_WORDS", memo)
    for text in texts * 3:
        assert naming.words(text) == content_words(text)
    assert len(judged) == len(set(judged))  # each distinct token once, however often it recurs


def test_a_write_asks_the_index_for_no_secret_verdicts_on_its_own_new_records(store, monkeypatch):
    """Naming scrubs what it reads, and asks the index which texts an earlier process found clean;
    a record this write brings cannot be among them, so its texts are not hashed and looked up."""
    from memstore.index import queries

    asked = []
    real = queries.clean_keys
    monkeypatch.setattr(
        queries, "clean_keys", lambda index, keys: asked.extend(keys) or real(index, keys)
    )
    # (--allow-secrets: the write itself scans nothing, so no verdict is known in this process)
    store.write(_distinct_turns(store, 20), "Import 20 turns", secrets="allow")
    assert asked == []
    store.write(_distinct_turns(store, 3, seed=9), "Import 3 more")  # reads stored topics' texts
    tree = treefmt.read(store.root)
    assert len(tree.topic_of()) == 23


def test_a_turn_of_a_big_write_finds_any_topic_the_write_made(store, monkeypatch):
    """A write regroups as it goes, so the topic an import made early sits in a group by the time
    a later conversation returns to its subject; the write still looks at every topic it made or
    joined (one matrix product per branching turn) and the turn joins it."""
    bike = "My bike tire keeps going flat after every ride."
    again = "What pressure should the bike tire have?"

    def turn(k, text, session):
        ts = f"2026-11-01T{k // 60:02d}:{k % 60:02d}:00Z"
        return store.normalize({"ts": ts, "role": "user", "text": text, "session": session})

    others = _distinct_turns(store, 100)
    for k, r in enumerate(others, 1):
        r["ts"] = turn(k, "x", "x")["ts"]
    recs = [turn(0, bike, "a"), *others, turn(200, again, "b")]
    monkeypatch.setattr(assign, "REGROUP_AT", 4)
    store.write(recs, "Import", secrets="allow")
    tree = treefmt.read(store.root)
    owner = tree.topic_of()
    assert owner[recs[0]["id"]] == owner[recs[-1]["id"]]
    assert tree.topics[owner[recs[0]["id"]]].parent is not None  # it was regrouped meanwhile


def test_the_topic_matrix_gives_the_closest_topics_first_from_fresh_rows():
    rng = random.Random(3)
    vecs = {f"t{i}": [rng.gauss(0, 1) for _ in range(8)] for i in range(50)}
    import numpy as np

    def vector(tid):
        v = np.asarray(vecs[tid], np.float32)
        return v / np.linalg.norm(v)

    m = assign.TopicMatrix()
    for tid in vecs:
        m.stale(tid)
    q = vector("t7")
    assert m.closest(q, 5, vector, vecs)[0][0] == "t7"
    vecs["t9"] = list(vecs["t7"])  # t9 changed (a record joined it): its row is refreshed
    m.stale("t9")
    got, every = m.closest(q, 5, vector, vecs)
    assert set(got[:2]) == {"t7", "t9"}
    brute = sorted(vecs, key=lambda t: -float(vector(t) @ q))[:5]
    assert set(got) == set(brute)
    for tid in vecs:  # every row's cosine comes back too, by the matrix's rows
        assert abs(float(every[m.rows[tid]]) - float(vector(tid) @ q)) < 1e-5


def test_products_ahead_give_each_turn_the_cosines_of_the_rows_as_they_are_then():
    """A big write ranks the topics for AHEAD turns in one product, made when the first of them
    branches; a topic refreshed or added since is ranked by what it is now, not by the block."""
    import numpy as np

    rng = np.random.default_rng(11)
    vecs: dict[str, np.ndarray] = {}

    def unit(v):
        return (v / np.linalg.norm(v)).astype(np.float32)

    def vector(tid):
        return vecs[tid]

    turns = [(f"r{i}", unit(rng.normal(size=16))) for i in range(40)]
    at = {rid: i for i, (rid, _v) in enumerate(turns)}

    def upcoming(key):
        return turns[at[key] : at[key] + 8]

    ahead, plain = assign.TopicMatrix(), assign.TopicMatrix()
    for i in range(30):
        vecs[f"t{i}"] = unit(rng.normal(size=16))
        ahead.stale(f"t{i}")
        plain.stale(f"t{i}")
    blocks = 0
    for n, (rid, q) in enumerate(turns):
        if n % 3 == 1:  # a record joined a topic: its vector moved
            tid = f"t{int(rng.integers(0, len(vecs)))}"
            vecs[tid] = unit(vecs[tid] + rng.normal(size=16))
            ahead.stale(tid)
            plain.stale(tid)
        if n % 4 == 2:  # a new topic
            tid = f"t{len(vecs)}"
            vecs[tid] = unit(q + 0.1 * rng.normal(size=16))
            ahead.stale(tid)
            plain.stale(tid)
        had = ahead.cols
        got, every = ahead.closest(q, 5, vector, vecs, rid, upcoming)
        blocks += ahead.cols is not had
        want, brute = plain.closest(q, 5, vector, vecs)
        assert got == want, n
        assert np.allclose(every, brute, atol=1e-6), n
        for tid, row in ahead.rows.items():
            assert abs(float(every[row]) - float(vecs[tid] @ q)) < 1e-5, (n, tid)
    assert blocks == 5  # one product per 8 turns


def test_products_ahead_are_of_the_turns_that_open_another_conversation(store):
    """A big write's products ahead are of its user turns that follow a record of another
    conversation (they branch); a turn of the same conversation that branches is ranked by a
    product of its own, and the block made for the others is kept for them."""
    import numpy as np

    from memstore.format.topics import Tree
    from memstore.tree.topicdata import RecordData

    placer = assign.Placer(store, Tree(), RecordData(store))
    placer.last_session = "a"
    recs = [
        {"id": "u1", "role": "user", "session": "a"},  # (the conversation placed last)
        {"id": "a1", "role": "assistant", "session": "a"},
        {"id": "u2", "role": "user", "session": "b"},
        {"id": "a2", "role": "assistant", "session": "b"},
        {"id": "u3", "role": "user", "session": "b"},
        {"id": "u4", "role": "user", "session": "c"},
        {"id": "a4", "role": "assistant", "session": "d"},
        {"id": "u5", "role": "user", "session": "d"},
        {"id": "u6", "role": "user", "session": None},
    ]
    rng = np.random.default_rng(5)
    vecs = [rng.normal(size=8).astype(np.float32) for _ in recs]
    placer.ahead(recs, vecs)
    assert [rid for rid, _v in placer.upcoming] == ["u2", "u4", "u6"]

    m = assign.TopicMatrix()
    topics = {f"t{i}": rng.normal(size=8).astype(np.float32) for i in range(6)}
    for tid in topics:
        m.stale(tid)
    m.closest(vecs[2], 3, topics.get, topics, "u2", placer._upcoming)
    block = m.cols
    _got, every = m.closest(vecs[4], 3, topics.get, topics, "u3", placer._upcoming)
    assert m.cols is block  # (u3 is not among them: its own product, the block kept for u4)
    assert np.allclose(every, np.stack(list(topics.values())) @ vecs[4], atol=1e-6)
    m.closest(vecs[5], 3, topics.get, topics, "u4", placer._upcoming)
    assert m.cols is block


@pytest.mark.parametrize("how", ["c", "numpy"])
def test_the_closest_rows_are_the_k_largest_with_ties_to_the_lower_row(how, monkeypatch):
    import numpy as np

    if how == "c" and assign._top_rows_c is None:
        pytest.skip("memstore/tree/_words.c is not built here")
    if how == "numpy":
        monkeypatch.setattr(assign, "_top_rows_c", None)
    rng = np.random.default_rng(5)
    for trial in range(600):
        n, k = int(rng.integers(0, 3000)), int(rng.integers(1, 30))
        sims = rng.random(n).astype(np.float32)
        if trial % 2:  # many ties, at the cut too
            sims = np.round(sims * 10).astype(np.float32) / 10
        if trial % 3 == 0:  # negative cosines, -1 for topics without a vector, -0.0 beside 0.0
            sims = sims * 2 - 1
            sims[rng.random(n) < 0.2] = -1.0
            sims[rng.random(n) < 0.05] = -0.0
            sims[rng.random(n) < 0.05] = 0.0
        want = sorted(range(n), key=lambda r: (-sims[r], r))[:k]
        assert assign.top_rows(sims, k) == want, (n, k)
    # the largest all in rows the threshold's sample skips: still found, in order
    sims = np.zeros(4000, np.float32)
    hidden = [r for r in range(4000) if r % assign.SAMPLE_EVERY][:50]
    sims[hidden] = np.linspace(1.0, 0.5, 50, dtype=np.float32)
    assert assign.top_rows(sims, 24) == hidden[:24]
    sims[::2] = 0.75  # ties straddling the cut: the lower rows first
    want = sorted(range(4000), key=lambda r: (-sims[r], r))[:24]
    assert assign.top_rows(sims, 24) == want
    # a strided view and float64 take the numpy steps, with the same answer
    assert (
        assign.top_rows(np.concatenate([sims, sims])[::2], 24)
        == sorted(range(4000), key=lambda r: (-np.concatenate([sims, sims])[::2][r], r))[:24]
    )
    assert assign.top_rows(sims.astype(np.float64), 24) == want
    assert assign.top_rows(np.zeros(0, np.float32), 5) == []
    assert assign.top_rows(np.ones(3, np.float32), 0) == []


def test_top_rows_in_c_ranks_nan_below_every_number():
    import numpy as np

    if assign._top_rows_c is None:
        pytest.skip("memstore/tree/_words.c is not built here")
    sims = np.array([0.1, np.nan, 0.3, np.nan, -1.0], np.float32)
    assert assign._top_rows_c(sims, 5) == [2, 0, 4, 1, 3]
    assert assign._top_rows_c(sims, 2) == [2, 0]
    with pytest.raises(ValueError, match="float32"):
        assign._top_rows_c(b"abc", 2)


def test_a_crowded_parent_regrouped_mid_write_sends_loose_topics_down_into_its_groups(
    store, monkeypatch
):
    """Regrouping as a write goes inserts like a B-tree: a loose topic under a crowded parent goes
    down into its closest group however far it is, so the parent is not refilled with new small
    groups and split again, one level deeper each time (50,000 dev turns made a tree 14 deep)."""
    import numpy as np

    from memstore.format.topics import Topic, Tree
    from memstore.tree.topicdata import RecordData

    rng = np.random.default_rng(5)
    monkeypatch.setattr(assign, "REGROUP_AT", 4)
    limit = assign.REGROUP_AT * assign.max_children(store)
    tree = Tree()
    placer = assign.Placer(store, tree, RecordData(store))
    made = 0
    for _round in range(12):  # each round: the top crowded by new unrelated topics, regrouped
        while len(placer.kids.of(None)) <= limit:
            tid = f"z{made:04d}"
            t = tree.topics[tid] = Topic(tid, tid, records=[f"r{made}"], created=tid)
            v = rng.normal(size=64)
            placer.vcache[tid] = (v / np.linalg.norm(v)).astype(np.float32)
            placer.kids.add(t)
            made += 1
        placer._regroup(None)
    depth = max(len(tree.ancestry(t)) for t in tree.topics)
    assert made > 200 and depth <= 5, depth  # 14 when the top made groups of its own each time
    assert all(len(placer.kids.of(t)) <= limit for t in [None, *tree.topics])


def test_a_write_of_a_few_hundred_turns_is_regrouped_once_at_its_end(store, monkeypatch):
    """Below REGROUP_AT x max_children topics under one parent nothing is regrouped mid-write, so
    a small import's groups are those one regrouping of all its topics makes (as before)."""
    from memstore.tree import fanout

    calls = []
    real = fanout.rebalance
    monkeypatch.setattr(assign, "rebalance", lambda *a, **k: calls.append(1) or real(*a, **k))
    store.write(_distinct_turns(store, 100), "Import 100 turns")
    tree = treefmt.read(store.root)
    assert 25 < len([t for t in tree.topics.values() if t.records]) <= assign.REGROUP_AT * 5
    assert len(calls) == 1


def test_term_sets_of_windows_are_term_set_s_own():
    """Placement ranks the key terms of topic windows from per-text counts (tree/termsets.py); every
    window gives naming.term_set's answer, ties at the cut and capitalised words included."""
    from memstore.tree.termsets import TermSets

    rng = random.Random(11)
    vocab = [_word(rng) for _ in range(40)] + ["Sarah", "sarah", "Bikes", "bike", "the", "a"]
    texts = [""] + [
        " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 60))) + "." for _ in range(80)
    ]
    texts += [
        "My bike tire keeps going flat. The Bike shop said the tire is fine.",
        "What pressure should the bike tire have? Sarah said 80 psi.",
        "ok",
    ]
    sets = TermSets()
    for _ in range(600):
        window = rng.sample(texts, rng.randint(1, 8))
        for k in (1, 3, 12, 20):
            assert sets.top(window, k) == naming.term_set(window, k), (window, k)


def test_key_terms_from_a_write_s_counts_are_naming_s_own():
    """Naming summarises a big write's topics by key terms taken from the counts placement made
    (TermSets.key_terms): the same terms in the same order, each in the same surface form (the
    most common, the first met on a tie: "Bikes" against "bike"), with and without the store's
    rarity weights, for windows of up to 60 texts, texts never counted before included."""
    from memstore.tree.termsets import TermSets

    rng = random.Random(12)
    vocab = [_word(rng) for _ in range(60)] + ["Sarah", "sarah", "Bikes", "bike", "bikes", "the"]
    vocab += ["Paris", "PARIS", "cakes", "cake", "Cake", "NASA's", "nasa"]
    texts = [""] + [
        " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 40))) + "." for _ in range(150)
    ]
    weights = {w: rng.choice((0.2, 0.5, 1.0)) for w in {naming._stem(v) for v in vocab}}

    def rarity(terms):
        return {t: weights.get(t, 0.7) for t in terms}

    sets = TermSets()
    sets.top(texts[:50], 12)  # a third counted before, the rest when first asked for
    for _ in range(400):
        window = rng.sample(texts, rng.randint(1, 60))
        for k in (1, 6, 8):
            assert sets.key_terms(window, k) == naming.key_terms(window, k), (window, k)
            got = naming.key_terms(window, k, rarity, counts=sets)
            assert got == naming.key_terms(window, k, rarity), (window, k)


def test_regrouping_s_pair_search_is_the_pairwise_loop_s_answer():
    """rebalance compares a crowded parent's children in one product (fanout._cosines): each
    cosine is `_sim`'s (to float rounding), and the pair picked is the pairwise loop's over them,
    ties (repeated vectors) and topics without a vector included: the closest pair (or the least
    close), the first in (i, j) order on a tie."""
    import numpy as np

    rng = np.random.default_rng(3)
    for trial in range(200):
        n = int(rng.integers(2, 12))
        base = rng.normal(size=(max(2, n // 2), 8)).astype(np.float32)
        vs = [base[int(rng.integers(len(base)))] for _ in range(n)]  # repeats: tied pairs
        vs = [v / np.linalg.norm(v) for v in vs]
        if trial % 3 == 0:
            vs[int(rng.integers(n))] = None
        sims = fanout._cosines(vs, vs)
        for i, a in enumerate(vs):
            for j, b in enumerate(vs):
                assert abs(sims[i, j] - fanout._sim(a, b)) < 1e-6
        pairs = [(sims[i, j], i, j) for i in range(n) for j in range(n) if i < j]
        most = max(p[0] for p in pairs)
        least = min(p[0] for p in pairs)
        assert fanout._best_pair(vs, np.max) == min((i, j) for s, i, j in pairs if s == most)
        assert fanout._best_pair(vs, np.min) == min((i, j) for s, i, j in pairs if s == least)


def test_a_group_vector_keeps_its_topics_tail_centroids(store):
    """A record placed under a group asks for the group's vector again; the topics under it that
    did not change give their latest records' centroid from what was kept (RecordData.tail_centroid),
    and a topic that gained a record is averaged anew."""
    import numpy as np

    from memstore.tree import topicdata

    data = topicdata.RecordData(store)
    rng = np.random.default_rng(1)
    for k in range(6):
        v = rng.normal(size=16).astype(np.float32)
        data.extra_vecs[f"r{k}"] = v / np.linalg.norm(v)
    before = topicdata.STATS["vectors"]
    a = data.tail_centroid(["r0", "r1", "r2"], 2)
    read = topicdata.STATS["vectors"] - before
    again = data.tail_centroid(["r5", "r1", "r2"], 2)  # the same latest two: nothing read
    assert again is a and topicdata.STATS["vectors"] - before == read == 2
    grown = data.tail_centroid(["r0", "r1", "r2", "r3"], 2)
    assert np.allclose(grown, data.centroid(["r2", "r3"]))
    assert not np.allclose(grown, a)


def test_the_children_newest_first_are_kept_as_records_join_and_topics_move():
    """fanout.Kids.newest keeps each parent's children newest first between calls (a group's
    vector samples its newest topics at every branching turn of a big write): always the order a
    fresh sort by last_active, then id, gives."""
    from memstore.format.tree import Topic, Tree
    from memstore.tree.topicdata import NEWEST

    rng = random.Random(4)
    tree = Tree()
    kids = fanout.Kids(tree)

    def stamp(k):
        return f"2026-11-01T{k // 3600:02d}:{(k // 60) % 60:02d}:{k % 60:02d}Z"

    clock = 0
    for i in range(40):
        parent = rng.choice([None, *[t for t in tree.topics if rng.random() < 0.1]])
        t = tree.topics[f"t{i:02d}"] = Topic(
            id=f"t{i:02d}",
            name="x",
            parent=parent,
            records=[],
            created=stamp(i),
            last_active=stamp(rng.randrange(100)),
        )
        kids.add(t)
    parents = [None, *tree.topics]
    for step in range(400):
        for p in rng.sample(parents, 5):  # read (and so kept) before the change
            kids.newest(p)
        t = tree.topics[rng.choice(sorted(tree.topics))]
        if step % 5 == 0:
            to = rng.choice(
                [
                    None,
                    *[
                        x
                        for x in tree.topics
                        if x not in tree.ancestry(t.id) and tree.topics[x].parent != t.id
                    ],
                ]
            )
            if to not in tree.ancestry(t.id) and not any(x == t.id for x in tree.ancestry(to)):
                kids.move(t, to)
        else:  # a record joined it: later, or now and then at the same time as a sibling
            clock += rng.choice([0, 1, 50])
            t.last_active = max(t.last_active, stamp(100 + clock))
            kids.touched(t)
        for p in parents:
            assert kids.newest(p) == sorted(kids.of(p), key=NEWEST, reverse=True), (step, p)


def test_topic_vectors_mean_and_norm_are_numpy_s_own_step_for_step():
    """topicdata.mean and normalise skip numpy's checks, not its arithmetic: the same bits."""
    import numpy as np

    from memstore.tree import topicdata

    rng = np.random.default_rng(0)
    for _ in range(500):
        vs = [rng.normal(size=384).astype(np.float32) for _ in range(int(rng.integers(1, 17)))]
        vs = [v * np.float32(rng.uniform(1e-3, 1e3)) for v in vs]  # (sums that round)
        assert np.array_equal(topicdata.mean(vs), np.mean(np.stack(vs), axis=0))
        v = vs[0]
        assert np.array_equal(topicdata.normalise(v), v / float(np.linalg.norm(v)))
    # what the C loop (_words.mean_into) does not take goes through numpy's steps
    wide = [rng.normal(size=8), rng.normal(size=8)]
    got = topicdata.mean(wide)
    assert got.dtype == np.float64 and np.array_equal(got, np.mean(np.stack(wide), axis=0))
    strided = [np.arange(16, dtype=np.float32)[::2], np.ones(8, np.float32)]
    assert np.array_equal(topicdata.mean(strided), np.mean(np.stack(strided), axis=0))
    as_tuple = tuple(vs)
    assert np.array_equal(topicdata.mean(as_tuple), np.mean(np.stack(vs), axis=0))


def test_rows_normalised_at_once_are_normalise_s_own_bit_for_bit(monkeypatch):
    """normalised_rows divides a few rows at a time by norms from the dot product normalise
    takes: the same bits as one call per row, for a matrix, a list of vectors, float64 input,
    a zero row (left as it is), rows past one chunk, and no rows; rows of unlike widths are
    normalised one by one."""
    import numpy as np

    from memstore.tree import topicdata

    monkeypatch.setattr(topicdata, "NORMALISE_ROWS", 7)
    rng = np.random.default_rng(3)
    mat = rng.normal(size=(40, 384)).astype(np.float32)
    mat[5] = 0.0
    mat[9] *= 1e-20  # (a tiny norm, not zero)
    for given in (mat, list(mat), list(mat.astype(np.float64)), mat[:3]):
        got = topicdata.normalised_rows(given)
        want = [topicdata.normalise(np.asarray(v, np.float32)) for v in given]
        assert len(got) == len(want)
        assert all(g.dtype == np.float32 and np.array_equal(g, w) for g, w in zip(got, want))
    assert not np.shares_memory(
        topicdata.normalised_rows(mat)[0], mat
    )  # (the input is not divided)
    assert topicdata.normalised_rows([]) == []
    ragged = [mat[0], mat[1][:10]]
    assert all(
        np.array_equal(g, topicdata.normalise(v))
        for g, v in zip(topicdata.normalised_rows(ragged), ragged)
    )


def test_a_topic_whose_first_turn_names_nothing_is_named_from_its_turns(store):
    """A big write names a long topic from its first turn (as above); when that turn has nothing to
    name (a file reference, a shouted line: real exports are full of them), the topic's turns name
    it, never "Untitled topic" for dozens of turns (24 such topics in a real 3,786-turn export)."""
    texts = ["MY SOURDOUGH STARTER SMELLS LIKE ACETONE AFTER FEEDING"] + SOURDOUGH[:9]  # (shouted)
    assert naming.offline_name([texts[0]]) == naming.UNTITLED
    t = _one_chat(store, texts)
    assert len(t.records) == len(texts) > assign.RENAME_UNTIL
    assert t.name != naming.UNTITLED and "sourdough" in t.name.lower(), t.name


def test_name_words_are_name_word_s_own_matches():
    """text.name_words and text.tokens read an ASCII text with an ASCII pattern, long_name_words finds only the
    matches of three characters or more: the same matches as NAME_WORD, whatever the mix of
    letters, digits, underscores, apostrophes and hyphens."""
    from memstore.text import NAME_WORD, TOKEN, long_name_words, name_words, tokens

    def check(text):
        assert tokens(text) == TOKEN.findall(text), text  # (the hash embedder's words)
        assert name_words(text) == NAME_WORD.findall(text), text
        assert long_name_words(text) == [w for w in NAME_WORD.findall(text) if len(w) >= 3], text

    rng = random.Random(9)
    alphabet = "aZ9_'- .,\t\nx’é"  # (ASCII but the last two)
    for n in range(3000):
        check("".join(rng.choice(alphabet[: -2 if n % 2 else None]) for _ in range(40)))
    for text in ("don't re-use x_1 9lives _under 'quoted' -dash a' ab- I'm", "naïve café ’tis", ""):
        check(text)


def test_a_group_vector_made_before_is_used_again_only_when_made_from_the_same(store):
    """topicdata.GroupMemo: a group's vector is taken from what it was made from last time when the
    children lists its walk read and the vectors its sampled topics gave are as they were; it is
    always the vector a fresh walk makes, bit for bit, as records join, topics move and topic
    vectors come and go from the write's cache."""
    import numpy as np

    from memstore.format.tree import Topic, Tree
    from memstore.tree import topicdata

    rng = random.Random(12)
    nrng = np.random.default_rng(12)
    data = topicdata.RecordData(store)
    tree = Tree()
    kids = fanout.Kids(tree)
    memo = topicdata.GroupMemo(kids.version)
    serial = iter(range(10**6))

    def record(tid):
        rid = f"r{next(serial)}"
        v = nrng.normal(size=8).astype(np.float32)
        data.extra_vecs[rid] = v / np.linalg.norm(v)
        t = tree.topics[tid]
        if t.records:  # (a topic's first record keeps the time it was made with)
            t.last_active = f"2026-11-01T00:{next(serial) % 60:02d}:00Z"
        t.records.append(rid)
        kids.touched(t)

    groups = [f"g{i}" for i in range(4)]
    for i, gid in enumerate(groups):
        parent = None if i < 2 else groups[i - 2]
        kids.add(Topic(id=gid, name=gid, parent=parent, records=[], created="x", last_active=""))
        tree.topics[gid] = kids.of(parent)[-1]
    topics = [f"t{i:02d}" for i in range(14)]

    def made(tid):
        at = f"2026-11-01T00:{next(serial) % 60:02d}:00Z"
        t = Topic(id=tid, name=tid, parent=rng.choice(groups), records=[], created=at)
        t.last_active = at
        tree.topics[tid] = t
        kids.add(t)
        topics.append(tid)

    topics: list[str] = []
    for i in range(14):
        made(f"t{i:02d}")
        record(f"t{i:02d}")
    cache: dict = {}
    reused = 0
    for step in range(600):
        op = rng.random()
        t = tree.topics[rng.choice(topics)]
        if (
            op < 0.6
        ):  # a record joins a topic: its ancestors' vectors are dropped, as placement does
            record(t.id)
            for a in tree.ancestry(t.id):
                cache.pop(a, None)
        elif op < 0.7:  # a topic moves to another group
            for a in tree.ancestry(t.id):
                cache.pop(a, None)
            kids.move(t, rng.choice(groups))
            for a in tree.ancestry(t.id):
                cache.pop(a, None)
        elif op < 0.75:  # a new topic, its first record to come (then it is sampled)
            made(f"t{len(topics):02d}")
        elif op < 0.85:  # a topic's own vector computed (the group then samples it instead)
            if t.records:
                topicdata.topic_vector(tree, data, t.id, cache, kids.newest)
        else:
            cache.pop(t.id, None)
        for gid in groups:
            fresh = dict(cache)
            fresh.pop(gid, None)
            want = topicdata.topic_vector(tree, data, gid, fresh, kids.newest)
            before = memo.made.get(gid)
            cache.pop(gid, None)
            got = topicdata.topic_vector(tree, data, gid, cache, kids.newest, memo)
            reused += memo.made.get(gid) is before and before is not None
            assert (got is None and want is None) or got.tobytes() == want.tobytes(), (step, gid)
    assert reused > 600  # and it was used again, often


def _subject_turns(store, n: int, subjects: int, seed: int) -> list[dict]:
    """`n` user turns in sessions of 2 to 5, each session about one of `subjects` made-up subjects
    (its own words), sessions going back to earlier subjects: joins, new topics and regroups."""
    rng = random.Random(seed)
    vocab = [[_word(rng) for _ in range(8)] for _ in range(subjects)]
    out, k, session = [], 0, 0
    while len(out) < n:
        subject, session = rng.randrange(subjects), session + 1
        for _ in range(rng.randint(2, 5)):
            words = " ".join(rng.sample(vocab[subject], 4) + [_word(rng)])
            ts = f"2026-11-{1 + k // 1440:02d}T{(k // 60) % 24:02d}:{k % 60:02d}:00Z"
            out.append(
                store.normalize(
                    {"ts": ts, "role": "user", "text": f"About {words}.", "session": f"s{session}"}
                )
            )
            k += 1
    return out[:n]


def test_a_big_write_s_shortcuts_make_the_tree_the_plain_way_makes(tmp_path, monkeypatch):
    """Products ahead (TopicMatrix), children kept newest first (Kids.newest), group vectors
    taken again (GroupMemo) and a crowded parent's loose topics moved into their groups one after
    the other with the cosines kept (fanout._Cosines) only save work: the same write, with topic
    ids from a counter, makes the same tree — records per topic, nesting, names and summaries —
    with all four off."""
    import itertools

    from conftest import make_store
    from memstore.tree import topicdata

    monkeypatch.setattr(assign, "REGROUP_AT", 2)
    monkeypatch.setattr(assign, "AHEAD_FROM", 100)
    monkeypatch.setattr(assign, "AHEAD", 8)

    turns = _subject_turns(make_store(tmp_path / "turns"), 600, 40, seed=5)

    def build(name: str) -> list:
        counter = itertools.count()
        ids = lambda: f"t{next(counter):05d}"  # noqa: E731
        monkeypatch.setattr(assign.treefmt, "new_topic_id", ids)
        monkeypatch.setattr(fanout, "new_topic_id", ids)
        store = make_store(tmp_path / name)
        store.write([dict(t) for t in turns], "Import", secrets="allow")
        tree = treefmt.read(store.root)
        return sorted(
            (t.id, t.parent, tuple(t.records), t.name, t.summary) for t in tree.topics.values()
        )

    used = {"memo": 0, "ahead": 0, "kept": 0}
    memo_vector, sims = topicdata.GroupMemo.vector, assign.TopicMatrix._sims
    drop_row = fanout._Cosines.drop_row

    def counted_drop(self, i):
        used["kept"] += 1
        return drop_row(self, i)

    monkeypatch.setattr(fanout._Cosines, "drop_row", counted_drop)

    def counted_vector(self, *args):
        got = memo_vector(self, *args)
        used["memo"] += got is not topicdata._MISSING
        return got

    def counted_sims(self, vec, n, key, upcoming):
        used["ahead"] += key in self.cols
        return sims(self, vec, n, key, upcoming)

    monkeypatch.setattr(topicdata.GroupMemo, "vector", counted_vector)
    monkeypatch.setattr(assign.TopicMatrix, "_sims", counted_sims)
    fast = build("fast")
    assert used["memo"] > 10 and used["ahead"] > 10 and used["kept"] >= 5  # (they were taken)
    monkeypatch.setattr(fanout, "SAME_PARENT_STEPS", False)
    monkeypatch.setattr(assign.TopicMatrix, "_sims", sims)
    monkeypatch.setattr(assign, "AHEAD_FROM", 10**9)
    monkeypatch.setattr(topicdata.GroupMemo, "vector", lambda *a: topicdata._MISSING)
    monkeypatch.setattr(
        fanout.Kids,
        "newest",
        lambda self, tid: sorted(self.of(tid), key=topicdata.NEWEST, reverse=True),
    )
    plain = build("plain")
    assert fast == plain
    assert len(fast) > 40 and any(not recs for _t, _p, recs, *_ in fast)  # topics and groups


def test_a_write_leaves_its_tree_and_placement_to_reference_counting(tmp_path):
    """What a write placed with (its Placer: the tree, the vectors, the counted words; the replayed
    tree log) is freed when the write returns, not left in reference cycles for Python's cyclic
    collector: gc is off while a write places, and the collector's first pass after it walked all
    of it (0.45-0.63 s of a 100k-turn import)."""
    import gc

    from conftest import make_store
    from memstore.format import topics, treelog
    from memstore.tree import termsets

    store = make_store(tmp_path / "s")
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        store.write(_distinct_turns(store, 40, seed=3), "first")  # (the tree's first ops: replayed)
        store.write(_distinct_turns(store, 300, seed=4), "second")  # (regroups: a group made)
        gc.collect()
        left = {type(o) for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    ours = {assign.Placer, termsets.TermSets, topics.Topic, topics.Tree, treelog.Replay}
    assert not left & ours, left & ours


def test_a_first_big_write_ranks_its_topics_by_one_product(tmp_path, monkeypatch):
    """A big write (FLAT_FROM records) into a tree that holds no record ranks its topics by the
    one product per branching turn, without the beam descent, the ancestry and the recent
    topics: the sessions that go back to a subject find its topic as often, in about as many
    topics. A big write into a tree with earlier topics keeps the beam."""
    import itertools

    from conftest import make_store

    monkeypatch.setattr(assign, "REGROUP_AT", 2)
    turns = _subject_turns(make_store(tmp_path / "turns"), 900, 30, seed=11)
    subject = {}  # a turn's text -> its subject's words (see _subject_turns)
    for t in turns:
        subject[t["id"]] = frozenset(t["text"].split()[1:5])

    def build(name: str, flat_from: int) -> tuple[list, int, float]:
        counter = itertools.count()
        ids = lambda: f"t{next(counter):05d}"  # noqa: E731
        monkeypatch.setattr(assign.treefmt, "new_topic_id", ids)
        monkeypatch.setattr(fanout, "new_topic_id", ids)
        monkeypatch.setattr(assign, "FLAT_FROM", flat_from)
        flattened = []
        flatten = assign.Placer.flatten
        monkeypatch.setattr(
            assign.Placer, "flatten", lambda self: (flattened.append(1), flatten(self))
        )
        store = make_store(tmp_path / name)
        store.write([dict(t) for t in turns[:600]], "Import", secrets="allow")
        store.write([dict(t) for t in turns[600:]], "Import more", secrets="allow")
        monkeypatch.setattr(assign.Placer, "flatten", flatten)
        tree = treefmt.read(store.root)
        topics = [t for t in tree.topics.values() if t.records]
        # a subject's records: how many sit in the topic that holds most of them
        by_subject: dict = {}
        for t in topics:
            for rid in t.records:
                by_subject.setdefault(subject[rid], []).append(t.id)
        together = sum(max(ids.count(x) for x in set(ids)) for ids in by_subject.values())
        return flattened, len(topics), together / len(turns)

    flat = build("flat", 100)
    beam = build("beam", 10**9)
    assert flat[0] == [1] and beam[0] == []  # (the second write, into a tree: the beam)
    assert flat[1] <= 1.2 * beam[1] and flat[2] >= beam[2] - 0.02, (flat, beam)


def test_offline_many_names_and_summarises_as_the_functions_one_by_one():
    """offline_many scrubs a job's texts once for its name and its summary: what it gives is what
    offline_name, first_name and offline_summary give one by one, a secret in a text never in it."""
    token = "ghp_" + "Zq8Kd2Lm4Np6Rs8Tu0Vw2Xy4Za6Bc8De0Fg2"
    texts = [
        "How do I rotate the deploy token for the orchard pipeline?",
        f"The orchard pipeline token is {token}, rotate it weekly.",
        "Rotating the orchard pipeline token needs admin rights.",
    ]
    roles = ["user", "assistant", "user"]
    first = ["[file: notes.pdf]"]  # nothing to name: the name comes from the texts
    jobs = [
        (texts, roles, None, True),
        (texts, roles, None, False),
        (texts, roles, first, True),
        (texts, roles, texts[:1], True),
        naming.GroupName(texts, fanout.GROUP),
    ]
    assert "[REDACTED" in naming.scrubbed(texts)[1]  # (the detector knows the token)
    got = naming.offline_many(jobs)
    want = [
        (naming.offline_name(texts, None, roles), naming.offline_summary(texts, roles)),
        (None, naming.offline_summary(texts, roles)),
        (naming.first_name(first, texts, None, roles), naming.offline_summary(texts, roles)),
        (naming.first_name(texts[:1], texts, None, roles), naming.offline_summary(texts, roles)),
        (naming.offline_name(texts, fallback=fanout.GROUP), None),
    ]
    assert got == want
    assert naming.first_name(first, texts, None, roles) == naming.offline_name(texts, None, roles)
    assert all(token[4:20] not in str(x) for pair in got for x in pair)
    assert "orchard" in got[0][0].lower() and "orchard" in got[0][1]
