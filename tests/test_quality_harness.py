"""The retrieval-quality harness: metric code on hand-computed cases, loaders for both data layouts, end-to-end runs."""

from __future__ import annotations

import json
import math

import pytest

from memstore.bench import lme, quality, scifact
from memstore.errors import FormatError

# ----- fixtures written by the tests ----------------------------------------------------------


def _turn(role, content, has_answer=None):
    t = {"role": role, "content": content}
    if has_answer is not None:
        t["has_answer"] = has_answer
    return t


def lme_questions() -> list[dict]:
    dog = {
        "question_id": "q_dog",
        "question_type": "single-session-user",
        "question": "What breed is my dog?",
        "answer": "a beagle",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["s_pasta", "answer_dog1", "s_car", "answer_dog2"],
        "haystack_dates": [
            "2023/05/01 (Mon) 09:00",
            "2023/05/10 (Wed) 18:30",
            "2023/05/12 (Fri) 08:00",
            "2023/05/20 (Sat) 12:00",
        ],
        "haystack_sessions": [
            [
                _turn("user", "I love cooking pasta with fresh basil and tomatoes."),
                _turn("assistant", "Fresh basil makes a great sauce."),
            ],
            [
                _turn("user", "I just adopted a dog, a beagle puppy named Max!", True),
                _turn("assistant", "Congratulations on Max, beagles are lovely.", False),
                _turn("user", "   "),
            ],
            [
                _turn("user", "My car needs new tires before the road trip."),
                # public conversation data holds leaked credentials: the harness stores them anyway
                _turn(
                    "assistant",
                    'Check the tread depth first. DATABASE_URL = "postgresql://user:password@localhost/mydatabase"',
                ),
            ],
            [
                _turn("user", "Max the dog chewed my shoes, typical beagle breed behaviour.", True),
                _turn("assistant", "Chew toys help with that.", False),
            ],
        ],
        "answer_session_ids": ["answer_dog1", "answer_dog2"],
    }
    bike = {
        "question_id": "q_bike",
        "question_type": "temporal-reasoning",
        "question": "What did I buy yesterday?",
        "answer": "a bicycle",
        "question_date": "2023/06/10 (Sat) 10:00",
        "haystack_session_ids": ["s_lamp", "answer_bike", "s_garden"],
        "haystack_dates": [
            "2023/05/20 (Sat) 11:00",
            "2023/06/09 (Fri) 17:15",
            "2023/06/02 (Fri) 09:00",
        ],
        "haystack_sessions": [
            [
                _turn("user", "I went to buy a reading lamp for the study."),
                _turn("assistant", "Warm light is nice."),
            ],
            [
                _turn("user", "Today I went to buy a new bicycle for commuting.", True),
                _turn("assistant", "Enjoy the rides to work!"),
            ],
            [
                _turn("user", "The tomatoes in my garden are ripening."),
                _turn("assistant", "Water them early."),
            ],
        ],
        "answer_session_ids": ["answer_bike"],
    }
    unanswerable = {
        "question_id": "q_cat_abs",
        "question_type": "single-session-user",
        "question": "What is my cat's name?",
        "answer": "You did not mention a cat.",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["s_x"],
        "haystack_dates": ["2023/05/01 (Mon) 09:00"],
        "haystack_sessions": [[_turn("user", "I like hiking in the Alps.")]],
        "answer_session_ids": [],
    }
    # A second question of the first type, so that --limit 1 has something to leave out.
    tea = {
        "question_id": "q_tea",
        "question_type": "single-session-user",
        "question": "Which tea do I drink?",
        "answer": "green tea",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["answer_tea", "s_other"],
        "haystack_dates": ["2023/05/02 (Tue) 07:00", "2023/05/03 (Wed) 07:00"],
        "haystack_sessions": [
            [_turn("user", "Every morning I drink green tea.", True)],
            [_turn("user", "The weather is rainy today.")],
        ],
        "answer_session_ids": ["answer_tea"],
    }
    return [dog, bike, unanswerable, tea]


ABSTRACTS = [
    (
        "Aspirin and heart attacks",
        ["Daily aspirin lowers the risk of myocardial infarction.", "A trial of 2,000 adults."],
    ),
    ("Vitamin D and bones", ["Vitamin D supplements increase bone density in older women."]),
    ("Sleep and memory", ["Sleep consolidates declarative memory.", "Deprivation impairs recall."]),
    ("Coffee consumption", ["Coffee intake is associated with lower liver disease mortality."]),
    ("Exercise and depression", ["Aerobic exercise reduces symptoms of depression in adults."]),
    ("Statins", ["Statins reduce LDL cholesterol and cardiovascular events."]),
    ("Gut microbiome", ["The gut microbiome influences immune development in infants."]),
    ("Smoking and lung cancer", ["Tobacco smoking causes most cases of lung cancer."]),
    ("Salt and blood pressure", ["High sodium intake raises blood pressure."]),
    ("Antibiotic resistance", ["Overuse of antibiotics drives bacterial resistance."]),
]
CLAIMS = [
    ("1", "Aspirin reduces myocardial infarction risk.", ["100"]),
    ("3", "Sleep deprivation impairs memory recall.", ["102"]),
    ("7", "Smoking tobacco causes lung cancer and raises blood pressure.", ["107", "108"]),
]


def write_scifact_beir(root):
    (root / "qrels").mkdir(parents=True)
    with open(root / "corpus.jsonl", "w") as f:
        for i, (title, sents) in enumerate(ABSTRACTS):
            f.write(
                json.dumps({"_id": str(100 + i), "title": title, "text": " ".join(sents)}) + "\n"
            )
    with open(root / "queries.jsonl", "w") as f:
        for qid, text, _ in CLAIMS + [("9", "An unjudged claim about coffee.", [])]:
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t1" for q, _, docs in CLAIMS for d in docs]
    (root / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n")


def write_scifact_original(root):
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w") as f:
        for i, (title, sents) in enumerate(ABSTRACTS):
            f.write(
                json.dumps(
                    {"doc_id": 100 + i, "title": title, "abstract": sents, "structured": False}
                )
                + "\n"
            )
    with open(root / "claims_dev.jsonl", "w") as f:
        for qid, text, docs in CLAIMS[:2]:
            ev = {d: [{"sentences": [0], "label": "SUPPORT"}] for d in docs}
            f.write(
                json.dumps(
                    {
                        "id": int(qid),
                        "claim": text,
                        "evidence": ev,
                        "cited_doc_ids": [int(d) for d in docs],
                    }
                )
                + "\n"
            )
        qid, text, docs = CLAIMS[2]  # NOT ENOUGH INFO: no evidence, judged by the cited abstracts
        f.write(
            json.dumps(
                {
                    "id": int(qid),
                    "claim": text,
                    "evidence": {},
                    "cited_doc_ids": [int(d) for d in docs],
                }
            )
            + "\n"
        )


@pytest.fixture
def bench_data(tmp_path):
    data = tmp_path / "bench-data"
    (data / "longmemeval").mkdir(parents=True)
    (data / "longmemeval" / "longmemeval_s_cleaned.json").write_text(json.dumps(lme_questions()))
    write_scifact_beir(data / "scifact")
    return data


def run_harness(tmp_path, *args):
    out = tmp_path / "quality.md"
    code = quality.main(
        [
            "--embedder",
            "hash",
            "--out",
            str(out),
            "--cache",
            str(tmp_path / "c" / "emb.sqlite"),
            "--work",
            str(tmp_path / "work"),
            "--quiet",
            *map(str, args),
        ]
    )
    return code, out


# ----- metrics on hand-computed cases ---------------------------------------------------------


def test_session_metrics_follow_the_best_turn_and_the_official_discount():
    hs = lme.Haystack(
        records=[],
        session_of={"a1": "A", "b1": "B", "b2": "B", "c1": "C", "d1": "D"},
        gold_turns={"c1"},
    )
    ranked = ["b1", "a1", "b2", "c1", "d1"]  # sessions by best turn: B, A, C, D
    m = lme.score(ranked, hs, {"A", "C"})
    assert (m["recall_any@1"], m["recall_all@1"], m["ndcg@1"]) == (0.0, 0.0, 0.0)
    assert m["recall_any@5"] == m["recall_all@5"] == 1.0
    # DCG = 0 + 1/log2(2) + 1/log2(3); ideal = 1 + 1/log2(2) = 2 (positions 1 and 2 both undiscounted).
    assert m["ndcg@5"] == pytest.approx((1 + 1 / math.log2(3)) / 2)
    assert m["turn_recall_any@10"] == 1.0
    assert lme.score(["b1", "d1"], hs, {"A", "C"})["recall_any@10"] == 0.0
    only_a = lme.score(["a1", "b1"], hs, {"A", "C"})
    assert only_a["recall_any@1"] == 1.0 and only_a["recall_all@10"] == 0.0
    assert only_a["ndcg@1"] == 1.0 and only_a["ndcg@10"] == pytest.approx(1 / 2)


def test_scifact_metrics_are_beirs():
    rel = {"d1": 1, "d2": 1}
    assert scifact.ndcg(["d3", "d1", "d2"], rel, 10) == pytest.approx(
        (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    )
    assert scifact.ndcg(["d1", "d2"], rel, 10) == pytest.approx(1.0)
    assert (
        scifact.recall(["d3", "d1"], rel, 2) == 0.5
        and scifact.recall(["d3", "d1", "d2"], rel, 2) == 0.5
    )
    assert scifact.recall(["d2", "d1"], rel, 100) == 1.0


def test_summaries_average_per_type_and_skip_missing_turn_labels():
    rows = [
        {"qtype": "x", "metrics": {"recall_all@5": 1.0, "turn_recall_any@10": 0.0}},
        {"qtype": "x", "metrics": {"recall_all@5": 0.0}},
        {"qtype": "y", "metrics": {"recall_all@5": 1.0, "turn_recall_any@10": 1.0}},
    ]
    s = lme.summarize(rows)
    assert (
        s["x"]["recall_all@5"] == 0.5
        and s["x"]["turn_recall_any@10"] == 0.0
        and s["x"]["n_turn"] == 1
    )
    assert s["all"]["n"] == 3 and s["all"]["recall_all@5"] == pytest.approx(2 / 3)
    assert s["all"]["turn_recall_any@10"] == 0.5


# ----- loaders --------------------------------------------------------------------------------


def test_lme_loader_dates_records_and_stratified_subset(bench_data):
    file, qs = lme.load(bench_data / "longmemeval")
    assert file.name == "longmemeval_s_cleaned.json" and len(qs) == 4
    assert [q.qid for q in lme.stratified(qs, None)] == ["q_dog", "q_bike", "q_tea"]
    assert [q.qid for q in lme.stratified(qs, 1)] == ["q_dog", "q_bike"]
    dog = qs[0]
    assert dog.date.isoformat() == "2023-05-30T23:40:00+00:00"
    hs = lme.haystack(dog)
    assert len(hs.records) == 8 and hs.skipped_blank == 1
    assert hs.gold_turns == {"lme-001-000", "lme-003-000"}
    assert hs.records[3]["ts"].isoformat() == "2023-05-10T18:30:01+00:00"  # turn 1 of its session


def test_lme_loader_errors_name_the_file(tmp_path):
    from memstore.errors import FormatError, UsageError

    bad = tmp_path / "longmemeval_s.json"
    q = lme_questions()[0]
    q["haystack_dates"][0] = "yesterday"
    bad.write_text(json.dumps([q]))
    with pytest.raises(FormatError, match=r"longmemeval_s\.json: question 1: .*'yesterday'"):
        lme.load(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=f"no longmemeval_s.*in {empty}"):
        lme.load(empty)
    with pytest.raises(UsageError, match=f"{tmp_path / 'nowhere'} does not exist"):
        lme.load(tmp_path / "nowhere")


def test_scifact_both_layouts_load_the_same_corpus_and_judgements(tmp_path):
    write_scifact_beir(tmp_path / "beir")
    write_scifact_original(tmp_path / "orig" / "data")  # the original archive unpacks into data/
    a, b = scifact.load(tmp_path / "beir"), scifact.load(tmp_path / "orig")
    assert (a.layout, b.layout) == ("beir", "original")
    assert a.docs == b.docs and a.qrels == b.qrels and len(a.qrels) == 3
    assert {q: a.queries[q] for q in a.qrels} == {q: b.queries[q] for q in b.qrels}
    assert a.document_text("100").startswith("Aspirin and heart attacks\n\nDaily aspirin")
    assert "1 claims without evidence judged by their cited_doc_ids" in b.notes[0]


# ----- the harness end to end -----------------------------------------------------------------


def test_harness_runs_end_to_end_and_writes_its_report(tmp_path, bench_data):
    code, out = run_harness(tmp_path, "--data", bench_data)
    assert code == 0
    text = out.read_text()
    for needle in (
        "# Retrieval quality",
        "## LongMemEval_S",
        "### hybrid+time",
        "## SciFact",
        "## Ablations beside the published anchors",
        "| **memstore hybrid** |",
        "0.764",
        "0.741",
        "## Goals of issue 14",
        "3 scored",
        "temporal-reasoning",
        "## How to run",
        "| **memstore naive-rrf** |",
        "naive RRF",
    ):
        assert needle in text, needle
    assert "Not measured" not in text
    raw = json.loads((tmp_path / "c" / "quality-last.json").read_text())
    lm, sf = raw["longmemeval"], raw["scifact"]
    assert lm["abstention_skipped"] == 1 and [r["qid"] for r in lm["rows"]] == [
        "q_dog",
        "q_bike",
        "q_tea",
    ]
    dog = lm["rows"][0]["metrics"]
    # "dog" and "breed" are words of both gold sessions only: exact search puts them first.
    assert dog["exact"]["recall_all@5"] == 1.0 and dog["exact"]["ndcg@10"] == 1.0
    assert dog["hybrid"]["recall_any@1"] == 1.0
    # "yesterday" becomes a window on 2023-06-09, which holds only the gold session.
    bike = lm["rows"][1]
    assert bike["level"] == "in_window" and bike["metrics"]["hybrid+time"]["recall_all@1"] == 1.0
    assert sf["claims"] == 3 and sf["docs"] == 10
    assert sf["summary"]["exact"]["recall@100"] == 1.0 and sf["summary"]["hybrid"]["ndcg@10"] > 0.5
    assert (
        sf["summary"]["naive-rrf"]["recall@100"] == 1.0
    )  # ten abstracts: every one is in its top 100
    for summary in lm["summary"].values():
        for entry in summary.values():
            assert all(v is None or 0.0 <= v <= 1.0 for k, v in entry.items() if "@" in k)
    assert not list((tmp_path / "work").iterdir())  # the temporary stores are gone


def test_harness_numbers_are_the_search_output(tmp_path, bench_data):
    """The report's metrics equal those computed here from a store built and searched directly."""
    from memstore.adapters import get_embedder
    from memstore.retrieve.search import search

    code, _ = run_harness(
        tmp_path, "--data", bench_data, "--only", "longmemeval", "--modes", "vector"
    )
    assert code == 0
    raw = json.loads((tmp_path / "c" / "quality-last.json").read_text())
    _, qs = lme.load(bench_data / "longmemeval")
    q = qs[1]
    hs = lme.haystack(q)
    store = quality.build_store(tmp_path / "direct", get_embedder("hash"), hs.records, "test")
    ids = [h.id for h in search(store, q.question, k=len(hs.records), mode="vector")]
    assert raw["longmemeval"]["rows"][1]["metrics"]["vector"] == lme.score(ids, hs, q.gold_sessions)
    assert "scifact" not in raw and raw["modes"] == ["vector"]


def test_missing_data_fails_naming_the_path_and_keeps_the_report(tmp_path, capsys):
    out = tmp_path / "quality.md"
    out.write_text("previous report\n")
    code, _ = run_harness(tmp_path, "--data", tmp_path / "no-such-data")
    assert code == 2
    err = capsys.readouterr().err
    assert (
        str(tmp_path / "no-such-data" / "longmemeval") in err
        and str(tmp_path / "no-such-data" / "scifact") in err
    )
    assert out.read_text() == "previous report\n"
    code, _ = run_harness(tmp_path, "--data", tmp_path / "no-such-data", "--allow-missing")
    assert code == 0
    text = out.read_text()
    assert (
        "## Not measured: the benchmark data was absent" in text
        and str(tmp_path / "no-such-data" / "scifact") in text
    )
    assert "| **memstore hybrid** | — | — | — | — | — | — |" in text and "not measured" in text


def test_bad_modes_are_refused():
    with pytest.raises(SystemExit):
        quality.parse_args(["--modes", "hybrid,bogus"])


@pytest.mark.model
def test_minilm_run_fills_the_cache_once_and_repeats_its_numbers(tmp_path, bench_data):
    """With the real model every distinct turn is embedded once into the harness's cache file."""
    from memstore.sqlitedb import sqlite3

    args = [
        "--embedder",
        "minilm",
        "--only",
        "longmemeval",
        "--modes",
        "vector,hybrid",
        "--data",
        bench_data,
    ]
    code, _ = run_harness(tmp_path, *args)
    assert code == 0
    raw = tmp_path / "c" / "quality-last.json"
    first = json.loads(raw.read_text())
    _, qs = lme.load(bench_data / "longmemeval")
    distinct = {r["text"] for q in lme.stratified(qs, None) for r in lme.haystack(q).records}
    assert first["longmemeval"]["embedding"]["distinct_texts"] == len(distinct)
    with sqlite3.connect(tmp_path / "c" / "emb.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM entries WHERE kind = 'passage'").fetchone()[
            0
        ] == len(distinct)
    code, _ = run_harness(tmp_path, *args)
    again = json.loads(raw.read_text())
    assert code == 0 and [r["metrics"] for r in again["longmemeval"]["rows"]] == [
        r["metrics"] for r in first["longmemeval"]["rows"]
    ]
    assert (
        first["longmemeval"]["rows"][0]["metrics"]["hybrid"]["recall_any@1"] == 1.0
    )  # the beagle turns


def test_limit_and_claims():
    assert quality.parse_args(["--limit", "3"]).claims == 3  # --limit alone: both benchmarks
    assert (
        quality.parse_args(["--limit", "3", "--claims", "0"]).claims is None
    )  # every SciFact claim
    assert (
        quality.parse_args(["--claims", "50"]).claims == 50
        and quality.parse_args([]).claims is None
    )
    with pytest.raises(SystemExit):
        quality.parse_args(["--claims", "-1"])


def test_the_dev_split_file_names_are_found(tmp_path):
    """The shared data's names: longmemeval_s_dev.json.xz (xz-compressed) and qrels/train.tsv."""
    import lzma

    folder = tmp_path / "longmemeval"
    folder.mkdir()
    with lzma.open(folder / "longmemeval_s_dev.json.xz", "wt", encoding="utf-8") as fh:
        json.dump(lme_questions(), fh)
    file, questions = lme.load(folder)
    assert file.name == "longmemeval_s_dev.json.xz" and [q.qid for q in questions][:2] == [
        "q_dog",
        "q_bike",
    ]
    (folder / "longmemeval_s_dev.json.xz").write_bytes(b"\xfd7zXZ\x00broken")
    with pytest.raises(FormatError, match="longmemeval_s_dev.json.xz"):
        lme.load(folder)
    root = tmp_path / "scifact"
    write_scifact_beir(root)
    (root / "qrels" / "test.tsv").rename(root / "qrels" / "train.tsv")
    sf = scifact.load(root)
    assert "qrels/train.tsv" in sf.notes[0] and len(sf.qrels) == 3
