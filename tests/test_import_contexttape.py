"""ct import contexttape: pairs from a ContextTape-format folder (written here with memstore's segment module)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conftest import commits, ct, git_clean, log_records

from memstore.format.segment import DT_TEXT, Header, ShardWriter, segment_name, write_file_atomic

T0 = 1764500000  # 2025-11-30T10:53:20Z


def _unit(seed: int, dim: int = 384) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def _tape(folder, dim=384, dtype="float32"):
    """ContextTape's layout: a wiki document (ids 0/1), a chat turn (2/3), and an orphan text (4)."""
    sw = ShardWriter(folder)
    assert sw.write_pair(
        "Photosynthesis turns light into chemical energy.", _unit(1, dim), dtype, T0
    ) == (0, 1)
    assert sw.write_pair(
        "user: remind me to water the ficus on Fridays", _unit(2, dim), dtype, T0 + 60
    ) == (2, 3)
    body = "assistant: this reply never got its vector".encode()
    write_file_atomic(
        folder / segment_name(4), Header(-1, -1, len(body), DT_TEXT, 0, 1.0, T0 + 120).pack() + body
    )
    return folder


def _vector(root, rec):
    from memstore.format import pack as packfmt

    vec, h16 = packfmt.day_vectors(root, rec["ts"][:10])[rec["id"]]
    assert h16 == rec["hash"][:16]
    return vec


def test_pairs_come_in_with_their_vectors_when_the_model_matches(tmp_path, store):
    tape = _tape(tmp_path / "chat")
    model = store.config.embedder["model"]
    res = json.loads(
        ct("-C", store.root, "import", "contexttape", tape, "--model", model, "--json").stdout
    )
    assert res["added"] == 2
    assert any(
        "1 orphan text segment(s) not in a text/vector pair, not imported" in n
        for n in res["notes"]
    )
    assert (
        commits(store.root)[0]
        == "Import 2 contexttape records from chat (2 vectors kept, 0 re-embedded)"
    )
    assert git_clean(store.root)

    doc, turn = sorted(log_records(store.root), key=lambda r: r["ts"])
    assert doc["text"] == "Photosynthesis turns light into chemical energy."
    assert doc["type"] == "doc" and doc["role"] == "system" and doc["session"] == "chat"
    assert doc["ts"] == "2025-11-30T10:53:20.000000Z"
    assert turn["text"] == "user: remind me to water the ficus on Fridays"  # verbatim, prefix kept
    assert (
        turn["role"] == "user"
        and turn["type"] == "text"
        and turn["ts"] == "2025-11-30T10:54:20.000000Z"
    )
    assert turn["meta"]["contexttape"] == {
        "dir": "chat",
        "text": 2,
        "vec": 3,
    }  # never an absolute path
    np.testing.assert_allclose(_vector(store.root, doc), _unit(1), atol=1e-6)
    np.testing.assert_allclose(_vector(store.root, turn), _unit(2), atol=1e-6)

    # the kept vector is what vector search ranks by
    hits = json.loads(ct("-C", store.root, "search", "ficus", "--mode", "exact", "--json").stdout)[
        "hits"
    ]
    assert hits[0]["text"].startswith("user: remind me")
    assert json.loads(ct("-C", store.root, "fsck", "--json").stdout)["ok"]

    again = json.loads(
        ct("-C", store.root, "import", "contexttape", tape, "--model", model, "--json").stdout
    )
    assert again["added"] == 0 and again["skipped"] == 2 and again["commit"] is None
    assert len(commits(store.root)) == 2


def test_default_re_embeds(tmp_path, store):
    tape = _tape(tmp_path / "wiki")
    res = store.import_("contexttape", tape)
    assert len(res.added) == 2
    assert commits(store.root)[0] == "Import 2 contexttape records from wiki (re-embedded)"
    for rec in res.added:
        own = np.asarray(store.embedder.embed_batch([rec["text"]], "passage")[0], np.float32)
        np.testing.assert_allclose(_vector(store.root, rec), own, atol=1e-6)
        assert abs(float(_vector(store.root, rec) @ _unit(1))) < 0.5


def test_int8_vectors_are_dequantised_and_other_models_or_dims_re_embedded(tmp_path, store):
    model = store.config.embedder["model"]
    res = store.import_("contexttape", _tape(tmp_path / "q", dtype="int8"), model=model)
    doc = [r for r in res.added if r["type"] == "doc"][0]
    assert float(_vector(store.root, doc) @ _unit(1)) > 0.999  # int8 round trip, renormalised

    other = tmp_path / "other"
    sw = ShardWriter(other)
    sw.write_pair("Mitochondria are the powerhouse of the cell.", _unit(3), "float32", T0)
    res = store.import_("contexttape", other, model="text-embedding-3-small")
    assert "vectors were made by text-embedding-3-small" in res.notes[0]
    assert abs(float(_vector(store.root, res.added[0]) @ _unit(3))) < 0.5

    small = tmp_path / "small"
    ShardWriter(small).write_pair("Ribosomes build proteins.", _unit(4, 16), "float32", T0)
    res = store.import_("contexttape", small, model=model)
    assert len(res.added) == 1 and any("another dimension" in n for n in res.notes)
    assert git_clean(store.root)


def test_a_folder_of_stores(tmp_path, store):
    data = tmp_path / "data"
    _tape(data / "wiki")
    ShardWriter(data / "chat").write_pair("assistant: the ficus needs water", _unit(5), "int8", T0)
    res = store.import_("contexttape", data)
    assert sorted(r["session"] for r in res.added) == ["chat", "wiki", "wiki"]
    assert [r["role"] for r in res.added if r["session"] == "chat"] == ["assistant"]


@pytest.mark.parametrize("damage", ["truncated", "not utf-8"])
def test_bad_segments_are_refused_and_nothing_changes(tmp_path, store, damage):
    tape = _tape(tmp_path / "bad")
    p = tape / segment_name(2)
    if damage == "truncated":
        p.write_bytes(p.read_bytes()[:-5])
    else:
        raw = p.read_bytes()
        p.unlink()
        write_file_atomic(p, raw[:32] + b"\xff" + raw[33:])
    proc = ct("-C", store.root, "import", "contexttape", tape, check=False)
    assert proc.returncode == 4 and str(p) in proc.stderr and "Nothing was imported" in proc.stderr
    assert len(commits(store.root)) == 1 and git_clean(store.root) and log_records(store.root) == []


def test_not_a_contexttape_folder(tmp_path, store):
    (tmp_path / "empty").mkdir()
    proc = ct("-C", store.root, "import", "contexttape", tmp_path / "empty", check=False)
    assert proc.returncode == 2 and "no ContextTape segments" in proc.stderr
