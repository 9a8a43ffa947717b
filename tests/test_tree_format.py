"""tree.json: validation with clear errors, deterministic bytes, three-way merge and the git merge driver."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import ct, git_clean
from memstore.errors import FormatError
from memstore.format import tree as treefmt
from memstore.format.tree import Topic, Tree


def _tree(**topics) -> Tree:
    t = Tree()
    for tid, (parent, recs, last) in topics.items():
        t.topics[tid] = Topic(id=tid, name=f"name {tid}", parent=parent, records=list(recs),
                              created="2026-01-01T00:00:00.000000Z", last_active=last)
    return t


def test_dumps_is_deterministic_and_roundtrips():
    t = _tree(b=(None, ["r2", "r1"], "2026-01-02"), a=("b", ["r3"], "2026-01-03"))
    t.current = "a"
    text = t.dumps()
    assert text == treefmt.parse(text).dumps()
    data = json.loads(text)
    assert list(data["topics"]) == ["a", "b"] and data["topics"]["b"]["records"] == ["r2", "r1"]
    assert '\n        "r2",\n' in text  # one record id per line: git diff reads as "these records joined"


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d.update(format=9), "unsupported tree format"),
    (lambda d: d["topics"]["a"].pop("records"), "lacks records"),
    (lambda d: d["topics"]["a"].update(parent="zz"), "not a topic"),
    (lambda d: d["topics"]["a"].update(records="r1"), "list of record ids"),
    (lambda d: d.update(current="nope"), '"current" names'),
    (lambda d: (d["topics"]["a"].update(parent="b"), d["topics"]["b"].update(parent="a")), "cycle"),
])
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


def test_merge_unions_records_and_keeps_newest_name():
    base = _tree(a=(None, ["r1"], "2026-01-01"))
    ours = _tree(a=(None, ["r1", "r2"], "2026-01-02"), b=(None, ["r5"], "2026-01-02"))
    theirs = _tree(a=(None, ["r1", "r3"], "2026-01-03"), c=(None, ["r6"], "2026-01-03"))
    theirs.topics["a"].name = "renamed by theirs"
    m = treefmt.merge(base, ours, theirs)
    assert m.topics["a"].records == ["r1", "r2", "r3"]
    assert m.topics["a"].name == "renamed by theirs"
    assert set(m.topics) == {"a", "b", "c"}


def test_merge_follows_tombstones_so_no_record_is_lost():
    base = _tree(old=(None, ["r1"], "1"), new=(None, ["r2"], "1"))
    ours = _tree(old=(None, ["r1", "r2"], "2"))          # ours merged "new" into "old"
    ours.gone["new"] = {"into": "old", "why": "merged", "at": "2"}
    theirs = _tree(old=(None, ["r1"], "1"), new=(None, ["r2", "r9"], "3"))   # theirs kept adding to "new"
    m = treefmt.merge(base, ours, theirs)
    assert "new" not in m.topics and m.topics["old"].records == ["r1", "r2", "r9"]
    assert m.gone["new"]["into"] == "old"
    owners = [r for t in m.topics.values() for r in t.records]
    assert len(owners) == len(set(owners))


def test_merge_driver_on_diverged_clones(tmp_path):
    """Two branches both add turns (so both change tree.json): git merges with zero conflicts."""
    from conftest import make_store

    st = make_store(tmp_path / "s")
    st.add("We are planning a trip to Lisbon in spring.", ts="2026-03-01T10:00:00Z")
    git = lambda *a: subprocess.run(["git", "-C", str(st.root), *a], capture_output=True, text=True, check=True)
    git("checkout", "-q", "-b", "other")
    st.add("Chess openings for beginners: the Italian game.", ts="2026-03-02T10:00:00Z")
    git("checkout", "-q", "main")
    st.add("Gardening: tomatoes need full sun and deep watering.", ts="2026-03-03T10:00:00Z")
    out = subprocess.run(["git", "-C", str(st.root), "-c", "user.name=t", "-c", "user.email=t@t", "merge",
                          "--no-edit", "other"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    tree = treefmt.read(st.root)
    st.index()
    ids = [r[0] for r in st.index().conn.execute("SELECT id FROM records")]
    assert sorted(tree.topic_of()) == sorted(ids)
    assert git_clean(st.root)


def test_merge_files_refuses_garbage(tmp_path):
    good = tmp_path / "ours.json"
    good.write_text(_tree(a=(None, ["r1"], "1")).dumps())
    bad = tmp_path / "theirs.json"
    bad.write_text("{oops")
    before = good.read_text()
    assert treefmt.merge_files(str(tmp_path / "missing"), str(good), str(bad)) is False
    assert good.read_text() == before


def test_problems_for_fsck(tmp_path):
    t = _tree(a=(None, ["r1", "r2"], "1"), b=(None, ["r2"], "1"))
    t.archived = ["r1"]
    treefmt.write(tmp_path, t)
    found = treefmt.problems(tmp_path, known_ids={"r1"})
    assert any("r2 is in topics a and b" in p for p in found)
    assert any("r2, which is not in any day log" in p for p in found)
    assert any("r1 is both archived" in p for p in found)
    (tmp_path / "tree.json").write_text("[]")
    assert "top level must be a JSON object" in treefmt.problems(tmp_path)[0]


def test_merge_drops_groups_left_empty():
    base = _tree(g=(None, [], "1"), a=("g", ["r1"], "1"))
    ours = _tree(g=(None, [], "1"), a=(None, ["r1"], "2"))      # ours moved "a" out of the group
    theirs = _tree(g=(None, [], "1"), a=("g", ["r1", "r2"], "1"))
    m = treefmt.merge(base, ours, theirs)
    assert m.topics["a"].parent is None and "g" not in m.topics and m.gone["g"]["why"] == "regrouped"
    assert m.topics["a"].records == ["r1", "r2"]
