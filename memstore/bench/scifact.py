"""SciFact for the quality harness: load abstracts, claims and relevance judgements; nDCG and recall.

Two layouts are read. BEIR's: `corpus.jsonl` {_id, title, text}, `queries.jsonl` {_id, text} and
`qrels/train.tsv`, `qrels/dev.tsv` or `qrels/test.tsv` (query-id, corpus-id, score; BEIR's SciFact test split holds
the 300 labelled claims of the original dev set). The original release's: `corpus.jsonl` {doc_id,
title, abstract: [sentences]} and `claims_dev.jsonl` {id, claim, evidence: {doc_id: [...]},
cited_doc_ids}. Metrics are BEIR's (trec_eval's): nDCG@k with gain = relevance and discount
log2(rank + 1), Recall@k = relevant documents in the top k over relevant documents, both averaged
over the claims that have judgements.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, UsageError

QREL_FILES = ("qrels/train.tsv", "qrels/dev.tsv", "qrels/test.tsv")  # the first present is used


@dataclass
class SciFact:
    layout: str  # "beir" or "original"
    root: Path
    docs: dict[str, tuple[str, str]]  # doc id -> (title, abstract text)
    queries: dict[str, str]  # query id -> claim
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance > 0}
    notes: list[str] = field(default_factory=list)

    def document_text(self, doc_id: str) -> str:
        title, text = self.docs[doc_id]
        return f"{title}\n\n{text}" if title else text


def find_root(path: Path) -> Path:
    """The folder holding corpus.jsonl: `path`, or one level below it (archives unpack into a folder)."""
    path = Path(path)
    if (path / "corpus.jsonl").is_file():
        return path
    if not path.is_dir():
        raise UsageError(
            f"SciFact data not found: {path} does not exist",
            "Put the BEIR scifact folder (corpus.jsonl, queries.jsonl, qrels/) there, or pass --data DIR.",
        )
    below = sorted(p.parent for p in path.glob("*/corpus.jsonl"))
    if len(below) == 1:
        return below[0]
    raise UsageError(
        f"SciFact data not found: no corpus.jsonl in {path}"
        if not below
        else f"{path}: several SciFact folders ({', '.join(str(p) for p in below)}); pass one with --scifact"
    )


def _jsonl(file: Path):
    try:
        with open(file, encoding="utf-8") as fh:
            for n, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise FormatError(file, f"not valid JSON ({exc.msg})", line=n) from None
                    if not isinstance(obj, dict):
                        raise FormatError(file, "not a JSON object", line=n)
                    yield n, obj
    except OSError as exc:
        raise FormatError(file, f"cannot read ({exc})") from None


def load(path) -> SciFact:
    root = find_root(Path(path))
    if any((root / q).is_file() for q in QREL_FILES):
        return _load_beir(root)
    if (root / "claims_dev.jsonl").is_file():
        return _load_original(root)
    raise UsageError(
        f"{root}: corpus.jsonl but neither qrels/dev.tsv, qrels/test.tsv nor claims_dev.jsonl"
    )


def _load_beir(root: Path) -> SciFact:
    docs = {}
    for n, obj in _jsonl(root / "corpus.jsonl"):
        if "_id" not in obj or not isinstance(obj.get("text"), str):
            raise FormatError(root / "corpus.jsonl", "BEIR corpus lines need _id and text", line=n)
        docs[str(obj["_id"])] = (str(obj.get("title") or ""), obj["text"])
    queries = {}
    for n, obj in _jsonl(root / "queries.jsonl"):
        if "_id" not in obj or not isinstance(obj.get("text"), str):
            raise FormatError(root / "queries.jsonl", "BEIR query lines need _id and text", line=n)
        queries[str(obj["_id"])] = obj["text"]
    qfile = next(root / q for q in QREL_FILES if (root / q).is_file())
    qrels: dict[str, dict[str, int]] = {}
    for n, line in enumerate(qfile.read_text(encoding="utf-8").splitlines(), start=1):
        parts = line.split("\t") if "\t" in line else line.split()
        if (
            not parts
            or not line.strip()
            or (n == 1 and not parts[-1].strip().lstrip("-").isdigit())
        ):
            continue  # blank line or the "query-id corpus-id score" header
        if len(parts) != 3:
            raise FormatError(qfile, "expected query-id, corpus-id, score", line=n)
        try:
            rel = int(parts[2])
        except ValueError:
            raise FormatError(qfile, f"score {parts[2]!r} is not an integer", line=n) from None
        if rel > 0:
            qrels.setdefault(parts[0].strip(), {})[parts[1].strip()] = rel
    return _checked(
        SciFact("beir", root, docs, queries, qrels, [f"judgements: {qfile.relative_to(root)}"]),
        qfile,
    )


def _load_original(root: Path) -> SciFact:
    docs = {}
    for n, obj in _jsonl(root / "corpus.jsonl"):
        if "doc_id" not in obj or not isinstance(obj.get("abstract"), list):
            raise FormatError(
                root / "corpus.jsonl",
                "SciFact corpus lines need doc_id and abstract (a list)",
                line=n,
            )
        docs[str(obj["doc_id"])] = (
            str(obj.get("title") or ""),
            " ".join(str(s).strip() for s in obj["abstract"]),
        )
    queries, qrels = {}, {}
    fallback = 0
    for n, obj in _jsonl(root / "claims_dev.jsonl"):
        if "id" not in obj or not isinstance(obj.get("claim"), str):
            raise FormatError(root / "claims_dev.jsonl", "claim lines need id and claim", line=n)
        qid = str(obj["id"])
        queries[qid] = obj["claim"]
        rel = [str(d) for d in (obj.get("evidence") or {})]
        if not rel:
            # A claim without evidence (NOT ENOUGH INFO) is judged against the abstracts it cites.
            rel = [str(d) for d in obj.get("cited_doc_ids") or []]
            fallback += bool(rel)
        if rel:
            qrels[qid] = {d: 1 for d in rel}
    notes = [
        "judgements: claims_dev.jsonl evidence documents"
        + (
            f"; {fallback} claims without evidence judged by their cited_doc_ids"
            if fallback
            else ""
        )
    ]
    return _checked(
        SciFact("original", root, docs, queries, qrels, notes), root / "claims_dev.jsonl"
    )


def _checked(sf: SciFact, qfile: Path) -> SciFact:
    if not sf.docs:
        raise FormatError(sf.root / "corpus.jsonl", "no documents")
    sf.qrels = {q: rel for q, rel in sf.qrels.items() if q in sf.queries}
    if not sf.qrels:
        raise FormatError(qfile, "no judged claims whose text is known")
    unknown = sum(1 for rel in sf.qrels.values() for d in rel if d not in sf.docs)
    if unknown:
        sf.notes.append(f"{unknown} judged documents are not in the corpus (they count as missed)")
    return sf


# ----- metrics -------------------------------------------------------------------------------


def ndcg(ranked: list[str], rel: dict[str, int], k: int) -> float:
    gains = [rel.get(d, 0) for d in ranked[:k]]
    got = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:k]))
    return got / ideal if ideal else 0.0


def recall(ranked: list[str], rel: dict[str, int], k: int) -> float:
    wanted = {d for d, r in rel.items() if r > 0}
    return len(wanted & set(ranked[:k])) / len(wanted) if wanted else 0.0
