"""Forgetting records: their text out of every committed file in one commit, a tombstone left (id
and hash, never the text) so no merge brings them back, and this machine's own copies scrubbed.

Where a record's text lives, and what forgetting does there:

    log/YYYY/YYYY-MM-DD.jsonl   the day file is rewritten without the record's line
    packs/YYYY/YYYY-MM-DD/      untouched: the vector (and original) is sealed under the key the line
                                held, so it is unreadable once the line is gone; an older store is
                                refused like every write ("run ct upgrade")
    topic tree                  its id leaves every topic; names and summaries are rebuilt from what
                                remains (memstore/tree/forget.py)
    markers.jsonl               a marker whose text holds the forgotten text is removed
    forgotten.jsonl             gains {"id", "hash", "at"} per record (merges by union)
    commit subjects, history    only `purge_history` (memstore/forget/purge.py) rewrites them
"""

from __future__ import annotations

import json

from .. import storefile
from ..format import attributes
from ..format import log as logfmt
from ..format import safejson
from ..format import tombstones as tombfmt
from ..format.timeutil import from_iso, local_day, now_utc, to_iso
from ..index import queries
from ..results import ForgetResult

TOMBSTONES = tombfmt.FILENAME
ATTRIBUTE = tombfmt.ATTRIBUTE
REPLACEMENT = "[forgotten]"


# ----- tombstones ---------------------------------------------------------------------------------

tombstones = tombfmt.read
forgotten_ids = tombfmt.ids


# ----- forgetting ---------------------------------------------------------------------------------


def forget(store, records: list[dict], message: str | None = None) -> ForgetResult:
    """Remove the records from every committed file and append their tombstones: one commit (their
    history is rewritten by `purge.purge`, which the caller runs after it)."""
    res = ForgetResult(records=list(records))
    if not records:
        res.notes.append("nothing to forget")
        return res
    n = len(records)
    vectors = _document_vectors(store, records)
    with store.transaction(message or f"Forget {n} record{'s' if n != 1 else ''}") as tx:
        res.paths, markers = _remove_everywhere(store, records)
        full = [
            r for r in records if r["text"] is not None
        ] + markers  # a tree-only id has no text to tombstone
        res.paths += _append_tombstones(store, full) if full else []
        tx.stage(res.paths)
    res.commit = tx.commit
    res.notes += scrub_this_machine(store, records + markers, vectors)
    return res


def _remove_everywhere(store, records: list[dict]) -> tuple[list[str], list[dict]]:
    """(paths changed, marker lines removed): the marker lines get tombstones of their own."""
    ids = {r["id"] for r in records}
    # the rest are named only by the tree, a pack or markers.jsonl (what a git merge brought back)
    with_text = [r for r in records if r["text"] is not None]
    texts = [r["text"] for r in with_text] + [q for r in records for q in r.get("quotes", ())]
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
    from ..secrets.policy import clean_key

    texts = [r["text"] for r in records if isinstance(r.get("text"), str) and r["text"]]
    notes = []
    index = store.index(update=False)
    # Only the days the forget rewrote: their rows go (a day read again drops its old rows and
    # their vectors); scrub then merges FTS5, VACUUMs and empties the WAL. A rebuild of every day
    # cost a 100k store 20 s per forget.
    index.update(days=queries.days_of_ids(index, [r["id"] for r in records if r.get("id")]))
    index.update()  # and any other day whose files changed (stat calls only when none did)
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
    from ..repair import BACKUP_DIR

    top = store.meta_dir / BACKUP_DIR
    if not top.is_dir():
        return
    needles = [json.dumps({"id": rid}, separators=(",", ":"))[1:-1].encode() for rid in ids]
    needles += [v for t in texts for v in text_variants(t)]
    for path in sorted(p for p in top.rglob("*") if p.is_file() and not p.is_symlink()):
        try:  # never through a link a copied .memstore/ holds (memstore/storefile.py)
            data = storefile.read_bytes(path, store.meta_dir.parent)
        except OSError:
            continue
        if not any(n in data for n in needles):
            continue
        kept = [ln for ln in data.splitlines(keepends=True) if not any(n in ln for n in needles)]
        if kept:
            path.write_bytes(b"".join(kept))
        else:
            path.unlink()
    for folder in sorted(
        (p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True
    ):
        try:
            folder.rmdir()
        except OSError:
            pass


def _scrub_embedding_cache(store, records: list[dict], texts: list[str], vectors) -> list[str]:
    """The user's embedding cache without the records' vectors: by the keyed hash of each text and
    of each sentence a user turn's vector was averaged over, by the tombstones' hashes (an older
    memstore's keys), and by vector for document chunks."""
    from ..adapters.cache import default_path, forget_in_cache
    from ..core import EMBED_CHARS
    from ..turn_embedding import sentences

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
        data = logfmt.read_plain(path)
    except FileNotFoundError:
        return []
    kept, dropped = [], 0
    for raw in data.splitlines(keepends=True):
        try:
            rid = safejson.loads(raw).get("id")
        except (ValueError, AttributeError):
            rid = None
        if type(rid) is str and rid in ids:
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
    """The tree's op lines rewritten so none names the records or quotes their text (memstore/tree/forget.py);
    a topic the forget left with no record and no sub-topic leaves the tree (a `gone` op), as one
    whose records were superseded does, instead of staying as an "Untitled topic" of 0 turns."""
    from ..format import tree as treefmt

    before = treefmt.read(store.root)
    held = {tid for tid, t in before.topics.items() if ids & set(t.records)}
    from ..tree.forget import forget_ops

    paths = list(forget_ops(store.root, set(ids), list(texts)))
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
    from ..format import markers as markfmt

    path = markfmt.path(store.root)
    if not path.exists():
        return [], []
    flat = [" ".join(t.split()) for t in texts]
    lines = logfmt.read_plain(path).splitlines(keepends=True)
    kept, removed = [], []
    for raw in lines:
        try:
            obj = safejson.loads(raw)
            text = " ".join(str(obj.get("text") or "").split())
        except (ValueError, AttributeError):
            kept.append(raw)
            continue
        if (type(obj.get("id")) is str and obj["id"] in ids) or (
            text and any(text == f or (len(f) >= 12 and f in text) for f in flat)
        ):
            removed.append({"id": obj.get("id"), "text": obj.get("text") or ""})
            continue
        kept.append(raw)
    if not removed:
        return [], []
    logfmt.rewrite(path, b"".join(kept))
    return [store.rel(path)], [m for m in removed if isinstance(m["id"], str)]


def _append_tombstones(store, records: list[dict]) -> list[str]:
    from ..format.record import text_hash

    have = tombstones(store.root)
    at = to_iso(now_utc())
    lines = [
        json.dumps(
            {"id": r["id"], "hash": r.get("hash") or text_hash(r["text"]), "at": at},
            separators=(",", ":"),
        )
        + "\n"
        for r in records
        if r["id"] not in have
    ]
    path = store.root / TOMBSTONES
    storefile.check(store.root / ".gitattributes", store.root)  # refused before any change
    if lines:
        logfmt.append_lines(path, "".join(lines).encode("utf-8"), fsync=False)
    attributes.ensure(store.root, ATTRIBUTE)
    return [TOMBSTONES, ".gitattributes"]


def text_variants(text: str) -> list[bytes]:
    """The byte strings a text is committed as: raw (segments), JSON-escaped (logs, tree), and its
    lines and its summary opener (topic summaries quote the start of a text)."""
    out = {text, json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1]}
    flat = " ".join(text.split())
    if len(flat) >= 24:  # commit subjects quote 60 characters, summaries 109
        for cut in (60, 109):
            out |= {flat[:cut], json.dumps(flat[:cut], ensure_ascii=False)[1:-1]}
    out |= {line for line in text.splitlines() if len(line.strip()) >= 16}
    return sorted({v.encode("utf-8", "surrogatepass") for v in out if v}, key=len, reverse=True)


def record_vkey(rec: dict) -> str:
    """The record's key as its line holds it (made from its id and text: format/seal.py)."""
    from ..format import seal

    return rec.get("vkey") or seal.record_key(rec["id"], rec["text"])
