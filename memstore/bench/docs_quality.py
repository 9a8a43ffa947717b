"""Documents on a real docs folder: does a how-to question find the section that answers it?

One fresh store (default embedder MiniLM) ingests a folder with `ingest-path`; each question in
the questions file is searched (hybrid, top k) and the rank of the first hit that lies in an
answering section is printed, with the chunk counts. A section is named by file and title; its
span runs from its title to the next title of the same or a higher level, found by this module's
own reading of reStructuredText and Markdown titles (not the chunker's), so a chunker that does not
know headings is judged the same way as one that does. A hit counts when its character span
overlaps the section's.

    python -m memstore.bench.docs_quality --docs /tmp/sqlite-utils-docs/docs

The questions file is JSON: [{"q": "...", "answers": [["cli.rst", "Inserting CSV or TSV data"]],
"group": "how-to"}]; the summary gives each group's figures (mean reciprocal rank counts a question
not found in the top k as 0).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

QUESTIONS = Path(__file__).with_name("docs_questions.json")
_PUNCT = "=-~^\"'`#*+:.!$%&,/;<>?@\\_|"


def section_spans(text: str) -> dict[str, tuple[int, int]]:
    """{title: (start, end)} for each titled section of an .rst or .md text (the first wins)."""
    lines = text.splitlines(keepends=True)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    titles: list[tuple[int, int, str]] = []  # (offset, level, title)
    styles: list[tuple[str, bool]] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        m = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            titles.append((offsets[i], len(m.group(1)), m.group(2)))
            i += 1
            continue
        over = _rule(line)
        if over and i + 2 < len(lines) and _rule(lines[i + 2].rstrip()) == over:
            title = lines[i + 1].strip()
            if title and not _rule(title):
                titles.append((offsets[i], _level(styles, (over, True)), title))
                i += 3
                continue
        if line.strip() and not _rule(line) and i + 1 < len(lines):
            under = _rule(lines[i + 1].rstrip())
            if under and len(lines[i + 1].rstrip()) >= len(line.rstrip()) and line[0] != " ":
                titles.append((offsets[i], _level(styles, (under, False)), line.strip()))
                i += 2
                continue
        i += 1
    spans: dict[str, tuple[int, int]] = {}
    for n, (start, level, title) in enumerate(titles):
        end = next((s for s, lv, _ in titles[n + 1 :] if lv <= level), len(text))
        spans.setdefault(_plain(title), (start, end))
    return spans


def _rule(line: str) -> str:
    s = line.strip()
    return s[0] if len(s) >= 3 and s[0] in _PUNCT and set(s) == {s[0]} else ""


def _level(styles: list, style) -> int:
    if style not in styles:
        styles.append(style)
    return styles.index(style) + 1


def _plain(title: str) -> str:
    return title.replace("\\", "").strip()


_CHANGELOG = re.compile(r"(?i)(?:^|/)(?:changelog|changes|history|news|release[-_ ]?notes)[^/]*$")
_PAGE = re.compile(r"(?i)\.(?:rst|rest|md|markdown|txt|adoc)$")


def noise(hits) -> tuple[int, int]:
    """(changelog hits, hits from files that are not pages: conf.py, Makefile, templates, ...)."""
    rels = [h.source.get("rel", "") for h in hits if isinstance(h.source, dict)]
    return (
        sum(1 for r in rels if _CHANGELOG.search(r)),
        sum(1 for r in rels if not _PAGE.search(r)),
    )


def rank_of(hits, answers, spans_of) -> int | None:
    """1-based rank of the first hit inside an answering section, or None."""
    for rank, hit in enumerate(hits, 1):
        src = hit.source if isinstance(hit.source, dict) else {}
        for rel, title in answers:
            if src.get("rel") != rel or "start" not in src:
                continue
            span = spans_of(rel).get(title)
            if span and src["start"] < span[1] and src["end"] > span[0]:
                return rank
    return None


def run(args) -> dict:
    from ..store import Store

    docs = Path(args.docs).resolve()
    questions = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    cache: dict[str, dict] = {}

    def spans_of(rel: str) -> dict:
        if rel not in cache:
            cache[rel] = section_spans((docs / rel).read_text(encoding="utf-8"))
        return cache[rel]

    for q in questions:  # a question naming a section the folder lacks is a broken question file
        for rel, title in q["answers"]:
            if title not in spans_of(rel):
                raise SystemExit(f"{args.questions}: no section {title!r} in {docs / rel}")
    work = Path(args.store or tempfile.mkdtemp(prefix="docs-quality-"))
    st = Store.init(work / "store", embedder=args.embedder)
    kwargs = {}
    if args.exclude:
        kwargs["exclude"] = args.exclude
    if args.no_default_excludes:
        kwargs["default_excludes"] = False
    t0 = time.perf_counter()
    res = st.ingest_path(docs, **kwargs)
    ingest_s = time.perf_counter() - t0
    per_file: dict[str, int] = {}
    for r in res.added:
        if r["type"] == "doc":
            per_file[r["source"]["rel"]] = per_file.get(r["source"]["rel"], 0) + 1
    from ..retrieve import search as search_mod

    runs = []
    default = getattr(search_mod, "CHANGELOG_PRIOR", None)
    for prior in args.priors or [default]:
        if prior is not None:
            search_mod.CHANGELOG_PRIOR = prior
        rows = []
        for q in questions:
            hits = st.search(q["q"], k=args.k)
            changelog, other = noise(hits)
            rows.append(
                {
                    "q": q["q"],
                    "group": q.get("group", ""),
                    "answers": q["answers"],
                    "rank": rank_of(hits, q["answers"], spans_of),
                    "changelog": changelog,
                    "not_pages": other,
                }
            )
        runs.append({"changelog_prior": prior, "rows": rows})
    if default is not None:
        search_mod.CHANGELOG_PRIOR = default
    return {"per_file": per_file, "runs": runs, "ingest_s": ingest_s, "notes": res.notes}


def table(result: dict, k: int) -> str:
    out = []
    for run_ in result["runs"]:
        if len(result["runs"]) > 1 or run_["changelog_prior"] is not None:
            out += [f"CHANGELOG_PRIOR {run_['changelog_prior']}:", ""]
        out += _rows(run_["rows"], k) + [""]
    chunks = sum(result["per_file"].values())
    files = ", ".join(f"{rel} {n}" for rel, n in sorted(result["per_file"].items()))
    out.append(f"{chunks} chunks from {len(result['per_file'])} files: {files}.")
    return "\n".join(out)


def _rows(rows: list, k: int) -> list[str]:
    out = [
        f"| question | answering section | rank | changelog hits in top {k} | other non-page hits |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        where = " or ".join(f"{rel} › {title}" for rel, title in r["answers"])
        out.append(
            f"| {r['q']} | {where} | {r['rank'] or f'>{k}'} | {r['changelog']} | {r['not_pages']} |"
        )
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    for name, group in ([("all", rows)] if len(groups) > 1 else []) + list(groups.items()):
        found = [r["rank"] for r in group if r["rank"]]
        out.append(
            f"{name or 'all'} ({len(group)}): found in the top {k}: {len(found)}; in the top 3: "
            f"{sum(1 for x in found if x <= 3)}; at rank 1: {sum(1 for x in found if x == 1)}; "
            f"mean reciprocal rank {sum(1 / x for x in found) / len(group):.3f}; "
            f"changelog hits in the top {k}: {sum(r['changelog'] for r in group)}."
        )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", required=True, help="The docs folder to ingest.")
    p.add_argument("--questions", default=str(QUESTIONS), help="Questions file (JSON).")
    p.add_argument("--embedder", default="minilm")
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--store", default=None, help="Folder for the store (default: a temp folder).")
    p.add_argument("--exclude", action="append", default=[], help="Passed to ingest-path.")
    p.add_argument("--no-default-excludes", action="store_true", help="Passed to ingest-path.")
    p.add_argument(
        "--priors",
        type=lambda v: [float(x) for x in v.split(",")],
        default=None,
        help="Comma-separated CHANGELOG_PRIOR values to score in turn (default: the code's).",
    )
    p.add_argument("--json", action="store_true", help="Print the result as JSON too.")
    args = p.parse_args(argv)
    result = run(args)
    print(table(result, args.k))
    for note in result["notes"]:
        print(note, file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
