"""The topic tree on disk: the op log (format 2) — round trips, idempotent order-free replay, tombstone
chains, damaged lines, the replay cache, forgetting, plain-git merges — and format 1's tree.json."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ct, git_clean
from memstore.errors import FormatError
from memstore.format import tree as treefmt
from memstore.tree.forget import forget_ops
from memstore.format import treelog
from memstore.format.tree import Topic, Tree


def _tree(**topics) -> Tree:
    t = Tree()
    for tid, (parent, recs, last) in topics.items():
        t.topics[tid] = Topic(
            id=tid,
            name=f"name {tid}",
            parent=parent,
            records=list(recs),
            created="2026-01-01T00:00:00.000000Z",
            last_active=last,
        )
    return t


def test_dumps_is_deterministic_and_roundtrips():
    t = _tree(b=(None, ["r2", "r1"], "2026-01-02"), a=("b", ["r3"], "2026-01-03"))
    t.current = "a"
    text = t.dumps()
    assert text == treefmt.parse(text).dumps()
    data = json.loads(text)
    assert list(data["topics"]) == ["a", "b"] and data["topics"]["b"]["records"] == ["r2", "r1"]
    assert (
        '\n        "r2",\n' in text
    )  # one record id per line: git diff reads as "these records joined"


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda d: d.update(format=9), "unsupported tree format"),
        (lambda d: d["topics"]["a"].pop("records"), "lacks records"),
        (lambda d: d["topics"]["a"].update(parent="zz"), "not a topic"),
        (lambda d: d["topics"]["a"].update(records="r1"), "list of record ids"),
        (lambda d: d.update(current="nope"), '"current" names'),
        (
            lambda d: (d["topics"]["a"].update(parent="b"), d["topics"]["b"].update(parent="a")),
            "cycle",
        ),
    ],
)
def test_validation_names_the_file(tmp_path, mutate, words):
    t = _tree(a=(None, ["r1"], "x"), b=(None, [], "x"))
    data = json.loads(t.dumps())
    mutate(data)
    (tmp_path / "tree.json").write_text(json.dumps(data))
    with pytest.raises(FormatError) as exc:
        treefmt.read(tmp_path)
    assert str(tmp_path / "tree.json") in str(exc.value) and words in str(exc.value)


def test_broken_json_is_a_clear_error_and_cli_exits_4(store):
    (store.root / "tree.json").write_text("{not json")
    with pytest.raises(FormatError, match="tree.json: not valid JSON"):
        treefmt.read(store.root)
    proc = ct("-C", store.root, "tree", check=False)
    assert proc.returncode == 4 and "tree.json" in proc.stderr


# ----- format 2: the op log ----------------------------------------------------------------------

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _lines(root) -> list[str]:
    return [ln for p in treelog.shards(root) for ln in p.read_text().splitlines()]


def _same(a: Tree, b: Tree) -> bool:
    """Same topics (fields and records), archive, tombstone targets and current topic."""

    def key(t: Tree):
        return (
            sorted(
                (tid, x.name, x.summary, x.parent, tuple(x.records), x.created, x.last_active)
                for tid, x in t.topics.items()
            ),
            sorted(t.archived),
            sorted((k, v.get("into")) for k, v in t.gone.items()),
            t.current,
        )

    return key(a) == key(b)


def test_write_then_read_gives_the_same_tree_and_nothing_changed_writes_nothing(tmp_path):
    t = _tree(b=(None, ["r2", "r1"], "2026-01-02"), a=("b", ["r3"], "2026-01-03"))
    t.current = "a"
    t.archived = ["r9"]
    assert treefmt.write(tmp_path, t, now=T0) == ["tree/2026/2026-05-01.jsonl"]
    back = treefmt.read(tmp_path)
    assert _same(back, t) and back.topics["b"].records == ["r2", "r1"]
    assert treefmt.write(tmp_path, back, now=_at(1)) == []
    assert not (tmp_path / "tree.json").exists()


def test_a_shard_is_the_day_in_the_store_timezone(tmp_path):
    (tmp_path / "memstore.toml").write_text('format_version = 1\ntimezone = "Pacific/Auckland"\n')
    t = _tree(a=(None, ["r1"], "1"))
    assert treefmt.write(tmp_path, t, now=datetime(2026, 5, 1, 20, 0, tzinfo=timezone.utc)) == [
        "tree/2026/2026-05-02.jsonl"
    ]


def test_a_reorganization_reads_as_what_moved_where(tmp_path):
    t = _tree(a=(None, ["r1", "r2"], "1"), b=(None, ["r3"], "1"), c=(None, ["r4"], "1"))
    treefmt.write(tmp_path, t, now=T0)
    before = len(_lines(tmp_path))
    t = treefmt.read(tmp_path)
    t.topics["a"].records += t.topics["b"].records  # merge b into a
    del t.topics["b"]
    t.gone["b"] = {"into": "a", "why": "merged", "at": "x"}
    t.topics["c"].parent = "a"  # move c under a
    t.topics["a"].name = "Trips and plans"  # rename a
    treefmt.write(tmp_path, t, now=_at(5))
    new = [json.loads(x) for x in _lines(tmp_path)[before:]]
    assert [(o["op"], o.get("topic")) for o in new] == [
        ("set", "a"),
        ("set", "c"),
        ("place", "a"),
        ("gone", "b"),
    ]
    assert new[0]["name"] == "Trips and plans" and new[1] == {**new[1], "parent": "a"}
    assert new[2]["records"] == ["r3"] and new[3]["into"] == "a" and new[3]["why"] == "merged"
    assert sorted({o["at"] for o in new}) == [o["at"] for o in new]  # one time each, in write order
    assert _same(treefmt.read(tmp_path), t)


def _two_clones(tmp_path):
    """Ops of a shared base, then clone A merges topic x into y while clone B keeps placing into x."""
    base = tmp_path / "base"
    t = _tree(x=(None, ["r1"], "1"), y=(None, ["r2"], "1"))
    treefmt.write(base, t, now=T0)
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(base, a)
    shutil.copytree(base, b)
    ta = treefmt.read(a)
    ta.topics["y"].records += ta.topics.pop("x").records
    ta.gone["x"] = {"into": "y", "why": "merged", "at": "x"}
    treefmt.write(a, ta, now=_at(10))
    tb = treefmt.read(b)
    tb.topics["x"].records.append("r3")
    tb.current = "x"
    treefmt.write(b, tb, now=_at(20))  # later than A's merge
    tb = treefmt.read(b)
    tb.topics["x"].records.append("r0")
    treefmt.write(b, tb, now=_at(5))  # a clock behind: still after everything b has seen
    return a, b


def test_a_record_placed_into_a_topic_the_other_clone_merged_away_follows_it(tmp_path):
    a, b = _two_clones(tmp_path)
    union = sorted(set(_lines(a)) | set(_lines(b)))
    merged = tmp_path / "merged"
    (merged / "tree/2026").mkdir(parents=True)
    (merged / "tree/2026/2026-05-01.jsonl").write_text("\n".join(union) + "\n")
    tree = treefmt.read(merged)
    assert set(tree.topics) == {"y"} and sorted(tree.topics["y"].records) == [
        "r0",
        "r1",
        "r2",
        "r3",
    ]
    assert tree.current == "y" and tree.gone["x"]["into"] == "y"


def test_gone_chains_are_followed(tmp_path):
    t = _tree(a=(None, ["r1"], "1"), b=(None, ["r2"], "1"), c=(None, ["r3"], "1"))
    treefmt.write(tmp_path, t, now=T0)
    shard = treelog.shards(tmp_path)[0]
    with open(shard, "a") as fh:  # a merged into b, b into c; then a place into a arrives
        for i, op in enumerate(
            [
                {"op": "gone", "topic": "a", "into": "b", "why": "merged"},
                {"op": "gone", "topic": "b", "into": "c", "why": "merged"},
                {"op": "place", "topic": "a", "records": ["r7"]},
            ]
        ):
            fh.write(treelog.dumps({"at": f"2026-05-01T13:00:00.00000{i}Z", **op}) + "\n")
    tree = treefmt.read(tmp_path)
    assert set(tree.topics) == {"c"} and sorted(tree.topics["c"].records) == [
        "r1",
        "r2",
        "r3",
        "r7",
    ]


def test_crossing_moves_cannot_make_a_cycle(tmp_path):
    t = _tree(a=(None, [], "1"), b=(None, ["r1"], "1"))
    treefmt.write(tmp_path, t, now=T0)
    shard = treelog.shards(tmp_path)[0]
    with open(shard, "a") as fh:  # two clones: one moved a under b, the other b under a
        fh.write(
            treelog.dumps(
                {"at": "2026-05-01T13:00:00.000001Z", "op": "set", "topic": "a", "parent": "b"}
            )
            + "\n"
        )
        fh.write(
            treelog.dumps(
                {"at": "2026-05-01T13:00:00.000002Z", "op": "set", "topic": "b", "parent": "a"}
            )
            + "\n"
        )
    tree = treefmt.read(tmp_path)
    assert tree.topics["a"].parent == "b" and tree.topics["b"].parent is None


ops_st = st.lists(
    st.sampled_from(
        [
            {
                "op": "topic",
                "topic": "a",
                "name": "A",
                "parent": None,
                "created": "2026-01-01T00:00:00.000000Z",
            },
            {
                "op": "topic",
                "topic": "b",
                "name": "B",
                "parent": "a",
                "created": "2026-01-02T00:00:00.000000Z",
            },
            {
                "op": "set",
                "topic": "b",
                "parent": None,
                "last_active": "2026-02-01T00:00:00.000000Z",
            },
            {"op": "set", "topic": "a", "parent": "b", "name": "A2"},
            {"op": "place", "topic": "a", "records": ["r1", "r2"]},
            {"op": "place", "topic": "b", "records": ["r2", "r3"]},
            {"op": "place", "topic": "c", "records": ["r4"]},
            {"op": "archive", "records": ["r1"]},
            {"op": "drop", "records": ["r3"]},
            {"op": "gone", "topic": "b", "into": "a", "why": "merged"},
            {"op": "gone", "topic": "c", "into": None, "why": "archived"},
            {"op": "current", "topic": "b"},
        ]
    ),
    min_size=1,
    max_size=14,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=ops_st,
    seed=st.integers(0, 10_000),
    times=st.lists(st.integers(0, 5), min_size=14, max_size=14),
)
def test_replay_is_idempotent_and_independent_of_line_and_shard_order(
    tmp_path_factory, ops, seed, times
):
    """Every line twice, lines shuffled across other shards: the same tree (what a union merge may do)."""
    lines = [
        treelog.dumps({"at": f"2026-05-01T12:00:00.00000{times[i]}Z", **op})
        for i, op in enumerate(ops)
    ]
    one = tmp_path_factory.mktemp("one")
    (one / "tree/2026").mkdir(parents=True)
    (one / "tree/2026/2026-05-01.jsonl").write_text("".join(x + "\n" for x in lines))
    other = tmp_path_factory.mktemp("other")
    rng = random.Random(seed)
    doubled = lines + lines
    rng.shuffle(doubled)
    for i, line in enumerate(doubled):
        day = f"2026-0{1 + i % 3}-1{i % 2}"
        path = other / "tree" / day[:4] / f"{day}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as fh:
            fh.write(line + "\n")
    a, b = treefmt.read(one), treefmt.read(other)
    assert _same(a, b) and a.dumps() == b.dumps()
    owners = [r for t in a.topics.values() for r in t.records]
    assert len(owners) == len(set(owners)) and not set(owners) & set(a.archived)


@pytest.mark.parametrize(
    "line, words",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"op": "current", "topic": null}', '"at" must be a UTC time'),
        ('{"at": "2026-05-01T12:00:00.000000Z", "op": "teleport"}', "unknown op 'teleport'"),
        ('{"at": "yesterday", "op": "current", "topic": null}', '"at" must be a UTC time'),
        (
            '{"at": "2026-05-01T12:00:00.000000Z", "op": "place", "topic": "a", "records": "r1"}',
            "list of record ids",
        ),
    ],
)
def test_a_damaged_line_is_named_for_fsck_and_skipped_by_readers(tmp_path, capsys, line, words):
    treefmt.write(tmp_path, _tree(a=(None, ["r1"], "1")), now=T0)
    shard = treelog.shards(tmp_path)[0]
    with open(shard, "a") as fh:
        fh.write(line + "\n")
    tree = treefmt.read(tmp_path)
    assert tree.topics["a"].records == ["r1"]
    err = capsys.readouterr().err
    assert f"{shard}:3: " in err and words in err
    with pytest.raises(FormatError) as exc:
        treelog.read_ops(tmp_path, strict=True)
    assert str(exc.value).startswith(f"{shard}:3: ") and words in str(exc.value)
    assert any(p.startswith(f"{shard}:3: ") for p in treefmt.problems(tmp_path))


def test_an_unfinished_last_line_is_damage_not_an_op(tmp_path):
    treefmt.write(tmp_path, _tree(a=(None, ["r1"], "1")), now=T0)
    shard = treelog.shards(tmp_path)[0]
    with open(shard, "a") as fh:
        fh.write('{"at":"2026-05-01T13:00:00.000000Z","op":"place","topic":"a","records":["r2"]}')
    assert treefmt.read(tmp_path).topics["a"].records == ["r1"]
    assert "no newline" in treefmt.problems(tmp_path)[0]


def test_the_replay_cache_follows_the_files(tmp_path):
    (tmp_path / ".memstore").mkdir()
    treefmt.write(tmp_path, _tree(a=(None, ["r1"], "1")), now=T0)
    assert (tmp_path / ".memstore" / treefmt.CACHE).exists()
    assert treefmt.read(tmp_path).topics["a"].records == ["r1"]
    shard = treelog.shards(tmp_path)[0]
    with open(shard, "a") as fh:  # a change git makes (pull, checkout) is seen at once
        fh.write(
            treelog.dumps(
                {
                    "at": "2026-05-01T13:00:00.000000Z",
                    "op": "place",
                    "topic": "a",
                    "records": ["r2"],
                }
            )
            + "\n"
        )
    assert treefmt.read(tmp_path).topics["a"].records == ["r1", "r2"]
    (tmp_path / ".memstore" / treefmt.CACHE).write_bytes(b"garbage")
    assert treefmt.read(tmp_path).topics["a"].records == ["r1", "r2"]


def test_a_format1_tree_json_becomes_ops_on_the_first_write(tmp_path):
    t = _tree(a=(None, ["r1", "r2"], "1"), b=("a", ["r3"], "1"))
    (tmp_path / "tree.json").write_text(t.dumps())
    assert _same(treefmt.read(tmp_path), t)
    assert treefmt.write(tmp_path, treefmt.read(tmp_path), now=T0) == [
        "tree/2026/2026-05-01.jsonl",
        "tree.json",
    ]
    assert not (tmp_path / "tree.json").exists() and _same(treefmt.read(tmp_path), t)


def test_problems_for_fsck(tmp_path):
    t = _tree(a=(None, ["r1", "r2"], "1"))
    treefmt.write(tmp_path, t, now=T0)
    assert treefmt.problems(tmp_path, known_ids={"r1", "r2"}) == []
    assert any(
        "r2, which is not in any day log" in p for p in treefmt.problems(tmp_path, known_ids={"r1"})
    )
    f1 = tmp_path / "f1"
    f1.mkdir()
    (f1 / "tree.json").write_text("[]")
    assert "top level must be a JSON object" in treefmt.problems(f1)[0]


# ----- forgetting ----------------------------------------------------------------------------------


def test_forget_rewrites_every_line_that_names_or_quotes_the_record(store):
    from conftest import write_turns

    secret = "My locker code is 4471 and the spare key is under the blue mat."
    write_turns(
        store,
        [
            ("2026-11-01T10:00:00Z", "user", secret, "s", "me"),
            ("2026-11-01T10:01:00Z", "assistant", "Noted the locker details.", "s", None),
            (
                "2026-11-01T10:02:00Z",
                "user",
                "Also remind me about the gym schedule on Mondays.",
                "s",
                "me",
            ),
        ],
    )
    tree = treefmt.read(store.root)
    ids = {rid for t in tree.topics.values() for rid in t.records}
    secret_id = next(
        r["id"]
        for r in [
            json.loads(x)
            for x in next((store.root / "log").rglob("*.jsonl")).read_text().splitlines()
        ]
        if r["text"] == secret
    )
    text = "\n".join(_lines(store.root))
    assert (
        secret_id in text and "locker code is 4471" in text
    )  # the offline summary quotes the opener
    changed = forget_ops(store.root, set([secret_id]), [secret])
    assert changed and all(p.startswith("tree/") for p in changed)
    text = "\n".join(_lines(store.root))
    assert secret_id not in text and "4471" not in text and "locker code" not in text
    after = treefmt.read(store.root)
    assert set(after.topic_of()) == ids - {secret_id}
    t = after.topics[after.topic_of()[next(iter(ids - {secret_id}))]]
    assert t.name and t.named_by == "offline"
    assert treefmt.problems(store.root) == []
    assert forget_ops(store.root, set([secret_id]), [secret]) == []  # nothing left to take out


def test_forget_drops_lines_left_without_records_and_tree_json_too(tmp_path):
    t = _tree(a=(None, ["r1"], "1"), b=(None, ["r2"], "1"))
    treefmt.write(tmp_path, t, now=T0)
    forget_ops(tmp_path, set(["r2"]), [])
    assert (
        "r2" not in "\n".join(_lines(tmp_path)) and treefmt.read(tmp_path).topics["b"].records == []
    )
    f1 = tmp_path / "f1"
    f1.mkdir()
    (f1 / "tree.json").write_text(t.dumps())
    assert forget_ops(f1, set(["r1"]), []) == ["tree.json"]
    assert "r1" not in (f1 / "tree.json").read_text()


# ----- plain git -----------------------------------------------------------------------------------


def test_branches_that_both_place_turns_merge_with_plain_git(tmp_path):
    """Two branches both add turns (so both append tree ops): git merges with zero conflicts, no driver."""
    from conftest import make_store

    st = make_store(tmp_path / "s")
    assert "memstore-tree" not in (st.root / ".gitattributes").read_text()
    st.add("We are planning a trip to Lisbon in spring.", ts="2026-03-01T10:00:00Z")
    git = lambda *a: subprocess.run(
        ["git", "-C", str(st.root), *a], capture_output=True, text=True, check=True
    )
    assert "memstore-tree" not in git("config", "--list").stdout
    git("checkout", "-q", "-b", "other")
    st.add("Chess openings for beginners: the Italian game.", ts="2026-03-02T10:00:00Z")
    git("checkout", "-q", "main")
    st.add("Gardening: tomatoes need full sun and deep watering.", ts="2026-03-03T10:00:00Z")
    out = subprocess.run(
        [
            "git",
            "-C",
            str(st.root),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "merge",
            "--no-edit",
            "other",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0 and "CONFLICT" not in out.stdout, out.stdout + out.stderr
    tree = treefmt.read(st.root)
    ids = [r[0] for r in st.index().conn.execute("SELECT id FROM records")]
    assert sorted(tree.topic_of()) == sorted(ids)
    assert git_clean(st.root)


def test_ct_diff_reads_tree_json_at_format1_revisions_and_ops_after(store):
    """A tree.json committed by format 1, then a write that turns it into ops: ct diff spans both."""
    store.add("Planning the garden: tomatoes and beans this spring.", ts="2026-03-01T10:00:00Z")
    tree = treefmt.read(store.root)
    store.git.run("rm", "-r", "-q", "tree")
    (store.root / "tree.json").write_text(tree.dumps())
    store.git.commit("a format-1 tree", ["tree.json"])
    assert _same(treefmt.read(store.root), tree)
    store.add("Also plant basil next to the tomatoes in the garden.", ts="2026-03-01T10:05:00Z")
    assert (
        not (store.root / "tree.json").exists()
        and (store.root / "tree").is_dir()
        and git_clean(store.root)
    )
    js = json.loads(ct("-C", store.root, "diff", "HEAD~1", "HEAD", "--json").stdout)
    assert js["added"] or js["grew"]
    assert not any(m for m in js["merged"]) and not js["removed"]
    assert json.loads(ct("-C", store.root, "diff", "HEAD", "--json").stdout)["grew"] == []


def test_a_line_that_is_not_utf8_is_named_and_the_rest_replays(tmp_path):
    treefmt.write(tmp_path, _tree(a=(None, ["r1"], "1")), now=T0)
    shard = treelog.shards(tmp_path)[0]
    with open(shard, "ab") as fh:
        fh.write(b'{"at":"2026-05-01T13:00:00.000000Z","op":"current","topic":"\xff"}\n\n')
        fh.write(
            treelog.dumps(
                {
                    "at": "2026-05-01T13:00:00.000001Z",
                    "op": "place",
                    "topic": "a",
                    "records": ["r2"],
                }
            ).encode()
            + b"\n"
        )
    assert treefmt.read(tmp_path).topics["a"].records == ["r1", "r2"]
    assert [p.split(": ", 1)[0] for p in treefmt.problems(tmp_path)] == [f"{shard}:3"]
    assert "invalid UTF-8" in treefmt.problems(tmp_path)[0]


def _replayed_from_shards(root) -> Tree:
    ops, problems = treelog.read_ops(root)
    assert problems == []
    return treelog.replay(ops)


def test_a_write_appends_to_the_days_newest_part_with_room(tmp_path, monkeypatch):
    monkeypatch.setattr(treelog, "PART_BYTES", 300)
    t = _tree(a=(None, ["r1"], "1"))
    assert treefmt.write(tmp_path, t, now=T0) == ["tree/2026/2026-05-01.jsonl"]
    t, base = treefmt.read_for_write(tmp_path)
    t.topics["a"].records.append("r2")
    assert treefmt.write(tmp_path, t, now=_at(1), base=base) == ["tree/2026/2026-05-01.jsonl"]
    first = (tmp_path / "tree/2026/2026-05-01.jsonl").read_bytes()
    assert len(first) >= 300  # full now: the next write opens part 2 and leaves this one alone
    for i, minute in enumerate((2, 3, 4)):
        t, base = treefmt.read_for_write(tmp_path)
        t.topics["a"].records.append(f"r{3 + i}")
        t.topics[f"n{i}"] = Topic(id=f"n{i}", name="x" * 300, parent="a", records=[f"q{i}"])
        assert treefmt.write(tmp_path, t, now=_at(minute), base=base) == [
            f"tree/2026/2026-05-01.{2 + i}.jsonl"
        ]
    assert (tmp_path / "tree/2026/2026-05-01.jsonl").read_bytes() == first
    assert [p.name for p in treelog.shards(tmp_path)] == [
        "2026-05-01.2.jsonl",
        "2026-05-01.3.jsonl",
        "2026-05-01.4.jsonl",
        "2026-05-01.jsonl",
    ]
    back = treefmt.read(tmp_path)
    assert back.topics["a"].records == ["r1", "r2", "r3", "r4", "r5"]
    assert _same(back, _replayed_from_shards(tmp_path)) and treefmt.problems(tmp_path) == []
    # a name that is not a part (part 1 spelt out, a leading zero) is no shard
    (tmp_path / "tree/2026/2026-05-01.1.jsonl").write_text("")
    (tmp_path / "tree/2026/2026-05-01.05.jsonl").write_text("")
    assert len(treelog.shards(tmp_path)) == 4


def _wide(n: int) -> Tree:
    """n topics under 4 groups, each with two records."""
    t = _tree(**{f"g{k}": (None, [], "1") for k in range(4)})
    for i in range(n):
        t.topics[f"t{i:03d}"] = Topic(
            id=f"t{i:03d}", name=f"n{i}", parent=f"g{i % 4}", records=[f"r{i}a", f"r{i}b"]
        )
    t.current = "t000"
    return t


def test_a_write_on_the_tree_read_in_part_reads_and_updates_only_what_it_touches(tmp_path):
    from memstore.format import treecache
    from memstore.format.topics import LazyTree

    (tmp_path / ".memstore").mkdir()
    t = _wide(300)
    treefmt.write(tmp_path, t, now=T0)
    for minute in range(1, 6):
        t, base = treefmt.read_for_write(tmp_path, lazy=True)
        assert isinstance(t, LazyTree)
        assert t.holding({"r5a", "r7b", "nope"}) == {"r5a", "r7b"}
        t.topics["t005"].records.append(f"s{minute}")  # a record joins a topic
        t.topics["t007"].name = f"renamed {minute}"
        if minute == 1:  # one moves to a new topic under g1
            t.topics["t007"].records.remove("r7b")
        t.topics[f"new{minute}"] = Topic(
            id=f"new{minute}", name="x", parent="g1", records=["r7b"] if minute == 1 else []
        )
        t.current = f"new{minute}"
        assert f"new{minute}" in [k.id for k in t.children("g1")]
        treefmt.write(tmp_path, t, now=_at(minute), base=base)
        # what the write read: the topics it named and g1's children (not the 304 topics)
        assert len(t.topics.got) < 90 and not t.topics.whole
        back = treefmt.read(tmp_path)
        assert _same(back, _replayed_from_shards(tmp_path))
        assert back.topics["t005"].records[-1] == f"s{minute}"
        assert back.topics["t007"].records == ["r7a"] and back.current == f"new{minute}"
        assert back.topics["new1"].records == ["r7b"]
        t2, base2 = treefmt.read_for_write(tmp_path, lazy=True)
        assert t2.holding({"r7b"}) == {"r7b"}  # the cache's record rows moved with it
        assert treefmt.write(tmp_path, t2, now=_at(minute), base=base2) == []  # nothing changed
    # a change git makes to a shard is seen at once: the cache no longer matches, it is rebuilt
    with open(treelog.shards(tmp_path)[0], "a") as fh:
        fh.write(
            treelog.dumps({"at": "2026-05-01T13:00:00.000000Z", "op": "drop", "records": ["s5"]})
            + "\n"
        )
    t, base = treefmt.read_for_write(tmp_path, lazy=True)
    assert not isinstance(t, LazyTree)  # (the cache was rebuilt from the shards: read whole)
    assert "s5" not in t.topics["t005"].records
    t, base = treefmt.read_for_write(tmp_path, lazy=True)
    assert isinstance(t, LazyTree) and "s5" not in t.topics["t005"].records
    # archiving and tombstones made on a tree read in part reach the log and the cache
    t.archived = t.archived + ["r9a", "r9b"]
    t.topics["t009"].records = []
    del t.topics["t009"]
    t.gone["t009"] = {"into": None, "why": "archived", "at": "x"}
    treefmt.write(tmp_path, t, now=_at(30), base=base)
    back = treefmt.read(tmp_path)
    assert _same(back, _replayed_from_shards(tmp_path)) and "t009" not in back.topics
    assert {"r9a", "r9b"} <= set(back.archived) and back.gone["t009"]["why"] == "archived"
    assert treecache.CACHE == "tree-cache.db"


def test_a_damaged_or_planted_cache_row_is_never_trusted(tmp_path):
    from memstore.sqlitedb import sqlite3

    from memstore.format import treecache

    (tmp_path / ".memstore").mkdir()
    treefmt.write(tmp_path, _wide(20), now=T0)
    db = tmp_path / ".memstore" / treefmt.CACHE
    want = _replayed_from_shards(tmp_path)

    def run(sql: str) -> None:
        conn = sqlite3.connect(db)
        conn.execute(sql)
        conn.commit()
        conn.close()

    rows = (
        "UPDATE topics SET records = '[1, 2]' WHERE id = 't003'",
        "UPDATE topics SET records = 'not json' WHERE id = 't003'",
        "UPDATE topics SET name = 7 WHERE id = 't003'",
        "UPDATE topics SET parent = x'00' WHERE id = 't003'",
    )
    files = (
        "CREATE TRIGGER t AFTER INSERT ON topics BEGIN DELETE FROM placed; END",
        "DROP INDEX topics_parent",
        "UPDATE meta SET value = 'x' WHERE key = 'last_at' OR key = 'version'",
    )
    for bad in rows + files:
        treefmt.read(tmp_path)  # (a good cache first)
        run(bad)
        assert _same(treefmt.read(tmp_path), want), bad  # rebuilt from the shards
        if bad in rows:  # a write that meets the damaged row reading in part raises Damaged
            run(bad)  # (its caller starts again from the whole tree: see test_tree_assign)
            t, base = treefmt.read_for_write(tmp_path, lazy=True)
            with pytest.raises(treecache.Damaged):
                t.topics["t003"]
        else:  # a file that is not the cache this code made is not read in part
            run(bad)
            t, base = treefmt.read_for_write(tmp_path, lazy=True)
            assert _same(t, want) and not isinstance(t, treefmt.LazyTree)
    run("INSERT OR REPLACE INTO gone VALUES ('zz', '[]')")
    t, base = treefmt.read_for_write(tmp_path, lazy=True)
    with pytest.raises(treecache.Damaged):
        t.gone.get("zz")
    db.write_bytes(b"not a database")
    assert _same(treefmt.read(tmp_path), want)
    t, base = treefmt.read_for_write(tmp_path, lazy=True)
    t.topics["t003"].records.append("x")
    treefmt.write(tmp_path, t, now=_at(1), base=base)
    assert _same(treefmt.read(tmp_path), _replayed_from_shards(tmp_path))


def test_the_cache_after_real_placements_reads_as_a_full_replay(store, monkeypatch):
    from memstore.format import treecache
    from memstore.format.topics import LazyTopics
    from memstore.tree import assign

    from conftest import write_turns

    for k in range(4):
        rows = [
            (f"2026-03-0{k + 1}T10:0{j}:00Z", "user" if j % 2 == 0 else "assistant", text, f"s{k}")
            for j, text in enumerate(
                [f"How do I fix the {w} on my bike?" for w in ("chain", "brake", "tire")][: k + 1]
                + ["Tell me about baking sourdough bread at home."]
            )
        ]
        if k == 3:  # a write of more records than LAZY_RECORDS reads the tree whole
            monkeypatch.setattr(assign, "LAZY_RECORDS", 2)
        elif k:  # a small write never reads the whole tree
            monkeypatch.setattr(
                LazyTopics, "read_all", lambda self: pytest.fail("read the whole tree")
            )
            monkeypatch.setattr(treecache, "_whole", lambda *a: pytest.fail("read the whole cache"))
        write_turns(store, rows, fields=("ts", "role", "text", "session"))
        monkeypatch.undo()
        assert _same(treefmt.read(store.root), _replayed_from_shards(store.root))
    # a write that does not come from read_for_write (reorganize, forget)
    t = treefmt.read(store.root)
    tid = sorted(t.topics)[0]
    t.topics[tid].name = "Renamed by hand"
    treefmt.write(store.root, t)
    back = treefmt.read(store.root)
    assert back.topics[tid].name == "Renamed by hand"
    assert _same(back, _replayed_from_shards(store.root))
