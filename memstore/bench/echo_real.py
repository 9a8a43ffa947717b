"""Question echoes on stores built from public real conversation exports (issue 29, item 1).

An *echo* is a turn that only asks (retrieve/answers.is_question) and was answered by the next turn
of its conversation from the other side (retrieve/answers.answer_of, the rule the ranking itself
uses). Asked again, such a question matches the new query's wording and says nothing; the reply is
what the asker wants. For every echo in a store this asks the question again and looks at `ct
search`'s top ten: does the answer rank above the question (a hit of its own above it, or the hit
in the question's slot with the question shown under it), does it only come *with* the question
(`parts.answer`, what answers-first did before the answer took its question's slot), or is it
missing?

Two ways of asking again, both derived from the question alone so nobody picks the easy ones:

- `reworded`: the question lowercased, its punctuation dropped and its opening question word
  dropped ("WHERE IS IT SAVED?" -> "is it saved"); kept when two or more words remain;
- `verbatim`: the question's own text.

An echo counts for a way of asking when it is in the top ten of that query.

Layout of `--data DIR`: one folder per export, holding what `ct import` reads (`conversations.json`
from ChatGPT, Claude Code `*.jsonl` sessions) or what this module converts to `ct import jsonl`
lines: an aider `.aider.chat.history.md`, SpecStory chat files (`.specstory/history/*.md`), or
conversation backups of `{"metadata", "turns"}` JSON files (role, time, content per turn). An
optional `SOURCE` file there names where the export came from (repository, path, commit); the
report quotes it. Stores are built through the real commands (`ct init`, `ct import ...
--allow-secrets`: public logs hold leaked tokens, and the benchmark must see them as they are)
with the default embedder (`--embedder` to change), and searched with `ct search --queries --json
--explain`. Export data is never written anywhere but `--work`; the JSON holds counts and names.

    python -m memstore.bench.echo_real --data DIR [--work DIR] [--out report.md] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

K = 10
FORMS = ("reworded", "verbatim")

# ----- converting exports that `ct import` does not read ----------------------------------------

_AIDER_START = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s*$")
_AIDER_PROMPT = re.compile(r"\(Y\)es/\(N\)o")  # a confirmation prompt echoed into the log
_THINKING = re.compile(r"<thinking-content-[0-9a-f]+>.*?</thinking-content-[0-9a-f]+>", re.S)


def convert_aider(text: str, name: str) -> list[dict]:
    """Turns of an aider chat log: each "# aider chat started at" begins a session; "#### " lines
    are the user's message, "> " lines are aider's own output (left out), the rest is the model's
    reply. The log keeps only each session's start time, so turn i is stamped start + i seconds."""
    out: list[dict] = []
    session, start, turn = None, None, []
    role = None
    n = 0

    def flush():
        nonlocal turn, role, n
        body = _THINKING.sub("", "\n".join(turn)).strip()
        if session and role and body:
            out.append(
                {
                    "ts": (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "role": role,
                    "text": body,
                    "session": session,
                }
            )
            n += 1
        turn, role = [], None

    for line in text.splitlines():
        m = _AIDER_START.match(line)
        if m:
            flush()
            start = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
            session, n = f"{name}-{start:%Y%m%dT%H%M%S}", 0
            continue
        if session is None:
            continue
        if line.startswith("#### "):
            said = line[5:].rstrip()
            if _AIDER_PROMPT.search(said) or said.startswith("/"):
                continue
            if role != "user":
                flush()
                role = "user"
            turn.append(said)
        elif line.startswith(">"):
            continue
        else:
            if role != "assistant":
                if not line.strip():
                    continue
                flush()
                role = "assistant"
            turn.append(line.rstrip())
    flush()
    return out


_SPEC_TITLE = re.compile(r"^# .*\((\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?)Z?\)\s*$", re.M)
_SPEC_SPEAKER = re.compile(r"^_\*\*(User|Assistant)\*\*_\s*$", re.M)
_DETAILS = re.compile(r"<details>.*?</details>", re.S)


def convert_specstory(text: str, session: str) -> list[dict]:
    """Turns of a SpecStory chat file (Cursor's saved chats, `.specstory/history/*.md`): the
    title line holds the chat's start time, `_**User**_` / `_**Assistant**_` lines open each
    turn; tool-call blocks (`<details>`) and `---` separators are left out, and an assistant's
    consecutive blocks make one turn. Turn i is stamped start + i seconds."""
    m = _SPEC_TITLE.search(text)
    if not m:
        return []
    when = m.group(1) if len(m.group(1)) > 16 else m.group(1) + ":00"
    start = datetime.strptime(when, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    parts = _SPEC_SPEAKER.split(text)
    turns: list[tuple[str, str]] = []
    for speaker, body in zip(parts[1::2], parts[2::2]):
        body = _DETAILS.sub("", body)
        body = "\n".join(line for line in body.splitlines() if line.strip() != "---").strip()
        if not body:
            continue
        role = "user" if speaker == "User" else "assistant"
        if turns and turns[-1][0] == role:
            turns[-1] = (role, turns[-1][1] + "\n\n" + body)
        else:
            turns.append((role, body))
    return [
        {
            "ts": (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "role": role,
            "text": body,
            "session": session,
        }
        for i, (role, body) in enumerate(turns)
    ]


def convert_turn_files(files: list[Path]) -> list[dict]:
    """Turns of conversation backups, one JSON file per conversation: {"metadata": {"id", ...},
    "turns": [{"role", "time", "content"}, ...]}; empty and cleared replies are left out."""
    out: list[dict] = []
    for f in sorted(files):
        data = json.loads(f.read_text(encoding="utf-8"))
        session = str(data["metadata"]["id"])
        for t in data["turns"]:
            text = str(t.get("content") or "").strip()
            if (
                not text
                or text == "[Response Cleared]"
                or t.get("role") not in ("user", "assistant")
            ):
                continue
            out.append({"ts": t["time"], "role": t["role"], "text": text, "session": session})
    return out


def import_plan(folder: Path, work: Path) -> tuple[str, Path]:
    """(ct import subcommand, file or folder) for one export folder, converting when needed."""
    if (folder / "conversations.json").exists():
        return "chatgpt", folder / "conversations.json"
    aider = sorted(folder.glob("*aider.chat.history.md")) + sorted(
        folder.glob(".aider.chat.history.md")
    )
    turns = [
        f for f in folder.glob("*.json") if f.name != "conversations.json" and _is_turn_file(f)
    ]
    records: list[dict] = []
    for f in sorted(folder.glob("*.md")):
        if f.read_text(encoding="utf-8", errors="replace").startswith(
            "<!-- Generated by SpecStory"
        ):
            records += convert_specstory(f.read_text(encoding="utf-8", errors="replace"), f.stem)
    for f in aider:
        records += convert_aider(f.read_text(encoding="utf-8", errors="replace"), folder.name)
    if turns:
        records += convert_turn_files(turns)
    if records:
        path = work / f"{folder.name}.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for r in records:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        return "jsonl", path
    if any(folder.rglob("*.jsonl")):
        return "claude-code", folder
    raise SystemExit(f"{folder}: no export this benchmark reads (see --help)")


def _is_turn_file(f: Path) -> bool:
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "turns" in data and "metadata" in data


# ----- the cases ----------------------------------------------------------------------------------

_OPENING = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|did|do|does|is|are|was|were|can|could|"
    r"should|would|will|shall|have|has|any)\b\s*",
    re.IGNORECASE,
)
_PUNCT = re.compile(r"[^\w\s'’-]+")


def reworded(question: str) -> str | None:
    """The question asked again in other words: lowercased, punctuation and the opening question
    word dropped; None when fewer than two words remain."""
    text = " ".join(_PUNCT.sub(" ", question.lower()).split())
    text = _OPENING.sub("", text, count=1).strip()
    return text if len(text.split()) >= 2 else None


def query_of(question: str, form: str) -> str | None:
    if form == "verbatim":
        return " ".join(question.split())
    return reworded(question)


def echo_cases(store) -> list[dict]:
    """Every answered bare question of the store: {question id, answer id, text}."""
    from ..format.record import CONVERSATION_TYPES
    from ..results import Filters
    from ..retrieve.answers import answer_of, is_question

    index = store.index(update=False)
    out = []
    for (rowid,) in index.conn.execute(
        "SELECT rowid FROM records WHERE hidden = 0 ORDER BY ts, rowid"
    ).fetchall():
        rec = index.record_at(rowid)
        if rec.get("type") not in CONVERSATION_TYPES or not is_question(rec.get("text", "")):
            continue
        answer = answer_of(index, rowid, rec, Filters())
        if answer is not None:
            out.append(
                {
                    "question": str(rec["id"]),
                    "answer": index.record_at(answer)["id"],
                    "role": rec.get("role"),
                    "text": rec["text"],
                }
            )
    return out


def classify(hits: list[dict], question: str, answer: str) -> str | None:
    """Where one echo stands in a top ten (hits as `ct search --json` prints them): None when the
    question is not among them; "above" when the answer is a hit above it, or the hit in its slot
    with the question shown under it (parts.question); "with" when the question hit carries the
    answer (parts.answer); "missing" otherwise."""
    at = None
    for i, h in enumerate(hits[:K]):
        carried = h.get("question") or (h.get("parts") or {}).get("question")
        if h["id"] == question or (isinstance(carried, dict) and carried.get("id") == question):
            at = i
            break
    if at is None:
        return None
    ids = [h["id"] for h in hits[:K]]
    if answer in ids[: at + 1]:
        return "above"
    reply = (hits[at].get("parts") or {}).get("answer")
    if isinstance(reply, dict) and reply.get("id") == answer:
        return "with"
    return "missing"


# ----- running ------------------------------------------------------------------------------------


def ct(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """One real `ct` command (this interpreter, this checkout), failing loudly."""
    proc = subprocess.run(
        [sys.executable, "-m", "memstore", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"ct {' '.join(args[:4])}… failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_export(
    folder: Path, work: Path, log, reuse: bool = False, embedder: str = "minilm"
) -> dict:
    from ..retrieve import search as _search
    from ..store import Store

    root = work / folder.name
    kind, src = import_plan(folder, work)
    t0 = time.perf_counter()
    if not (reuse and root.exists()):
        if root.exists():
            shutil.rmtree(root)
        ct("init", str(root), "--embedder", embedder, "--timezone", "UTC")
        ct("-C", str(root), "import", kind, str(src), "--allow-secrets")
    build_s = time.perf_counter() - t0
    store = Store(root)
    store.index(update=True)
    records = (
        store.index(update=False)
        .conn.execute("SELECT count(*) FROM records WHERE hidden = 0")
        .fetchone()[0]
    )
    cases = echo_cases(store)
    log(
        f"{folder.name}: {records} records ({kind}, {build_s:.0f} s), {len(cases)} answered bare questions"
    )
    forms: dict[str, dict] = {}
    for form in FORMS:
        asked = [(c, query_of(c["text"], form)) for c in cases]
        asked = [(c, q) for c, q in asked if q]
        qfile = work / f"{folder.name}.{form}.queries"
        qfile.write_text("".join(q.replace("\n", " ") + "\n" for _, q in asked), encoding="utf-8")
        out = ct(
            "-C", str(root), "search", "--queries", str(qfile), "-k", str(K), "--json", "--explain"
        )
        answers = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        if len(answers) != len(asked):
            raise SystemExit(f"{folder.name}: {len(asked)} queries, {len(answers)} answers")
        counts = {"asked": len(asked), "echoes": 0, "above": 0, "with": 0, "missing": 0}
        plain = {"echoes": 0, "above": 0}
        for (c, q), res in zip(asked, answers):
            where = classify(res["hits"], c["question"], c["answer"])
            if where is not None:
                counts["echoes"] += 1
                counts[where] += 1
                if (
                    where != "above"
                ):  # said on the terminal only: the export's words stay out of files
                    log(f"    not above ({where}): {q!r}")
            # the same query without the answers-first step, for comparison
            bare = _search.search(store, q, k=K, answers=False)
            where = classify(
                [{"id": h.id, "parts": h.parts} for h in bare], c["question"], c["answer"]
            )
            if where is not None:
                plain["echoes"] += 1
                plain["above"] += where == "above"
        forms[form] = {**counts, "without_step": plain}
        log(f"  {form}: {counts} (without the step: {plain})")
    source = (
        (folder / "SOURCE").read_text(encoding="utf-8").strip()
        if (folder / "SOURCE").exists()
        else ""
    )
    return {
        "name": folder.name,
        "source": source,
        "import": kind,
        "records": records,
        "build_s": build_s,
        "cases": len(cases),
        "forms": forms,
    }


def _pct(n: int, d: int) -> str:
    return f"{n} ({100 * n / d:.0f}%)" if d else "0"


def report(results: list[dict], command: str) -> str:
    lines = [
        "| export | records | answered bare questions | asked again | echoes in the top 10 | "
        "answer above its echo | answer only with it | answer missing | without the step: answer above |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    total = {f: {"echoes": 0, "above": 0} for f in FORMS}
    for r in results:
        for form in FORMS:
            c = r["forms"][form]
            total[form]["echoes"] += c["echoes"]
            total[form]["above"] += c["above"]
            p = c["without_step"]
            lines.append(
                f"| {r['name']} | {r['records']} | {r['cases']} | {form} ({c['asked']}) | "
                f"{c['echoes']} | {_pct(c['above'], c['echoes'])} | {_pct(c['with'], c['echoes'])} | "
                f"{_pct(c['missing'], c['echoes'])} | {_pct(p['above'], p['echoes'])} of {p['echoes']} |"
            )
    for form in FORMS:
        t = total[form]
        lines.append(
            f"| **all** | | | {form} | {t['echoes']} | {_pct(t['above'], t['echoes'])} | | | |"
        )
    lines += ["", f"Command: `{command}`", ""]
    for r in results:
        if r["source"]:
            lines.append(f"- {r['name']}: {r['source']} (`ct import {r['import']}`)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="one folder per export (see above)")
    ap.add_argument(
        "--work", type=Path, default=None, help="where the stores are built (temporary)"
    )
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    ap.add_argument("--json", type=Path, default=None, help="write every figure as JSON here")
    ap.add_argument(
        "--embedder", default="minilm", help="the stores' embedder (ct init --embedder)"
    )
    ap.add_argument(
        "--reuse", action="store_true", help="search the stores an earlier run left in --work"
    )
    args = ap.parse_args(argv)
    folders = sorted(p for p in args.data.iterdir() if p.is_dir())
    if not folders:
        raise SystemExit(f"{args.data}: no export folders")
    work = args.work or Path(tempfile.mkdtemp(prefix="echo-real-"))
    work.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    results = [run_export(f, work, log, args.reuse, args.embedder) for f in folders]
    command = "python -m memstore.bench.echo_real " + " ".join(argv or sys.argv[1:])
    text = report(results, command)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    if args.json:
        args.json.write_text(
            json.dumps({"command": command, "exports": results}, indent=1, ensure_ascii=False)
            + "\n",
            encoding="utf-8",
        )
    print(text)
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
