"""LongMemEval_S for the quality harness: load the questions, turn haystacks into records, score rankings.

The public file is a JSON list of questions, each with its own haystack of dated chat sessions.
Scoring follows the official retrieval code (xiaowu0162/LongMemEval, src/retrieval/eval_utils.py):
a turn ranking becomes a session ranking by each session's best turn, recall_any@k / recall_all@k
ask whether any / all gold sessions are in the top k, and DCG uses that code's discount (positions
1 and 2 both count fully, position i > 1 is divided by log2(i)). Abstention questions (`_abs`) have
no gold evidence and are skipped, as there.
"""

from __future__ import annotations

import datetime as dt
import json
import lzma
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, UsageError

KS = (1, 5, 10)
TURN_K = 10
# Preferred file names when a folder holds several (the cleaned release fixes broken sessions).
PREFERRED = (
    "longmemeval_s_dev.json.xz",
    "longmemeval_s_dev.json",
    "longmemeval_s_cleaned.json",
    "longmemeval_s.json",
)
REQUIRED = (
    "question_id",
    "question_type",
    "question",
    "question_date",
    "haystack_session_ids",
    "haystack_dates",
    "haystack_sessions",
    "answer_session_ids",
)
_DATE = re.compile(
    r"^\s*(\d{4})/(\d{1,2})/(\d{1,2})(?:\s*\([A-Za-z]+\))?(?:\s+(\d{1,2}):(\d{2}))?\s*$"
)


@dataclass
class Session:
    sid: str
    date: dt.datetime
    turns: list[dict]


@dataclass
class Question:
    qid: str
    qtype: str
    question: str
    answer: str
    date: dt.datetime
    sessions: list[Session]
    gold_sessions: set[str]

    @property
    def abstention(self) -> bool:
        return self.qid.endswith("_abs")


@dataclass
class Haystack:
    """A question's records plus what the scorer needs to know about each of them."""

    records: list[dict]
    session_of: dict[str, str] = field(default_factory=dict)  # record id -> session id
    gold_turns: set[str] = field(default_factory=set)  # record ids of turns with has_answer
    skipped_blank: int = 0


def parse_date(text: str, where: str) -> dt.datetime:
    """ "2023/05/30 (Tue) 23:40" as a UTC datetime (the benchmark's dates carry no zone)."""
    m = _DATE.match(str(text))
    if not m:
        raise ValueError(f"{where}: date {text!r} is not like '2023/05/30 (Tue) 23:40'")
    y, mo, d, h, mi = (int(x) if x else 0 for x in m.groups())
    return dt.datetime(y, mo, d, h, mi, tzinfo=dt.timezone.utc)


def find_file(path: Path) -> Path:
    """The question file: `path` itself, or the longmemeval_s*.json inside a folder."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise UsageError(
            f"LongMemEval data not found: {path} does not exist",
            "Put longmemeval_s*.json there (see its SOURCE.md), or pass --data DIR.",
        )
    for name in PREFERRED:
        if (path / name).is_file():
            return path / name
    found = sorted([*path.glob("longmemeval_s*.json"), *path.glob("longmemeval_s*.json.xz")])
    if len(found) == 1:
        return found[0]
    if not found:
        raise UsageError(
            f"LongMemEval data not found: no longmemeval_s*.json in {path}",
            "The harness reads the LongMemEval_S file (longmemeval_s_cleaned.json or longmemeval_s.json).",
        )
    raise UsageError(
        f"{path}: several LongMemEval files ({', '.join(p.name for p in found)}); pass one as --lme FILE"
    )


def _read_text(file: Path) -> str:
    """The file's text; a `.xz` file is decompressed on the fly (the dev split ships compressed)."""
    if file.suffix == ".xz":
        with lzma.open(file, "rt", encoding="utf-8") as fh:
            return fh.read()
    return file.read_text(encoding="utf-8")


def load(path) -> tuple[Path, list[Question]]:
    """Every question of the file (or folder), validated; FormatError naming the file otherwise."""
    file = find_file(Path(path))
    try:
        data = json.loads(_read_text(file))
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FormatError(file, f"not a readable JSON file ({exc})") from None
    if not isinstance(data, list):
        raise FormatError(file, "expected a JSON list of questions")
    questions = []
    for i, obj in enumerate(data):
        try:
            questions.append(_question(obj))
        except (ValueError, TypeError, KeyError) as exc:
            raise FormatError(file, f"question {i + 1}: {exc}") from None
    return file, questions


def _question(obj) -> Question:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    qid = str(obj["question_id"])
    ids, dates, sessions = (
        obj["haystack_session_ids"],
        obj["haystack_dates"],
        obj["haystack_sessions"],
    )
    if not (len(ids) == len(dates) == len(sessions)):
        raise ValueError(
            f"{qid}: haystack_session_ids, haystack_dates and haystack_sessions differ in length"
        )
    out = []
    for sid, date, turns in zip(ids, dates, sessions):
        if not isinstance(turns, list) or not all(
            isinstance(t, dict) and "role" in t and "content" in t for t in turns
        ):
            raise ValueError(f"{qid}: session {sid} is not a list of {{role, content}} turns")
        out.append(Session(str(sid), parse_date(date, f"{qid} session {sid}"), turns))
    return Question(
        qid,
        str(obj["question_type"]),
        str(obj["question"]),
        str(obj.get("answer", "")),
        parse_date(obj["question_date"], f"{qid} question_date"),
        out,
        {str(s) for s in obj["answer_session_ids"]},
    )


def haystack(q: Question) -> Haystack:
    """One record per non-blank turn, dated by its session (turn j at +j seconds, keeping their order).

    Record ids encode the haystack position, so a session id repeated in a haystack still yields
    distinct records; the session id is the record's `session`. Gold labels stay here, not in the store.
    """
    hs = Haystack([])
    for pos, s in enumerate(q.sessions):
        for j, turn in enumerate(s.turns):
            text = turn.get("content")
            if not isinstance(text, str) or not text.strip():
                hs.skipped_blank += 1
                continue
            rid = f"lme-{pos:03d}-{j:03d}"
            hs.records.append(
                {
                    "id": rid,
                    "ts": s.date + dt.timedelta(seconds=j),
                    "role": turn["role"],
                    "actor": turn["role"],
                    "type": "text",
                    "text": text,
                    "session": s.sid,
                }
            )
            hs.session_of[rid] = s.sid
            if turn.get("has_answer") is True:
                hs.gold_turns.add(rid)
    return hs


def stratified(questions: list[Question], per_type: int | None) -> list[Question]:
    """Non-abstention questions; with `per_type`, the first N of each type in file order."""
    kept = [q for q in questions if not q.abstention]
    if not per_type:
        return kept
    taken: dict[str, int] = {}
    out = []
    for q in kept:
        if taken.get(q.qtype, 0) < per_type:
            taken[q.qtype] = taken.get(q.qtype, 0) + 1
            out.append(q)
    return out


# ----- metrics -------------------------------------------------------------------------------


def dedupe(items) -> list:
    """Items in first-seen order: a turn ranking's sessions ranked by their best turn."""
    seen: set = set()
    return [x for x in items if not (x in seen or seen.add(x))]


def dcg(relevances: list[float], k: int) -> float:
    """DCG with the official code's discount: rel_1 + Σ_{i=2..k} rel_i / log2(i)."""
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return rel[0] + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def ndcg(ranked: list, gold: set, k: int) -> float:
    if not gold:
        return 0.0
    ideal = dcg([1.0] * len(gold), k)
    return dcg([1.0 if x in gold else 0.0 for x in ranked], k) / ideal


def recall_any(ranked: list, gold: set, k: int) -> float:
    return float(any(x in gold for x in ranked[:k]))


def recall_all(ranked: list, gold: set, k: int) -> float:
    top = set(ranked[:k])
    return float(bool(gold) and gold <= top)


def shown(turn_ids: list[str], carried: dict[str, str] | None = None) -> list[str]:
    """The turns the first TURN_K hits show, best first: each hit, then the question that came
    under it (`carried`: hit id -> question id; retrieve/answers.py puts an answer in its
    question's slot and shows the question with it)."""
    out: list[str] = []
    for r in turn_ids[:TURN_K]:
        out.append(r)
        if carried and r in carried:
            out.append(carried[r])
    return out


def score(
    turn_ids: list[str], hs: Haystack, gold_sessions: set[str], top: list[str] | None = None
) -> dict[str, float]:
    """Every metric for one question from one ranked list of record ids (best first); the turn
    metric from `top`, the turns a search for TURN_K showed (`shown`; default: the first TURN_K of
    the list)."""
    sessions = dedupe(hs.session_of[r] for r in turn_ids if r in hs.session_of)
    out: dict[str, float] = {}
    for k in KS:
        out[f"recall_any@{k}"] = recall_any(sessions, gold_sessions, k)
        out[f"recall_all@{k}"] = recall_all(sessions, gold_sessions, k)
        out[f"ndcg@{k}"] = ndcg(sessions, gold_sessions, k)
    if hs.gold_turns:
        seen = turn_ids[:TURN_K] if top is None else top
        out[f"turn_recall_any@{TURN_K}"] = recall_any(seen, hs.gold_turns, len(seen))
    return out


def replies(hs: Haystack) -> dict[str, str]:
    """Each turn's reply: the next turn of its session when the other side spoke it."""
    out: dict[str, str] = {}
    for a, b in zip(hs.records, hs.records[1:]):
        if a["session"] == b["session"] and a["role"] != b["role"]:
            out[a["id"]] = b["id"]
    return out


def echoes(
    turn_ids: list[str],
    hs: Haystack,
    bare: set[str],
    reply: dict[str, str],
    carried: dict[str, str] | None = None,
) -> dict:
    """Question echoes in the top TURN_K of one ranking: bare questions (ids in `bare`) that were
    answered (`reply`), as hits or shown under their answer (`carried`: hit id -> the id of the
    question it came with, retrieve/answers.py); whether the first hit is one, how many rank below
    their answer, and how many of those sit under it in their own slot (counted in `answer_above`)."""
    top = turn_ids[:TURN_K]
    carried = carried or {}
    # an exchange reads answer first, then its question: the question ranks right under it
    seen = shown(top, carried)
    rank = {r: i for i, r in enumerate(seen)}
    asked = [r for r in rank if r in bare and r in reply]
    above = [r for r in asked if rank.get(reply[r], len(seen)) < rank[r]]
    return {
        "top1": bool(top) and top[0] in bare and top[0] in reply,
        "echoes": len(asked),
        "answer_above": len(above),
        "answer_in_slot": sum(carried.get(reply[r]) == r for r in above),
    }


METRICS = tuple(f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg") for k in KS) + (
    f"turn_recall_any@{TURN_K}",
)


def summarize(rows: list[dict]) -> dict[str, dict]:
    """Per question type and "all": mean of each metric over the questions that have it, and n."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["qtype"], []).append(row)
    groups = dict(sorted(groups.items()))
    groups["all"] = list(rows)
    out = {}
    for name, items in groups.items():
        entry: dict = {"n": len(items)}
        for m in METRICS:
            vals = [r["metrics"][m] for r in items if m in r["metrics"]]
            entry[m] = sum(vals) / len(vals) if vals else None
            if m.startswith("turn_"):
                entry["n_turn"] = len(vals)
        out[name] = entry
    return out
