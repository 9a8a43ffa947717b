"""ct import trace: a TRACE save's conversation as records and its topic structure in tree.json."""

from __future__ import annotations

import json
import sys

from conftest import commits, ct, git_clean, make_store
from memstore.format import tree as treefmt
from memstore.ingest.import_trace import topic_id

T0 = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC


def msg(idx, user, assistant, system=None):
    """A message node as TRACE's save() writes it (texts cut to 200 characters)."""
    node = {
        "type": "message",
        "message_index": idx,
        "user": user[:200],
        "assistant": assistant[:200],
        "sub_node_count": 0,
    }
    if system is not None:
        node["system"] = system[:200]
    return node


def topic(node_id, name, summary, start, end, created, children):
    return {
        "type": "topic",
        "node_id": node_id,
        "topic_name": name,
        "summary": summary,
        "start_index": start,
        "end_index": end,
        "sub_node_count": len(children),
        "created_at": created,
        "children": children,
    }


CONVERSATION = [
    {"role": "user", "content": "Let's plan the Lisbon trip budget: 2,400 euros in total."},
    {"role": "assistant", "content": "Noted: a 2,400 euro cap for Lisbon."},
    {"role": "system", "content": "Tool result: flights LIS from 310 euros."},
    {"role": "user", "content": "Flights are 310, so what is left for the rest?"},
    {"role": "assistant", "content": "2,090 euros remain after flights."},
    {"role": "user", "content": "Which hotel in Alfama fits the remaining budget?"},
    {"role": "assistant", "content": "Casa Alfama at 95 euros a night fits."},
    {"role": "user", "content": "Separately: my bike needs a new chain."},
    {
        "role": "assistant",
        "content": [{"type": "text", "text": "A 9-speed chain costs about 25 euros."}],
    },
    {"role": "user", "content": "ok"},
    {"role": "assistant", "content": "👍"},
]


def trace_save(conversation=CONVERSATION, extra_exchange=False):
    hotel = topic(
        "node-hotel",
        "Alfama hotel choice",
        "Picking a hotel in Alfama.",
        5,
        7,
        T0 + 600,
        [msg(5, "Which hotel", "Casa Alfama")],
    )
    trip = topic(
        "node-trip",
        "Lisbon trip budget",
        "Budget for the Lisbon trip.",
        0,
        7,
        T0,
        [
            msg(0, "Let's plan", "Noted"),
            msg(2, "Flights are 310", "2,090", system="Tool result"),
            hotel,
        ],
    )
    bike_children = [msg(7, "Separately", "A 9-speed chain")]
    if extra_exchange:
        bike_children.append(msg(11, "And brake pads?", "About 15 euros."))
    bike = topic(
        "node-bike", "Error: 502 Bad Gateway", "", 7, len(conversation), T0 + 1200, bike_children
    )
    root = topic(
        "node-root",
        "ROOT",
        "Virtual root node of the conversation tree",
        0,
        len(conversation),
        T0 - 60,
        [trip, bike],
    )
    return {
        "max_children": 5,
        "total_messages": len(conversation),
        "tree": root,
        "conversation": conversation,
        "archived": [msg(9, "ok", "👍")],
    }


def write_save(path, data):
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def _records(root):
    return [
        json.loads(line)
        for p in sorted((root / "log").rglob("*.jsonl"))
        for line in p.read_text(encoding="utf-8").splitlines()
    ]


def test_import_trace_records_and_topics(tmp_path):
    st = make_store(tmp_path / "s")
    save = write_save(tmp_path / "lisbon.json", trace_save())
    res = json.loads(ct("-C", st.root, "import", "trace", save, "--json").stdout)
    assert res["added"] == 11
    recs = _records(st.root)
    assert [r["text"] for r in recs][:3] == [
        CONVERSATION[0]["content"],
        CONVERSATION[1]["content"],
        CONVERSATION[2]["content"],
    ]
    assert (
        recs[8]["text"] == "A 9-speed chain costs about 25 euros."
    )  # content parts joined, verbatim
    assert [r["role"] for r in recs[:5]] == ["user", "assistant", "system", "user", "assistant"]
    assert [r["id"] for r in recs] == [f"trace:node-root:{i}" for i in range(11)]
    assert all(r["session"] == "lisbon" and r["meta"]["ts_approx"] is True for r in recs)
    assert [r["meta"]["trace_index"] for r in recs] == list(range(11))
    ts = [r["ts"] for r in recs]
    assert ts == sorted(ts) and len(set(ts)) == 11  # conversation order, strictly increasing
    assert ts[0] == "2026-05-28T20:26:40.000000Z"  # dated by its topic's creation
    assert ts[5] == "2026-05-28T20:36:40.000000Z"  # the hotel topic was created 10 minutes later

    tree = treefmt.read(st.root)
    trip, hotel, bike = (
        topic_id({"node_id": "node-trip"}),
        topic_id({"node_id": "node-hotel"}),
        topic_id({"node_id": "node-bike"}),
    )
    assert set(tree.topics) == {trip, hotel, bike}
    assert tree.topics[trip].name == "Lisbon trip budget" and tree.topics[trip].parent is None
    assert (
        tree.topics[trip].summary == "Budget for the Lisbon trip."
        and tree.topics[trip].named_by == "llm"
    )
    assert tree.topics[hotel].parent == trip
    ids = [f"trace:node-root:{i}" for i in range(11)]
    assert tree.topics[trip].records == ids[0:5]  # the exchange at 2 owns the system message too
    assert tree.topics[hotel].records == ids[5:7]
    assert tree.topics[bike].records == ids[7:9]
    # TRACE stored an error string as a name; it is replaced by an offline name from the texts.
    assert tree.topics[bike].named_by == "offline" and "error" not in tree.topics[bike].name.lower()
    assert set(tree.archived) == set(ids[9:11])
    assert tree.current == bike  # TRACE's rule: the last child, followed down
    assert tree.topics[hotel].created == "2026-05-28T20:36:40.000000Z"

    assert commits(st.root)[0] == "Import 11 trace records and 3 topics from lisbon.json"
    assert git_clean(st.root)
    assert "ok:" in ct("-C", st.root, "fsck").stdout
    shown = ct("-C", st.root, "tree").stdout
    assert "Lisbon trip budget" in shown and "Alfama hotel choice" in shown


def test_reimport_adds_only_new_messages(tmp_path):
    st = make_store(tmp_path / "s")
    save = write_save(tmp_path / "lisbon.json", trace_save())
    ct("-C", st.root, "import", "trace", save)
    n = len(commits(st.root))
    assert "nothing new" in ct("-C", st.root, "import", "trace", save).stderr
    assert len(commits(st.root)) == n
    longer = CONVERSATION + [
        {"role": "user", "content": "And brake pads?"},
        {"role": "assistant", "content": "About 15 euros for a pair."},
    ]
    write_save(save, trace_save(longer, extra_exchange=True))
    res = json.loads(ct("-C", st.root, "import", "trace", save, "--json").stdout)
    assert res["added"] == 2 and res["skipped"] == 11
    tree = treefmt.read(st.root)
    bike = tree.topics[topic_id({"node_id": "node-bike"})]
    assert bike.records == [f"trace:node-root:{i}" for i in (7, 8, 11, 12)]
    assert tree.record_count() + len(tree.archived) == 13
    assert len(_records(st.root)) == 13 and git_clean(st.root)


def test_save_without_conversation_is_refused(tmp_path):
    st = make_store(tmp_path / "s")
    data = trace_save()
    del data["conversation"]
    save = write_save(tmp_path / "lisbon.json", data)
    proc = ct("-C", st.root, "import", "trace", save, check=False)
    assert proc.returncode == 4
    assert "lisbon.json" in proc.stderr and "save_conversation=True" in proc.stderr
    assert len(commits(st.root)) == 1 and git_clean(st.root) and not (st.root / "tree").exists()


def test_bad_input_changes_nothing(tmp_path):
    st = make_store(tmp_path / "s")
    bad = tmp_path / "bad.json"
    bad.write_text('{"tree": {"type": "topic", "children": [', encoding="utf-8")
    proc = ct("-C", st.root, "import", "trace", bad, check=False)
    assert proc.returncode == 4 and "bad.json" in proc.stderr and "not valid JSON" in proc.stderr
    data = trace_save()
    data["conversation"][3] = {"role": "wizard", "content": "hm"}
    proc = ct(
        "-C", st.root, "import", "trace", write_save(tmp_path / "role.json", data), check=False
    )
    assert proc.returncode == 4 and "conversation[3]" in proc.stderr and "wizard" in proc.stderr
    assert len(commits(st.root)) == 1 and git_clean(st.root)


def test_a_deep_tree_does_not_hit_the_recursion_limit(tmp_path):
    # TRACE nests one level per continuation; 520 levels (1040 nested JSON values) is past the default
    # recursion limit of json and of any recursive walk.
    depth = 520
    conv, node = [], None
    for i in reversed(range(depth)):
        children = [msg(2 * i, "q", "a")] + ([node] if node else [])
        node = topic(f"n{i}", f"Step {i}", "", 2 * i, 2 * depth, T0 + i, children)
    for i in range(depth):
        conv += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    root = topic("root", "ROOT", "", 0, 2 * depth, T0 - 1, [node])
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # only for writing the fixture: json's encoder recurses per level
    try:
        save = tmp_path / "deep.json"
        save.write_text(json.dumps({"tree": root, "conversation": conv}), encoding="utf-8")
    finally:
        sys.setrecursionlimit(limit)
    st = make_store(tmp_path / "s")
    from memstore.ingest.run import import_source

    res = import_source(st, "trace", save)
    assert len(res.added) == 2 * depth
    tree = treefmt.read(st.root)
    assert len(tree.topics) == depth and len(tree.ancestry(tree.current)) == depth
    assert git_clean(st.root)


def test_times_stepped_past_the_calendar_s_end_are_a_clear_error(tmp_path):
    """Messages of one topic get its time, each a millisecond after the last to keep their order;
    a topic dated in the last millisecond of year 9999 stepped past the calendar: a traceback
    (ValueError: year 10000 is out of range), now exit 4 naming the message, nothing changed."""
    st = make_store(tmp_path / "s")
    data = trace_save()

    def late(node):
        node["created_at"] = 253402300799.9995
        for child in node.get("children", []):
            if isinstance(child, dict) and child.get("type") == "topic":
                late(child)

    late(data["tree"])
    proc = ct(
        "-C", st.root, "import", "trace", write_save(tmp_path / "late.json", data), check=False
    )
    assert proc.returncode == 4 and "Traceback" not in proc.stderr, proc.stderr
    assert "conversation[" in proc.stderr and "outside the years 1-9999" in proc.stderr
    assert len(commits(st.root)) == 1 and git_clean(st.root)
