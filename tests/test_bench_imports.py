"""The import benchmark (memstore/bench/imports.py) on a small LongMemEval-shaped file."""

from __future__ import annotations

import json

import pytest

from memstore.bench import imports

SUBJECTS = ["garden beds", "sourdough starter", "bike gears", "tax forms", "piano scales"]


def _dev_file(folder, sessions: int, turns: int) -> None:
    """One question whose haystack has `sessions` sessions of `turns` turns, a day apart."""
    folder.mkdir(parents=True)
    days = [f"2024/{1 + d // 28:02d}/{1 + d % 28:02d} (Mon) 09:00" for d in range(sessions)]
    hay = [
        [
            {
                "role": "user" if j % 2 == 0 else "assistant",
                "content": f"Session {s} turn {j}: more about {SUBJECTS[s % len(SUBJECTS)]} "
                f"and what to try next, step {j}.",
            }
            for j in range(turns)
        ]
        for s in range(sessions)
    ]
    q = {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What did I try with the bike gears?",
        "answer": "step 2",
        "question_date": "2024/12/01 (Sun) 10:00",
        "haystack_session_ids": [f"s{s}" for s in range(sessions)],
        "haystack_dates": days,
        "haystack_sessions": hay,
        "answer_session_ids": ["s2"],
    }
    (folder / "longmemeval_s_cleaned.json").write_text(json.dumps([q]))


def test_the_import_bench_times_each_part_of_one_big_write(tmp_path, capsys):
    data = tmp_path / "lme"
    _dev_file(data, sessions=120, turns=4)
    out = tmp_path / "imports.md"
    assert imports.main(["--data", str(data), "--sizes", "240,480", "--out", str(out)]) == 0
    table = out.read_text()
    assert "| | 240 turns | 480 turns |" in table
    for part in ("Writing logs and packs", "Placing in topics", "Committing", "Indexing"):
        assert f"| {part} (s) |" in table, part
    # 480 turns over 120 days: 240 paths, a big write whose objects all went into packs
    git_row = next(line for line in table.splitlines() if line.startswith("| git after"))
    assert git_row.split("|")[-2].strip().startswith("0 / ")
    assert "per record, 480 over 240:" in table and "records/s" in table


def test_the_import_bench_says_when_the_data_is_too_small(tmp_path):
    data = tmp_path / "lme"
    _dev_file(data, sessions=10, turns=2)
    with pytest.raises(SystemExit, match="only 20 dev turns"):
        imports.main(["--data", str(data), "--sizes", "100"])
