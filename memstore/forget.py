"""Forgetting: taking records' text out of every committed file in one commit, leaving a tombstone
(id and hash, never the text) so no merge brings them back, and optionally out of git history.

Where a record's text lives, and what forgetting does there:

    log/YYYY/YYYY-MM-DD.jsonl   the day file is rewritten without the record's line
    packs/YYYY/YYYY-MM-DD/      untouched: the vector (and original) is sealed under the key the line
                                held, so it is unreadable once the line is gone; an older store is
                                refused like every write ("run ct upgrade")
    topic tree                  its id leaves every topic; names and summaries are rebuilt from what
                                remains (format 2: `memstore.format.tree.forget`)
    markers.jsonl               a marker whose text holds the forgotten text is removed
    forgotten.jsonl             gains {"id", "hash", "at"} per record (merges by union)
    commit subjects, history    only `purge_history` (git-filter-repo) rewrites them

A clone that still has the record drops it as soon as it sees the tombstone: the index never
indexes a tombstoned id, and `ct sync` (or the next `ct forget`) removes it from that clone's files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from .errors import MemstoreError, UsageError
from .format import log as logfmt
from .format import tombstones as tombfmt
from .format.timeutil import from_iso, local_day, now_utc, to_iso
from .index import queries

TOMBSTONES = tombfmt.FILENAME
ATTRIBUTE = tombfmt.ATTRIBUTE
REPLACEMENT = "[forgotten]"


@dataclass
class ForgetResult:
    """What a forget did (or, with dry_run, would do)."""

    records: list[dict] = field(default_factory=list)
    commit: str | None = None
    paths: list[str] = field(default_factory=list)
    purged: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "forgotten": [r["id"] for r in self.records],
            "commit": self.commit,
            "paths": self.paths,
            "purged_history": self.purged,
            "notes": self.notes,
            "records": [
                {"id": r["id"], "ts": r.get("ts"), "session": r.get("session"), "text": (r.get("text") or "")[:200]}
                for r in self.records
            ],
        }


# ----- tombstones ---------------------------------------------------------------------------------

tombstones = tombfmt.read
forgotten_ids = tombfmt.ids


# ----- choosing records ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Criteria:
    """What to forget besides ids (`Store.forget`'s keywords); every one given must hold."""

    match: str | None = None  # every word of it in the text
    session: str | None = None
    since: object = None  # ISO time or a phrase ("yesterday"), read against `now`
    until: object = None
    now: object = None
    commit: str | None = None  # the records this commit added

    def given(self) -> bool:
        return any((self.match, self.session, self.since, self.until, self.commit))


def select(store, ids=(), criteria: Criteria = Criteria()) -> list[dict]:
    """The records to forget: by id, by every word of `match`, by session, by time range, by the
    commit that added them (ANDed)."""
    c = criteria
    if not (ids or c.given()):
        raise UsageError(
            "say what to forget: record ids, --match QUERY, --session NAME, --commit REV or --since/--until"
        )
    index = store.index()
    chosen: set[int] | None = None

    def narrow(rowids: set[int]) -> None:
        nonlocal chosen
        chosen = rowids if chosen is None else chosen & rowids

    back: list[dict] = []  # forgotten records whose lines a git merge brought back: removed again
    if ids:
        rows = {}
        gone = forgotten_ids(store.root)
        stale = None
        for rid in ids:
            found = queries.rowids_of(index, record_id=rid)
            if not found and rid.startswith("topic:"):  # fsck names a topic whose summary quotes a forgotten record
                stale = (stale_records(store) + leftovers(store)) if stale is None else stale
                again = [r for r in stale if r["id"] == rid][:1]
                if not again:
                    raise UsageError(f"{rid}: no topic summary quotes a forgotten record", "Nothing was forgotten.")
                back += again
                continue
            if not found and rid not in gone and rid in _tree_ids(store):
                back.append({"id": rid, "ts": "", "text": None, "session": None})  # git removed its line
                continue
            if not found and rid in gone:
                stale = (stale_records(store) + leftovers(store)) if stale is None else stale
                again = [r for r in stale if r["id"] == rid][:1]
                if again:
                    back += again
                    continue
                raise UsageError(
                    f"record {rid!r} is forgotten already (forgotten.jsonl).",
                    f'To take its text out of git history too: "ct forget --purge-history {rid}".',
                )
            if not found:
                raise UsageError(f"no record with id {rid!r} in {store.root}", "Nothing was forgotten.")
            rows[rid] = found
        narrow({r for found in rows.values() for r in found})  # ids named: other filters only narrow them
    if c.session:
        narrow(set(queries.rowids_of(index, session=c.session)))
    if c.commit:
        added = added_by(store, c.commit)
        rows = {r for rid in sorted(added) for r in queries.rowids_of(index, record_id=rid)}
        if not rows:
            raise UsageError(
                f"none of the {len(added)} records commit {c.commit} added is in the store now (forgotten already?)",
                "Nothing was forgotten.",
            )
        narrow(rows)
    if c.since or c.until:
        from .retrieve.timefilter import instant

        lo = instant(c.since, store, c.now, edge="start") if c.since else float("-inf")
        hi = instant(c.until, store, c.now, edge="end") if c.until else float("inf")
        narrow(set(queries.rowids_of(index, ts_range=(lo, hi))))
    if c.match:
        narrow(_matching(store, c.match))
    recs = [index.record_at(r) for r in sorted(chosen or ())] + back
    seen: set[str] = set()
    return [r for r in recs if not (r["id"] in seen or seen.add(r["id"]))]


def _tree_ids(store) -> set[str]:
    """Every record id the topic tree names (a topic's or archived)."""
    from .format import tree as treefmt

    tree = treefmt.read(store.root)
    return set(tree.topic_of()) | set(tree.archived)


def _matching(store, query: str) -> set[int]:
    """Rows whose text holds every word of the query (case-insensitive): precise, never "nearest"."""
    from .index.tokenize import _WORD, match_expression

    words = [w.lower() for w in _WORD.findall(query)]
    expr = match_expression(query)
    if not words or not expr:
        raise UsageError(f"--match {query!r} has no words to look for")
    index = store.index(update=False)
    out = set()
    for rowid in queries.fts_rowids(index, expr):
        text = index.record_at(rowid)["text"].lower()
        if all(w in text for w in words):
            out.add(rowid)
    return out


# ----- forgetting ---------------------------------------------------------------------------------


def forget(store, records: list[dict], purge_history: bool = False, message: str | None = None) -> ForgetResult:
    """Remove the records from every committed file and append their tombstones: one commit."""
    res = ForgetResult(records=list(records))
    if not records:
        res.notes.append("nothing to forget")
        return res
    n = len(records)
    vectors = _document_vectors(store, records)
    with store.transaction(message or f"Forget {n} record{'s' if n != 1 else ''}") as tx:
        res.paths, markers = _remove_everywhere(store, records)
        full = [r for r in records if r["text"] is not None] + markers  # a tree-only id has no text to tombstone
        res.paths += _append_tombstones(store, full) if full else []
        tx.stage(res.paths)
    res.commit = tx.commit
    res.notes += scrub_this_machine(store, records + markers, vectors)
    if purge_history:
        full = [r for r in records if r["text"] is not None]
        res.notes.append(purge(store, [r["text"] for r in full], [r["id"] for r in full], [_vkey(r) for r in full]))
        res.purged = True
    return res


def _remove_everywhere(store, records: list[dict]) -> tuple[list[str], list[dict]]:
    """(paths changed, marker lines removed): the marker lines get tombstones of their own."""
    ids = {r["id"] for r in records}
    # the rest are named only by the tree, a pack or markers.jsonl (what a git merge brought back)
    with_text = [r for r in records if r["text"] is not None]
    texts = [r["text"] for r in with_text] + [r["quote"] for r in records if r.get("quote")]
    # The tree first: rebuilding names reads the remaining records through the index's offsets
    # into the day logs, which the rewrite below changes.
    marker_paths, markers = _forget_in_markers(store, texts, ids)
    paths = _forget_in_tree(store, ids, texts) + marker_paths
    days = {local_day(from_iso(r["ts"]), store.tz) for r in with_text}
    days = sorted(days | {r["day"] for r in records if r.get("day")})
    for day in days:
        paths += _rewrite_day(store, day, ids)
    paths += _remove_vectors(store, days, ids)
    return paths, markers


# ----- this machine's own copies (.memstore/ and the embedding cache) -------------------------------


def scrub_this_machine(store, records: list[dict], vectors=()) -> list[str]:
    """Take the forgotten records out of what this machine keeps besides the committed files: the
    index (rebuilt, its FTS5 segments merged, VACUUMed, its WAL emptied), the rolled-back copies
    under .memstore/rolled-back/, and the user's embedding cache. Returns notes for what could
    not be done."""
    from .secret_policy import clean_key

    texts = [r["text"] for r in records if isinstance(r.get("text"), str) and r["text"]]
    notes = []
    index = store.index(update=False)
    index.update(rebuild=True)
    if not queries.scrub(index, [clean_key(t) for t in texts]):
        notes.append(
            f"{index.path}-wal could not be emptied: another process is reading the index; the next ct write empties it"
        )
    _scrub_rolled_back(store, {r["id"] for r in records if r.get("id")}, texts)
    notes += _scrub_embedding_cache(store, records, texts, vectors)
    return notes


def _document_vectors(store, records: list[dict]) -> list:
    """The stored vectors of the document chunks among the records (read from the index before the
    forget): a chunk is embedded with its neighbours' text, so the cache knows it by its vector."""
    docs = [r["id"] for r in records if r.get("type") == "doc" or r.get("source")]
    if not docs:
        return []
    index = store.index(update=False)
    out = []
    for rid in docs:
        for row in queries.rowids_of(index, record_id=rid):
            vec = queries.vector_of(index, row)
            if vec is not None:
                out.append(vec)
    return out


def _scrub_rolled_back(store, ids: set[str], texts: list[str]) -> None:
    """Lines a rollback saved under .memstore/rolled-back/ that hold a forgotten record (by id or
    text) are removed; a file or folder left empty goes."""
    from .repair import BACKUP_DIR

    top = store.meta_dir / BACKUP_DIR
    if not top.is_dir():
        return
    needles = [json.dumps({"id": rid}, separators=(",", ":"))[1:-1].encode() for rid in ids]
    needles += [v for t in texts for v in _variants(t)]
    for path in sorted(p for p in top.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if not any(n in data for n in needles):
            continue
        kept = [ln for ln in data.splitlines(keepends=True) if not any(n in ln for n in needles)]
        if kept:
            path.write_bytes(b"".join(kept))
        else:
            path.unlink()
    for folder in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()
        except OSError:
            pass


def _scrub_embedding_cache(store, records: list[dict], texts: list[str], vectors) -> list[str]:
    """The user's embedding cache without the records' vectors: by the keyed hash of each text and
    of each sentence a user turn's vector was averaged over, by the tombstones' hashes (an older
    memstore's keys), and by vector for document chunks."""
    from .adapters.cache import default_path, forget_in_cache
    from .store import EMBED_CHARS
    from .turn_embedding import sentences

    path = default_path()
    if not path.exists():
        return []
    pieces = set()
    for r in records:
        text = r.get("text")
        if isinstance(text, str) and text:
            pieces |= {text, text[:EMBED_CHARS], *sentences(r, text[:EMBED_CHARS])}
    hashes = [t.get("hash") for t in tombstones(store.root).values()]
    failed = forget_in_cache(path, sorted(pieces), hashes, vectors)
    if failed:
        return [
            f"the embedding cache {path} could not be cleaned ({failed}); delete it to be sure (it is only a cache)"
        ]
    return []


def _rewrite_day(store, day: str, ids: set[str]) -> list[str]:
    """The day file without the records' lines (the only rewrite of a day log memstore ever makes)."""
    path = logfmt.day_path(store.root, day)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    kept, dropped = [], 0
    for raw in data.splitlines(keepends=True):
        try:
            rid = json.loads(raw).get("id")
        except (ValueError, AttributeError):
            rid = None
        if rid in ids:
            dropped += 1
        else:
            kept.append(raw)
    if not dropped:
        return []
    logfmt.rewrite(path, b"".join(kept))
    return [store.rel(path)]


def _remove_vectors(store, days: list[str], ids: set[str]) -> list[str]:
    """Nothing to rewrite: a record's vector and original are sealed under the key its day-log line
    holds (format/seal.py), so `_rewrite_day` removing the line leaves them unreadable in packs that
    are never touched (and so never a merge conflict). The next consolidation of the day leaves them
    behind for good."""
    return []


def _forget_in_tree(store, ids: set[str], texts: list[str]) -> list[str]:
    """The tree's op lines rewritten so none names the records or quotes their text (format/treeforget.py);
    a topic the forget left with no record and no sub-topic leaves the tree (a `gone` op), as one
    whose records were superseded does, instead of staying as an "Untitled topic" of 0 turns."""
    from .format import tree as treefmt

    before = treefmt.read(store.root)
    held = {tid for tid, t in before.topics.items() if ids & set(t.records)}
    paths = list(treefmt.forget(store.root, ids, texts))
    if not held:
        return paths
    tree = treefmt.read(store.root)
    at = to_iso(now_utc())
    emptied = sorted(tid for tid in held if tid in tree.topics and not tree.topics[tid].records)
    for tid in emptied:
        if tree.children(tid):
            continue
        topic = tree.topics.pop(tid)
        tree.gone[tid] = {"into": None, "why": "its records were forgotten", "at": at}
        if tree.current == tid:
            tree.current = topic.parent
    return sorted(set(paths) | set(treefmt.write(store.root, tree)))


def _forget_in_markers(store, texts: list[str], ids: set[str]) -> tuple[list[str], list[dict]]:
    """markers.jsonl without the lines that quote a forgotten text or are named by id (a forgotten
    marker a merge brought back): (paths, the removed lines, which get tombstones)."""
    from .format import markers as markfmt

    path = markfmt.path(store.root)
    if not path.exists():
        return [], []
    flat = [" ".join(t.split()) for t in texts]
    lines = path.read_bytes().splitlines(keepends=True)
    kept, removed = [], []
    for raw in lines:
        try:
            obj = json.loads(raw)
            text = " ".join(str(obj.get("text") or "").split())
        except (ValueError, AttributeError):
            kept.append(raw)
            continue
        if obj.get("id") in ids or (text and any(text == f or (len(f) >= 12 and f in text) for f in flat)):
            removed.append({"id": obj.get("id"), "text": obj.get("text") or ""})
            continue
        kept.append(raw)
    if not removed:
        return [], []
    logfmt.rewrite(path, b"".join(kept))
    return [store.rel(path)], [m for m in removed if isinstance(m["id"], str)]


def _append_tombstones(store, records: list[dict]) -> list[str]:
    from .format.record import text_hash

    have = tombstones(store.root)
    at = to_iso(now_utc())
    lines = [
        json.dumps({"id": r["id"], "hash": r.get("hash") or text_hash(r["text"]), "at": at}, separators=(",", ":"))
        + "\n"
        for r in records
        if r["id"] not in have
    ]
    path = store.root / TOMBSTONES
    if lines:
        logfmt.append_lines(path, "".join(lines).encode("utf-8"), fsync=False)
    attrs = store.root / ".gitattributes"
    current = attrs.read_text(encoding="utf-8") if attrs.exists() else ""
    if ATTRIBUTE not in current:
        attrs.write_text(
            current + ("" if current.endswith("\n") or not current else "\n") + ATTRIBUTE + "\n", encoding="utf-8"
        )
    return [TOMBSTONES, ".gitattributes"]


# ----- a clone that still has tombstoned records ----------------------------------------------------


def stale_records(store) -> list[dict]:
    """Records in this clone's day logs (or tree) that a tombstone says were forgotten elsewhere."""
    gone = tombstones(store.root)
    if not gone:
        return []
    out = []
    needles = [rid.encode("utf-8") for rid in gone]
    for day, path in sorted(logfmt.list_days(store.root).items()):
        data = path.read_bytes()
        if any(n in data for n in needles):
            out += tombfmt.lines_named(data, gone)
    return out


def leftovers(store) -> list[dict]:
    """What a git merge kept of forgotten records besides day-log lines: a forgotten marker's line
    and stale topic summaries (a pack keeps nothing readable: see `_remove_vectors`). One entry
    each, text None, for `forget`."""
    from .format import markers as markfmt

    gone = forgotten_ids(store.root)
    if not gone:
        return []
    out: dict[str, dict] = {}
    # No pack holds anything of them that can be read: their keys left with their lines.
    for line in markfmt.forgotten_lines(store.root):
        note = "a forgotten marker, which a git merge brought back to markers.jsonl"
        out.setdefault(line["id"], {"id": line["id"], "ts": line.get("ts") or "", "text": None, "note": note})
    return list(out.values()) + stale_quotes(store)


def stale_quotes(store) -> list[dict]:
    """Topics whose summary quotes an opening sentence none of their records holds: a clone that
    named the topic before it learnt of a forget, merged in. The quote is treated as forgotten
    text, so `forget` names the topic again from the records it holds."""
    from .format import tree as treefmt

    tree = treefmt.read(store.root)
    out = []
    for tid, quote in sorted(stale_topics(store, tree).items()):
        note = f"topic {tree.topics[tid].name!r}: its summary quotes a record it no longer holds (forgotten on another clone)"
        out.append({"id": f"topic:{tid}", "ts": "", "text": None, "quote": quote, "note": note})
    return out


def stale_topics(store, tree) -> dict[str, str]:
    """{topic id: the quote} for each topic of `tree` whose summary opens with a sentence no record
    of it (or of its sub-topics) holds; empty when nothing was ever forgotten."""
    from .tree.naming import scrubbed

    if not forgotten_ids(store.root):
        return {}
    index = store.index()
    out = {}
    for tid, topic in tree.topics.items():
        _, sep, opener = (topic.summary or "").partition("; opens with: ")
        quote = " ".join(opener.rstrip("…").split())
        if not sep or len(quote) < 12:
            continue
        flat = quote.casefold()
        if not any(
            flat in " ".join(text.split()).casefold()
            for rec in _topic_records(index, tree, tid)
            for text in scrubbed([str(rec["text"])])  # summaries are made from scrubbed text
        ):
            out[tid] = quote
    return out


def _topic_records(index, tree, tid: str):
    for t in [tid, *sorted(tree.descendants(tid))]:
        for rid in tree.topics[t].records if t in tree.topics else []:
            for row in queries.rowids_of(index, record_id=rid):
                yield index.record_at(row)


def without_stale_summaries(store, tree):
    """The tree as reads show it: a summary quoting a forgotten record (merged in from a clone that
    had not learnt of the forget) is made again from the records the topic holds, until a forget
    or `ct sync` commits that."""
    from .tree.naming import offline_summary

    index = None
    for tid in stale_topics(store, tree):
        index = index or store.index(update=False)
        recs = list(_topic_records(index, tree, tid))
        tree.topics[tid].summary = (
            offline_summary([str(r["text"]) for r in recs], [str(r.get("role") or "") for r in recs]) if recs else ""
        )
    return tree


def apply_tombstones(store) -> ForgetResult:
    """Remove from this clone's files what another clone forgot (one commit; none when clean)."""
    store.index()  # a merge may have rewritten day logs: topic names are rebuilt through fresh offsets
    stale = stale_records(store)
    stale += [r for r in leftovers(store) if r["id"] not in {s["id"] for s in stale}]
    if not stale:
        from .format import tree as treefmt

        ids = forgotten_ids(store.root)
        in_tree = ids & (set(treefmt.read(store.root).topic_of()) if ids else set())
        if not in_tree:
            return ForgetResult()
        with store.transaction(f"Apply {len(in_tree)} tombstones from {TOMBSTONES} to the topic tree") as tx:
            paths = _forget_in_tree(store, in_tree, [])
            tx.stage(paths)
        return ForgetResult(commit=tx.commit, paths=paths)
    n = len(stale)
    return forget(
        store,
        stale,
        message=f"Apply {n} tombstone{'s' if n != 1 else ''} from {TOMBSTONES} (forgotten on another clone)",
    )


# ----- history ------------------------------------------------------------------------------------

PURGE_NOTICE = """\
History rewritten: no commit of this clone holds the forgotten text any more.
What this means:
  - Every commit id from the first one that held the text onwards has changed.
  - The remote still has the old history. Publish the new one with a force push:
        git -C {root} push --force {remote} {branch}
    (ct sync refuses to merge the old history back; it says so).
  - Every other clone still holds the old commits, and the text in them. On each one, either
    re-clone, or run "ct sync": it sees the rewritten remote, keeps that clone's unpushed records,
    moves it onto the new history, and expires its reflogs and prunes, so no object there keeps
    the text. A clone that ran a plain "git pull" instead merged the old history back: its
    "ct sync" refuses to push it (purged-history.jsonl, committed, names the purged commits), and
    "ct sync --drop-purged" there does the same move. By hand (losing that clone's unpushed
    records): "git reset --hard {remote}/{branch} && git reflog expire --expire=now --all &&
    git gc --prune=now".
  - Hosting services may keep old commits reachable by id (pull requests, caches) until they
    expire them; ask the host to purge them if the text was sensitive."""


def _tracking_config(store) -> list[tuple[str, str]]:
    """branch.*.remote / branch.*.merge, which filter-repo's removal of the remotes takes with it."""
    try:
        out = store.git.run("config", "--get-regexp", r"^branch\..*\.(remote|merge)$")
    except MemstoreError:
        return []
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if " " in line]


def texts_in_history(store, ids) -> list[str]:
    """The texts that tombstoned records had in git history (to purge them after forgetting)."""
    return sorted({r["text"] for r in lines_in_history(store, ids) if isinstance(r.get("text"), str)})


def keys_in_history(store, ids) -> list[str]:
    """The keys (vkey) their lines had in git history: each opens a sealed vector in older packs."""
    return sorted({r["vkey"] for r in lines_in_history(store, ids) if isinstance(r.get("vkey"), str)})


def lines_in_history(store, ids) -> list[dict]:
    """Every day-log line that tombstoned records had in git history."""
    git = store.git
    out = []
    for rid in ids:
        needle = json.dumps({"id": rid}, separators=(",", ":"))[1:-1]  # "id":"..."
        log = git.run("log", "--all", "--format=%x1e%H", "--name-only", "-S", needle, "--", "log")
        for chunk in log.split("\x1e")[1:]:
            sha, *names = [x for x in chunk.split("\n") if x.strip()]
            for rev in (sha, f"{sha}^"):
                for name in names:
                    try:
                        blob = git.run("show", f"{rev}:{name}")
                    except MemstoreError:
                        continue
                    for line in blob.splitlines():
                        if needle in line:
                            try:
                                rec = json.loads(line)
                            except ValueError:
                                continue
                            if isinstance(rec, dict):
                                out.append(rec)
    return out


def _variants(text: str) -> list[bytes]:
    """The byte strings a text is committed as: raw (segments), JSON-escaped (logs, tree), and its
    lines and its summary opener (topic summaries quote the start of a text)."""
    out = {text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}
    flat = " ".join(text.split())
    if len(flat) >= 24:  # commit subjects quote 60 characters, summaries 109
        for cut in (60, 109):
            out |= {flat[:cut], json.dumps(flat[:cut], ensure_ascii=False)[1:-1]}
    out |= {line for line in text.splitlines() if len(line.strip()) >= 16}
    return sorted({v.encode("utf-8", "surrogatepass") for v in out if v}, key=len, reverse=True)


_FILTER_SCRIPT = r"""
import json, sys
import git_filter_repo as fr
spec = json.load(open(sys.argv[1]))
pairs = [(bytes.fromhex(a), bytes.fromhex(b)) for a, b in spec["pairs"]]
prefixes = [bytes.fromhex(p) for p in spec["prefixes"]]
new = spec["replacement"].encode()
def clean(data):
    for old, rep in pairs:
        if old in data:
            data = data.replace(old, rep)
    return data
def clean_message(message):
    message = clean(message)
    for flat in prefixes:  # a subject quotes a text's start, cut anywhere ("Mark: The surprise par…")
        n = len(flat)
        while n >= 24 and flat[:n] not in message:
            n -= 1
        if n >= 24:
            message = message.replace(flat[:n], new)
    return message
import re
words = spec.get("words") or []
named = re.compile(r"(?i)(?<!\w)(" + "|".join(re.escape(w) for w in words) + r")(?!\w)") if words else None
def scrub_names(data):
    # topic names and summaries are made from key words: a word only the forgotten records held goes
    if named is None or b'"op"' not in data:
        return data
    out, changed = [], False
    for line in data.split(b"\n"):
        try:
            d = json.loads(line)
        except ValueError:
            d = None
        if isinstance(d, dict) and d.get("op") in ("topic", "set"):
            hit = False
            for k in ("name", "summary"):
                v = d.get(k)
                if isinstance(v, str) and named.search(v):
                    d[k], hit = named.sub(spec["replacement"], v), True
            if hit:
                line, changed = json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8"), True
        out.append(line)
    return b"\n".join(out) if changed else data
def blob_callback(blob, _metadata):
    blob.data = scrub_names(clean(blob.data))
def message_callback(message):
    return clean_message(message)
args = fr.FilteringOptions.parse_args(["--force", "--quiet"])
fr.RepoFilter(args, blob_callback=blob_callback, message_callback=message_callback).run()
"""


def refuse_shallow_purge(store) -> None:
    """A shallow clone holds only the newest commits: rewriting them would make its cut-off point a
    root commit, and the force push the rewrite asks for would replace the remote's whole history."""
    from .gitrepo import _common_dir, git_dir

    gdir = git_dir(store.root)
    if gdir is not None and (_common_dir(gdir) / "shallow").exists():
        raise UsageError(
            f"{store.root} is a shallow clone: its history stops at a cut-off commit, so --purge-history cannot "
            "reach the older commits that hold the text, and the force push it needs would replace the remote's "
            "whole history with this clone's few commits.",
            f'Fetch the whole history first ("git -C {store.root} fetch --unshallow"), or run the command in a full '
            "clone. Nothing was changed.",
        )


def _own_words(store, texts: list[str]) -> list[str]:
    """The content words of the forgotten texts that no remaining record holds: older topic names and
    summaries made while a forgotten record was in the topic may hold them, and the purge takes them
    out there (a word a remaining record also says tells nothing, and stays)."""
    from .tree.naming import words

    mine = {w.casefold() for t in texts for w in words(t)}
    for path in logfmt.list_days(store.root).values():
        if not mine:
            break
        for raw in path.read_bytes().splitlines():
            try:
                text = json.loads(raw).get("text")
            except (ValueError, AttributeError):
                continue
            if isinstance(text, str):
                mine -= {w.casefold() for w in words(text)}
    return sorted(mine)


def _vkey(rec: dict) -> str:
    """The record's key as its line holds it (made from its id and text: format/seal.py)."""
    from .format import seal

    return rec.get("vkey") or seal.record_key(rec["id"], rec["text"])


def purge(store, texts: list[str], ids=(), vkeys=()) -> str:
    """Rewrite this clone's history (every branch) so no commit holds the texts (of records `ids`);
    returns the notice."""
    git = store.git
    remotes = {name: git.run("remote", "get-url", name) for name in git.run("remote").split()}
    tracking = _tracking_config(store)
    # The remote's old history, as last fetched: sync must never bring it back (see refuse_unpublished_purge).
    old = [
        line.split()[1]
        for line in git.run("for-each-ref", "--format=%(refname) %(objectname)", "refs/remotes").splitlines()
    ]
    parents = _parents(store)
    pairs = [(v.hex(), REPLACEMENT.encode().hex()) for t in texts for v in _variants(t)]
    # Each record's key (vkey) in older lines opens its sealed vector in older packs: it goes too.
    pairs += [(k.encode().hex(), REPLACEMENT.encode().hex()) for k in vkeys if isinstance(k, str) and k]
    prefixes = [" ".join(t.split()).encode("utf-8", "surrogatepass").hex() for t in texts]
    words = _own_words(store, texts)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump({"pairs": pairs, "prefixes": prefixes, "replacement": REPLACEMENT, "words": words}, fh)
        spec = fh.name
    try:
        with store.lock():
            proc = subprocess.run(
                [sys.executable, "-c", _FILTER_SCRIPT, spec], cwd=store.root, capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise MemstoreError(
                    f"git-filter-repo failed in {store.root}: {proc.stderr.strip()[-800:]}",
                    "The record is forgotten in the current files; history was not rewritten.",
                )
            for name, url in remotes.items():  # filter-repo removes remotes so nothing is pushed by accident
                if name not in git.run("remote").split():
                    git.run("remote", "add", name, url)
            for key, value in tracking:
                git.run("config", key, value)
            for ref in git.run("for-each-ref", "--format=%(refname)", "refs/remotes").split():
                git.run("update-ref", "-d", ref)  # the old history, as last fetched: it holds the text
            purged = _first_rewritten(store, parents)
            git.run("reflog", "expire", "--expire=now", "--all")
            git.run("gc", "--quiet", "--prune=now")
    finally:
        os.unlink(spec)
    _record_purge(store, purged, old, ids)
    branch = git.run("symbolic-ref", "--short", "-q", "HEAD")
    return PURGE_NOTICE.format(root=store.root, remote=next(iter(remotes), "origin"), branch=branch)


# ----- sync after a history rewrite -----------------------------------------------------------------

PURGED_MARK = "purged-history.json"  # in .memstore/ of an older memstore: the old remote tips of its purge
PURGED = "purged-history.jsonl"  # committed: the commits every --purge-history removed (ids, never text)
PURGED_ATTRIBUTE = f"{PURGED} merge=union"


def _parents(store) -> dict[str, list[str]]:
    """{commit: its parents} for every commit reachable from a ref (before a rewrite)."""
    out = {}
    for line in store.git.run("rev-list", "--all", "--parents").splitlines():
        sha, *parents = line.split()
        out[sha] = parents
    return out


def _first_rewritten(store, parents: dict[str, list[str]]) -> list[str]:
    """The commits filter-repo rewrote whose parents it did not: the first commits of the old
    history that held the text. Every other rewritten commit descends from one of them, so a
    branch holds a purged commit exactly when it holds one of these."""
    from .gitrepo import _common_dir, git_dir

    try:
        lines = (_common_dir(git_dir(store.root)) / "filter-repo" / "commit-map").read_text().splitlines()[1:]
    except (OSError, TypeError):
        return []
    rewritten = {a for a, b in (ln.split() for ln in lines if len(ln.split()) == 2) if a != b}
    return sorted(c for c in rewritten if not any(p in rewritten for p in parents.get(c, [])))


def _record_purge(store, commits: list[str], tips: list[str], ids) -> None:
    """One line in purged-history.jsonl, committed: every clone learns on its next pull which
    commits hold forgotten text, so ct sync refuses to push them and fsck names them."""
    if not commits and not tips:
        return
    line = {"at": to_iso(now_utc()), "commits": commits, "tips": sorted(set(tips)), "ids": sorted(ids)}
    with store.transaction(f"Record the {len(commits)} first commits --purge-history rewrote") as tx:
        logfmt.append_lines(store.root / PURGED, (json.dumps(line, separators=(",", ":")) + "\n").encode(), fsync=False)
        attrs = store.root / ".gitattributes"
        current = attrs.read_text(encoding="utf-8") if attrs.exists() else ""
        if PURGED_ATTRIBUTE not in current:
            attrs.write_text(
                current + ("\n" if current and not current.endswith("\n") else "") + PURGED_ATTRIBUTE + "\n"
            )
        tx.stage([PURGED, ".gitattributes"])


def purges(store) -> list[dict]:
    """Every purge the store records (purged-history.jsonl, and an older memstore's local mark)."""
    out = []
    try:
        data = (store.root / PURGED).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        data = ""
    for raw in data.splitlines():
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    try:
        old = json.loads((store.meta_dir / PURGED_MARK).read_text(encoding="utf-8"))
        out.append({"commits": [], "tips": old.get("old") or [], "ids": old.get("ids") or []})
    except (OSError, ValueError, AttributeError):
        pass
    return out


def purged_in(store, rev: str = "HEAD") -> list[str]:
    """The purged commits (purged-history.jsonl) that `rev` holds; [] on a clean clone (one git
    command: the old commits are not even present)."""
    wanted = sorted({c for p in purges(store) for c in [*(p.get("commits") or []), *(p.get("tips") or [])]})
    if not wanted:
        return []
    proc = subprocess.run(
        ["git", "-C", str(store.root), "cat-file", "--batch-check"],
        input="".join(f"{c}\n" for c in wanted),
        capture_output=True,
        text=True,
    )
    present = [ln.split()[0] for ln in proc.stdout.splitlines() if ln.endswith(" commit") or " commit " in ln]
    return [c for c in present if _is_ancestor(store, c, rev)]


def purged_ids(store, commits) -> list[str]:
    """The forgotten record ids of the purges that removed these commits."""
    commits = set(commits)
    return sorted(
        {
            i
            for p in purges(store)
            if commits & set((p.get("commits") or []) + (p.get("tips") or []))
            for i in p.get("ids") or []
        }
    )


def refuse_purged(store, res, rev: str = "HEAD", what: str = "push") -> None:
    """ct sync never pushes (nor merges) a commit that --purge-history removed: it holds forgotten text."""
    back = purged_in(store, rev)
    if not back:
        return
    ids = " ".join(purged_ids(store, back)) or "ID"
    if rev == "HEAD":
        raise MemstoreError(
            f"{store.root}: {res.branch} holds commit {back[0][:10]}, which ct forget --purge-history removed "
            f'(purged-history.jsonl): it holds forgotten text (a plain "git pull" merged the old history back). '
            f"ct sync does not {what} it.",
            f'Drop it: "ct -C {store.root} sync --drop-purged" moves {res.branch} onto {res.upstream}, writes again '
            "this clone's records that are not there, and expires the reflog and prunes so no object keeps the "
            "text. Nothing was pushed.",
        )
    raise MemstoreError(
        f"{store.root}: {rev} holds commit {back[0][:10]}, which ct forget --purge-history removed "
        "(purged-history.jsonl): someone pushed the old history back. ct sync does not merge it.",
        f'On a clone whose history is clean: "ct forget --purge-history {ids}" rewrites it away, then '
        f'"git push --force {res.remote} {res.branch}". Nothing was merged.',
    )


def expire_old_history(store) -> list[str]:
    """Drop every object only the reflog or a pruned ref keeps (so no object holds purged text):
    the reflogs of every ref but the stash are expired, then git gc --prune=now. Returns what still
    holds a purged commit (a branch, a tag, the stash) for the user to delete."""
    git = store.git
    refs = [r for r in git.run("for-each-ref", "--format=%(refname)").split() if r != "refs/stash"]
    git.run("reflog", "expire", "--expire=now", "--expire-unreachable=now", "HEAD", *refs)
    git.run("gc", "--quiet", "--prune=now")
    held = []
    for c in purged_in_any(store):
        held += git.run("for-each-ref", "--format=%(refname:short)", "--contains", c).split()
    return sorted(set(held))


def purged_in_any(store) -> list[str]:
    """The purged commits any ref (or the stash) holds."""
    out = []
    for ref in store.git.run("for-each-ref", "--format=%(refname)").split():
        out += [c for c in purged_in(store, ref) if c not in out]
    return out


def refuse_unpublished_purge(store, res) -> None:
    """After --purge-history (here or on a clone this one pulled from), sync must not fetch or
    merge the remote's old history back in: checked with ls-remote, before any fetch."""
    tips = {t for p in purges(store) for t in p.get("tips") or []}
    if not tips:
        return
    git = store.git
    branch = res.upstream.split("/", 1)[-1]
    try:
        line = git.run("ls-remote", res.remote, f"refs/heads/{branch}")
    except MemstoreError:
        return  # unreachable: the fetch that follows says so
    remote = line.split()[0] if line.strip() else None
    if remote not in tips:
        (store.meta_dir / PURGED_MARK).unlink(missing_ok=True)  # an older memstore's mark: the remote moved on
        return
    raise MemstoreError(
        f"{store.root}: this clone's history was rewritten by ct forget --purge-history, and "
        f"{res.upstream} still has the old history (with the forgotten text). ct sync does not merge it back.",
        f'Publish the rewritten history first: "git -C {store.root} push --force {res.remote} '
        f'HEAD:{res.upstream.split("/", 1)[-1]}", then run ct sync again. Nothing was changed.',
    )


def old_history_back(store) -> str | None:
    """A warning when this branch holds a commit that --purge-history removed (a plain `git pull`
    from a remote or clone that still had the old history), naming the commands that drop it; else None."""
    back = purged_in(store, "HEAD")
    if not back:
        return None
    ids = " ".join(purged_ids(store, back)) or "ID…"
    said = (
        f"commit {back[0][:10]} of the old history that ct forget --purge-history rewrote (purged-history.jsonl; "
        'it holds the forgotten text) is in this branch again: a plain "git pull" merged it back, and a push '
        "would publish it (ct sync refuses)."
    )
    upstream = _upstream_ref(store)
    if upstream and not purged_in(store, upstream):
        return (
            f'{said} "ct sync --drop-purged" moves this branch onto {upstream.removeprefix("refs/remotes/")} '
            "(keeping this clone's own records) and expires the reflog and prunes, so no object keeps the text; "
            f'or "ct forget --purge-history {ids}" rewrites it again'
        )
    return f'{said} "ct forget --purge-history {ids}" rewrites it again; then "git push --force" publishes the rewritten history'


def _upstream_ref(store) -> str | None:
    git = store.git
    try:
        branch = git.run("symbolic-ref", "--short", "-q", "HEAD")
        remote = git.run("config", "--get", f"branch.{branch}.remote")
        merge = git.run("config", "--get", f"branch.{branch}.merge").removeprefix("refs/heads/")
        return git.run("rev-parse", "-q", "--verify", "--symbolic-full-name", f"refs/remotes/{remote}/{merge}")
    except MemstoreError:
        return None


def _is_ancestor(store, a: str, b: str) -> bool:
    proc = subprocess.run(["git", "-C", str(store.root), "merge-base", "--is-ancestor", a, b], capture_output=True)
    return proc.returncode == 0


def follow_rewritten_remote(store, res, before: str | None, drop_purged: bool = False) -> list[dict] | None:
    """When the remote's history was rewritten (a force push after --purge-history elsewhere), or
    with `drop_purged` when this branch holds purged commits the remote does not (a plain `git pull`
    merged them back): move this clone onto the remote, drop every object only the old history
    kept (reflogs expired, gc --prune=now), and return its own records the remote lacks, to write
    again; None otherwise."""
    git = store.git
    try:
        after = git.run("rev-parse", "-q", "--verify", f"refs/remotes/{res.upstream}")
    except MemstoreError:
        return None
    if drop_purged:
        if not purged_in(store, "HEAD"):
            res.notes.append("this branch holds no commit --purge-history removed: nothing to drop")
            return None
        refuse_purged(store, res, f"refs/remotes/{res.upstream}")
    elif not before or before == after or _is_ancestor(store, before, after):
        return None
    remote_ids = _ids_at(store, f"refs/remotes/{res.upstream}")
    gone = set()
    try:
        gone = {
            json.loads(line).get("id")
            for line in git.run("show", f"refs/remotes/{res.upstream}:{TOMBSTONES}").splitlines()
            if line.strip()
        }
    except (MemstoreError, ValueError):
        pass
    gone |= forgotten_ids(store.root)
    local, stale = [], []
    for _day, path in sorted(logfmt.list_days(store.root).items()):
        for raw in path.read_bytes().splitlines():
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict) and rec.get("id") not in remote_ids and rec.get("id") not in gone:
                local.append(rec)
            elif isinstance(rec, dict) and rec.get("id") in gone and isinstance(rec.get("text"), str):
                stale.append(rec)
    git.run("reset", "--hard", "-q", f"refs/remotes/{res.upstream}")
    res.notes.append(f"{res.upstream} was rewritten (history purged on another clone): this clone now follows it")
    _drop_old_objects(store, res, stale)
    return [store.normalize(r) for r in local]


def _drop_old_objects(store, res, stale: list[dict]) -> None:
    """After moving onto the rewritten history: no object, reflog entry or index page of this
    clone keeps the old history's forgotten text."""
    held = expire_old_history(store)
    res.notes.append("expired the reflogs and pruned: no object of the old history is left in this clone")
    if held:
        res.notes.append(
            f"{', '.join(held)} still hold{'s' if len(held) == 1 else ''} commits --purge-history removed (forgotten "
            f'text): delete {"them" if len(held) > 1 else "it"} ("git branch -D" / "git tag -d" / "git stash drop"), '
            'then "git gc --prune=now"'
        )
    if stale:
        res.notes += scrub_this_machine(store, stale)


def _ids_at(store, rev: str) -> set[str]:
    git = store.git
    out: set[str] = set()
    try:
        names = git.run("ls-tree", "-r", "--name-only", rev, "--", "log").splitlines()
    except MemstoreError:
        return out
    for name in names:
        out |= _ids_in(git.blob(rev, name))
    return out


def _ids_in(data: bytes | None) -> set[str]:
    """The record ids of a day log's lines (lines that do not parse are skipped)."""
    out: set[str] = set()
    for line in (data or b"").splitlines():
        try:
            rid = json.loads(line).get("id")
        except (ValueError, AttributeError):
            continue
        if isinstance(rid, str):
            out.add(rid)
    return out


def added_by(store, rev: str) -> set[str]:
    """Ids of the records commit `rev` added to the day logs, over its first parent (a merge: what
    it brought in). What `ct forget --commit` forgets: an import, a chat, a write to undo."""
    git = store.git
    try:
        sha = git.run("rev-parse", "-q", "--verify", f"{rev}^{{commit}}")
    except MemstoreError:
        raise UsageError(f"--commit {rev!r} is not a commit of {store.root}", "See `ct log` for the commits.") from None
    try:
        parent = git.run("rev-parse", "-q", "--verify", f"{sha}^1")
    except MemstoreError:  # the first commit
        parent = None
    changed = git.run(
        "diff-tree",
        "-r",
        "--name-only",
        "-z",
        "--no-commit-id",
        *([parent, sha] if parent else ["--root", sha]),
        "--",
        "log",
    )
    out: set[str] = set()
    for path in filter(None, changed.split("\0")):
        out |= _ids_in(git.blob(sha, path)) - (_ids_in(git.blob(parent, path)) if parent else set())
    if not out:
        raise UsageError(
            f"commit {sha[:10]} added no records (ct log shows what each commit added)", "Nothing was forgotten."
        )
    return out
