"""Property-based round trips (hypothesis): records through normalize/dumps/loads and day-log reading,
segments through headers, pairs, vectors (float32 exact, int8 within half a step) and blobs."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memstore.format import log as logfmt
from memstore.format import record as recordfmt
from memstore.format.segment import (
    DT_BLOB,
    DT_JSON,
    DT_TEXT,
    DT_VEC_F32,
    DT_VEC_I8,
    Header,
    ShardWriter,
    SegmentError,
    decode_vector,
    read_segment,
    segment_ids,
    segment_name,
)
from memstore.format.timeutil import zone

UTC = zone("UTC")
FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

text_st = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=400
)
name_st = st.text(
    st.characters(min_codepoint=32, max_codepoint=0x2FFF, blacklist_categories=("Cs",)),
    min_size=1,
    max_size=30,
)
ts_st = st.datetimes(
    min_value=__import__("datetime").datetime(1971, 1, 1),
    max_value=__import__("datetime").datetime(2100, 1, 1),
    timezones=st.just(__import__("datetime").timezone.utc),
)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    text_st,
    st.floats(allow_nan=False, allow_infinity=False),
)
json_st = st.recursive(
    json_leaf,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(name_st, kids, max_size=4)),
    max_leaves=10,
)


@st.composite
def raw_records(draw):
    raw = {
        "ts": draw(ts_st).isoformat(),
        "role": draw(st.sampled_from(list(recordfmt.ROLES) + list(recordfmt.ROLE_ALIASES))),
        "type": draw(st.sampled_from(recordfmt.TYPES)),
        "text": draw(text_st),
    }
    if draw(st.booleans()):
        raw["actor"] = draw(name_st)
    if draw(st.booleans()):
        raw["session"] = draw(name_st)
    if draw(st.booleans()):
        raw["id"] = draw(name_st)
    extra = draw(
        st.dictionaries(
            name_st.filter(lambda k: k not in recordfmt.FIELD_ORDER), json_st, max_size=3
        )
    )
    raw.update(extra)
    return raw


@FAST
@given(raw_records(), st.booleans())
def test_record_round_trip(raw, derive):
    rec = recordfmt.normalize(raw, UTC, derive_id=derive)
    rec["hash"] = recordfmt.text_hash(rec["text"])
    line = recordfmt.dumps(rec)
    assert "\n" not in line  # one record, one line, whatever the text holds
    back = recordfmt.loads(line)
    assert back == rec
    assert list(back)[:7] == list(recordfmt.LOSSLESS_FIELDS)
    assert back["text"] == raw["text"]  # verbatim
    for k, v in raw.items():  # unknown fields are kept, under meta
        if k not in recordfmt.FIELD_ORDER:
            assert back["meta"][k] == v
    again = recordfmt.normalize(dict(back), UTC, derive_id=derive)
    assert again["id"] == rec["id"] and again["ts"] == rec["ts"]


@FAST
@given(st.lists(raw_records(), min_size=1, max_size=6), st.binary(max_size=40))
def test_day_log_reads_back_every_line_and_isolates_a_torn_tail(tmp_path_factory, raws, torn):
    path = tmp_path_factory.mktemp("log") / "2026-11-30.jsonl"
    recs = [recordfmt.normalize(r, UTC) for r in raws]
    logfmt.append(path, recs[:2], fsync=False)
    with open(path, "ab") as fh:  # a write that was cut short
        fh.write(b"{" + torn.replace(b"\n", b" "))
    logfmt.append(path, recs[2:], fsync=False)
    lines = list(logfmt.read_lines(path))
    good = [ln.record for ln in lines if ln.record is not None]
    assert good == recs
    assert sum(1 for ln in lines if ln.record is None) == 1
    data = path.read_bytes()
    for ln in lines:
        if ln.record is not None:
            assert recordfmt.loads(data[ln.offset : ln.offset + ln.length].decode()) == ln.record


header_st = st.builds(
    Header,
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.floats(width=32, allow_nan=False),
    st.integers(-(2**63), 2**63 - 1),
)


@FAST
@given(header_st)
def test_header_round_trip(h):
    raw = h.pack()
    assert len(raw) == 32 and Header.unpack(raw) == h


@FAST
@given(
    st.lists(
        st.tuples(
            text_st, st.integers(1, 64), st.sampled_from(["float32", "int8"]), st.integers(0, 2**40)
        ),
        min_size=1,
        max_size=5,
    ),
    st.data(),
)
def test_pairs_round_trip(tmp_path_factory, items, data):
    folder = tmp_path_factory.mktemp("shard")
    sw = ShardWriter(folder)
    written = []
    for text, dim, dtype, unix in items:
        vec = np.array(
            data.draw(st.lists(st.floats(-4, 4, width=32), min_size=dim, max_size=dim)), np.float32
        )
        tid, vid = sw.write_pair(text, vec, dtype, unix, fsync=False)
        written.append((tid, vid, text, vec, dtype, unix))
    assert segment_ids(folder) == list(range(2 * len(items)))
    reopened = ShardWriter(folder)  # ids continue after what is on disk
    assert reopened.next_id == 2 * len(items)
    for tid, vid, text, vec, dtype, unix in written:
        th, tbody = read_segment(folder / segment_name(tid))
        vh, vbody = read_segment(folder / segment_name(vid))
        assert th.data_type == DT_TEXT and th.next_id == vid and tbody.decode("utf-8") == text
        assert vh.prev_id == tid and vh.dim == len(vec) and th.unix_time == vh.unix_time == unix
        back = decode_vector(vh, vbody)
        if dtype == "float32":
            assert vh.data_type == DT_VEC_F32 and np.array_equal(back, vec)
        else:
            assert vh.data_type == DT_VEC_I8
            assert np.all(np.abs(back - vec) <= vh.scale / 2 + 1e-6)


@FAST
@given(
    st.binary(max_size=2000), st.dictionaries(name_st, json_st, max_size=4), st.integers(0, 2**40)
)
def test_blob_round_trip(tmp_path_factory, payload, manifest, unix):
    folder = tmp_path_factory.mktemp("blob")
    bid, mid = ShardWriter(folder).write_blob(payload, DT_BLOB, manifest, unix, fsync=False)
    bh, bbody = read_segment(folder / segment_name(bid))
    mh, mbody = read_segment(folder / segment_name(mid))
    assert bbody == payload and bh.next_id == mid and mh.prev_id == bid and mh.data_type == DT_JSON
    assert json.loads(mbody) == manifest


@FAST
@given(
    st.binary(min_size=0, max_size=31) | st.binary(min_size=33, max_size=200), st.integers(1, 40)
)
def test_truncated_or_padded_segments_are_refused(tmp_path_factory, junk, cut):
    folder = tmp_path_factory.mktemp("bad")
    tid, _ = ShardWriter(folder).write_pair(
        "some text here", np.ones(4, np.float32), "float32", 0, fsync=False
    )
    p = folder / segment_name(tid)
    good = p.read_bytes()
    for bad in (good[: max(0, len(good) - cut)], good + b"x" * cut, junk):
        p.write_bytes(bad)
        try:
            h, body = read_segment(p)
        except SegmentError:
            continue
        # Anything accepted must be exactly self-consistent.
        assert len(body) == h.data_len and len(bad) == 32 + h.data_len
