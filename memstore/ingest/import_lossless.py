"""lossless-memory's data folder (`main/YYYY-MM-DD.jsonl`, `corpus/<name>/*.jsonl`) as records.

Each line holds lossless-memory's seven fields (ts, actor, role, type, text, model, session) and is
read by the plain JSONL importer, which already maps role "ai" to assistant and type "thinking" to
meta (kind "thinking"). What this module adds is the folder layout and time: lossless-memory copies
`ts` verbatim from its sources, so it may lack an offset (older data was written in JST). A naive
`ts` is read in `source_timezone` (default: the store's) and the original string is kept as
`source_ts`, so the store's day placement is right and the conversion can be audited. Corpus lines
keep the corpus name as `corpus`. Other files in the folder (indexes, state, logs) are not data.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from memstore.errors import UsageError
from memstore.format.timeutil import parse_ts, zone
from memstore.ingest import import_jsonl
from memstore.ingest.importers import ReadResult, printable


def data_files(root: str | os.PathLike) -> list[Path]:
    """The day files under main/ and every corpus file, sorted; UsageError if `root` is no data folder."""
    root = Path(root)
    if root.is_file():
        raise UsageError(
            f"{root}: give lossless-memory's data folder (the one holding main/), not a file",
            "Use 'ct import jsonl FILE' for a single JSONL file.",
        )
    main, corpus = root / "main", root / "corpus"
    if not main.is_dir() and not corpus.is_dir():
        raise UsageError(
            f"{root}: not a lossless-memory data folder (it has neither main/ nor corpus/)",
            "Point at the data_dir from lossless-memory's config.",
        )
    files = sorted(p for p in main.glob("*.jsonl") if p.is_file()) if main.is_dir() else []
    if corpus.is_dir():
        for sub in sorted(p for p in corpus.iterdir() if p.is_dir()):
            files += sorted(p for p in sub.glob("*.jsonl") if p.is_file())
    return files


def check_timezone(name: str) -> str:
    """`name` when it is a known IANA timezone; UsageError otherwise."""
    try:
        zone(name)
    except ValueError as exc:
        raise UsageError(f"--source-timezone: {exc}") from None
    return name


def corpus_of(path: Path) -> str | None:
    """The corpus name of a corpus file (its folder), None for a main/ day file."""
    return printable(path.parent.name) if path.parent.parent.name == "corpus" else None


def read_new(
    path: str | os.PathLike, cursor=None, final: bool = False, source_timezone: str | None = None
) -> ReadResult:
    """Records from the complete lines after `cursor`, with naive times placed in `source_timezone`."""
    path = Path(path)
    tz = zone(source_timezone) if source_timezone else None
    if cursor is not None and getattr(cursor, "offset", cursor) != path.stat().st_size:
        # lossless-memory rewrites a whole day file when a row arrives out of order, possibly
        # inserting before our offset; a changed day file is small, so read it again from the
        # start and let the store skip the records it already holds (same derived id).
        cursor = None
    result = import_jsonl.read_new(path, cursor, final)
    corpus = corpus_of(path)
    for rec in result.records:
        if tz is not None:
            _localize(rec, tz)
        if corpus is not None:
            rec.setdefault("corpus", corpus)
    return result


def _localize(rec: dict, tz: dt.tzinfo) -> None:
    """Give a naive `ts` the source timezone's offset for that date (so DST is right)."""
    ts = rec["ts"]
    if isinstance(ts, str) and _is_naive(ts):  # a Unix time or an offset is absolute already
        rec["ts"] = parse_ts(ts, tz).isoformat()
        rec.setdefault("source_ts", ts)


def _is_naive(ts: str) -> bool:
    s = ts.strip()
    if s.endswith(("Z", "z")):
        return False
    try:
        return dt.datetime.fromisoformat(s).tzinfo is None
    except ValueError:
        return False
