"""fsck: verify every invariant of docs/format.md and report each damaged file.

Format 2: every pack's bytes must hash to its name and parse (manifest, segments, day, dim); every
record must have a vector in a pack of its day made from its text (hash16); pack entries that no
record claims are orphans (a warning: harmless, and the next consolidation keeps them). Format 1:
every record's text/vector segment pair must exist, link both ways and match the log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..format import layout
from ..format import log as logfmt
from ..format import record as recordfmt
from ..errors import FormatError, MemstoreError
from ..format.sealed_lines import TamperedLine, open_bytes
from ..format import safejson, tombstones
from ..format.segment import (
    DT_AUDIO,
    DT_BLOB,
    DT_IMAGE,
    DT_JSON,
    DT_TEXT,
    SegmentError,
    VECTOR_TYPES,
    read_segment,
    segment_ids,
    segment_name,
)
from ..results import Report
from .. import storefile
from ..storefile import StoreLink
from .fsck_links import check_links

# A forget must hold on every clone: whatever a plain git merge brought back of a forgotten record is
# damage (exit 1), with the ways to remove it again.
REMOVE_AGAIN = (
    '"ct fsck --repair" (or "ct forget {rid}") removes it again in one commit; "ct sync" does so after every '
    'merge, and so does the post-merge hook of "ct hooks install"'
)


def fsck(store) -> Report:
    from ..repair import interrupted_upgrade as interrupted

    rep = Report()
    killed = interrupted(store)
    if killed:  # half old format, half new: every other check would only mislead
        rep.damage.append(killed)
        return rep
    dim = int(store.config.embedder["dim"])
    referenced: set[Path] = set()
    ids: dict[
        str, tuple[str, Path, int, int]
    ] = {}  # id -> where its first copy is (for duplicates)
    check_links(store, rep)  # links and special files: named here, skipped by every read below
    _check_index(store, rep)
    absent = _check_committed(store, rep)  # {day: ids of committed records the work tree lacks}
    packed = _check_packs(store, rep, dim)
    claimed: dict[str, set[str]] = {day: set(got) for day, got in absent.items()}
    gone = tombstones.ids(store.root)
    for day, path in logfmt.list_days(store.root).items():
        try:
            lines = list(logfmt.read_lines(path))
        except StoreLink:
            continue  # named by check_links
        except OSError as exc:
            rep.damage.append(f"{path}: cannot read ({exc})")
            continue
        except TamperedLine as exc:  # an encrypted store's line that fails authentication
            rep.damage.append(str(exc).splitlines()[0])
            continue
        for ln in lines:
            where = f"{store.rel(path)}:{ln.line_no}"
            if ln.record is None:
                rep.damage.append(f"{where}: {ln.error}")
                continue
            rec = ln.record
            claimed.setdefault(day, set()).add(str(rec["id"]))
            if rec["id"] in gone:  # a forget not honoured here: the text is in the files again
                rep.damage.append(
                    f"{where}: {tombstones.BACK.format(rid=rec['id'])}; reads never show it, but the text is in the "
                    f"files again. {REMOVE_AGAIN.format(rid=rec['id'])}"
                )
                continue
            rep.records += 1
            _check_record(store, rec, where, day, dim, rep, referenced, packed.get(day))
            first = ids.setdefault(rec["id"], (where, path, ln.offset, ln.length))
            if first[0] != where:
                rep.warnings.append(_duplicate(where, rec, first))
    _explain_unvectored(store, rep)
    rep.others_private = store.sealer.others_private() if store.sealer else 0
    _check_orphans(store, rep, referenced)
    _check_pack_orphans(store, rep, packed, claimed, gone)
    _check_forgotten_markers(store, rep)
    _check_line_files(store, rep)
    _check_disposable_untracked(store, rep)
    _check_tree(store, rep, set(ids) | gone | {rid for got in absent.values() for rid in got})
    from ..repair import crashed_journal

    journal = crashed_journal(store)
    if journal is not None:
        rep.warnings.append(
            f".memstore/write-journal.json: a write (pid {journal.get('pid')}) did not finish; "
            '"ct fsck --repair" rolls back what it left'
        )
    if store.sealer is not None:
        from .fsck_sealed import key_doubts, recipients_history

        rep.damage += key_doubts(store)
        rep.notes += recipients_history(store)
    return rep


def _check_index(store, rep) -> None:
    """The index is a cache, but a damaged one broke every search: name it and what rebuilds it."""
    from ..index.build import check

    damage = check(store)
    if damage:
        rep.damage.append(
            f'.memstore/{damage}: the index is a cache of the files; "ct fsck --repair" or "ct index -B" '
            "rebuilds it (the next read does too)"
        )


STORE_FILES = (
    "log/",
    "packs/",
    "segments/",
    "tree/",
)  # and the top-level files git keeps for the store


def _check_committed(store, rep) -> dict[str, set[str]]:
    """HEAD's blobs of the store's files must be readable and hash to their ids (a corrupt git
    object is named by path), and every committed record must still be in the work tree's day
    log (a deleted or truncated log is damage that `ct fsck --repair` restores from HEAD)."""
    from ..errors import GitError

    try:
        git = store.git
        listing = git.run(
            "ls-tree", "-r", "-z", "--full-tree", "HEAD", strip_newline_in_stdout=False
        )
        sparse = git.sparse
    except GitError as exc:
        if "Not a valid object name HEAD" not in str(exc) and "not a tree object" not in str(exc):
            rep.damage.append(
                f"HEAD: git cannot read the committed tree ({str(exc).splitlines()[0]})"
            )
        return {}
    except MemstoreError:  # no git here (a copy without .git): nothing committed to compare with
        return {}
    paths: dict[str, list[str]] = {}
    for item in listing.split("\0"):
        meta, _, path = item.partition("\t")
        parts = meta.split()
        if (
            len(parts) == 3
            and parts[1] == "blob"
            and (path.startswith(STORE_FILES) or "/" not in path)
        ):
            paths.setdefault(parts[2], []).append(path)
    absent: dict[str, set[str]] = {}
    for oid, data, why in git.read_blobs(list(paths)):
        for path in paths[oid]:
            if why is not None:
                rep.damage.append(
                    f'{path}: its committed git object {oid[:12]} is damaged: {why}; "git fsck" says more, '
                    "and another clone of the store holds an intact copy"
                )
            elif path.startswith("log/") and path.endswith(".jsonl") and not sparse:
                _compare_day_log(store, path, data, rep, absent)
    return absent


def _compare_day_log(store, path: str, committed: bytes, rep, absent: dict[str, set[str]]) -> None:
    """Damage for each committed record of a day log that is not in the work tree's copy."""
    local = store.root / path
    try:
        data = storefile.read_bytes(local, store.root)
    except FileNotFoundError:
        data = None
    except OSError:
        return  # named as unreadable by the day-log check
    if data is not None and data.startswith(committed):
        return  # the usual case: as committed, or with lines appended
    ids = {str(rec.get("id")) for rec in _records_of(_opened(local, committed))}
    if data is not None:
        ids -= {str(rec.get("id")) for rec in _records_of(_opened(local, data))}
    if not ids:
        return  # every committed record is still there (an edit of one is named by the record checks)
    day = Path(path).stem
    absent.setdefault(day, set()).update(ids)
    what = (
        "is missing from the work tree (deleted?)"
        if data is None
        else f"lacks {len(ids)} of its committed records (truncated, or lines deleted?)"
    )
    rep.damage.append(
        f'{path}: the committed day log {what}; "ct fsck --repair" restores its committed records from HEAD'
    )


def _opened(path, data: bytes) -> bytes:
    """An encrypted store's lines opened (a line that fails is named by the day-log check)."""
    try:
        return open_bytes(path, data)
    except FormatError:
        return b""


def _records_of(data: bytes) -> list[dict]:
    out = []
    for line in data.split(b"\n"):
        try:
            rec = recordfmt.loads(line)
        except recordfmt.RecordError:
            continue
        out.append(rec)
    return out


def _duplicate(where: str, rec: dict, first: tuple[str, Path, int, int]) -> str:
    """The warning for a second line with a record's id; an identical copy is what git leaves when it
    merges one appended line twice (a cherry-pick, or a rebase, and then a merge of the original)."""
    there, path, offset, length = first
    try:
        same = logfmt.read_text_at(path, offset, length) == rec
    except (OSError, ValueError):
        same = False
    if same:
        return (
            f"{where}: an identical copy of the record at {there} (id {rec['id']}): git merged the same "
            'line twice, e.g. after a cherry-pick or a rebase; it counts once, and "ct gc" drops it'
        )
    return f"{where}: id {rec['id']} also at {there} (the earlier copy is used)"


def _earlier_timezones(store, rep) -> list[tuple[str, str, str]]:
    """(timezone, the commit that changed it away, its author) for each timezone memstore.toml
    named before the present one, newest first: one `git log` of the file, read once per fsck
    (kept on its Report)."""
    cached = getattr(rep, "_earlier_timezones", None)
    if cached is not None:
        return cached
    import tomllib

    from ..errors import GitError

    out: list[tuple[str, str, str]] = []
    try:
        log = store.git.run("log", "--format=%H %an", "--", "memstore.toml").splitlines()
    except GitError:
        log = []
    now, later = store.config.timezone, None
    for line in log:
        commit, _, author = line.partition(" ")
        try:
            text = store.git.run("show", f"{commit}:memstore.toml")
            tz = str(tomllib.loads(text).get("timezone") or "")
        except (GitError, ValueError, RecursionError):
            continue
        if later is not None and tz and tz != later[2] and tz != now:
            out.append((tz, later[0], later[1]))
        later = (commit, author, tz)
    rep._earlier_timezones = out
    return out


def _filed_in_earlier_timezone(store, rep, rec, day) -> str | None:
    """The end of fsck's message when a record is on its file's day in a timezone memstore.toml
    named before (a changed timezone, e.g. arriving by `git pull`, not a moved file), else None."""
    from ..format.timeutil import from_iso, local_day

    for tz, commit, author in _earlier_timezones(store, rep):
        try:
            from zoneinfo import ZoneInfo

            if local_day(from_iso(rec["ts"]), ZoneInfo(tz)) == day:
                return (
                    f"{store.config.timezone}, but it is in {tz}, which memstore.toml named until "
                    f"commit {commit[:10]} ({author}) changed it: records are filed by day in the "
                    f'timezone they were written under, so put timezone = "{tz}" back in '
                    "memstore.toml and commit (nothing was moved)"
                )
        except (ValueError, KeyError):
            continue
    return None


def _check_record(store, rec, where, day, dim, rep, referenced, day_packs=None) -> None:
    if rec.get("role") not in recordfmt.ROLES:
        rep.damage.append(f"{where}: role {rec.get('role')!r} is not one of {recordfmt.ROLES}")
    if rec.get("type") not in recordfmt.TYPES:
        rep.damage.append(f"{where}: type {rec.get('type')!r} is not one of {recordfmt.TYPES}")
    from ..format.timeutil import from_iso, local_day

    own = local_day(from_iso(rec["ts"]), store.tz)
    if own != day:
        changed = _filed_in_earlier_timezone(store, rep, rec, day)
        if changed is not None:
            rep.damage.append(f"{where}: ts {rec['ts']} is not on day {day} in {changed}")
            return
        rep.damage.append(
            f"{where}: ts {rec['ts']} is not on day {day} in {store.config.timezone} (a day log moved or renamed? "
            f"its records belong in {layout.day_log(own)}, and its vectors are in {layout.pack_dir(own)}/: "
            '"git mv" it back)'
        )
        return  # its vector is looked for under its own day, not this file's: no second, misleading message
    if rec.get("hash") and rec["hash"] != recordfmt.text_hash(rec["text"]):
        rep.damage.append(f"{where}: text does not match its hash")
    src = rec.get("source")
    if "seg" not in rec:  # format 2: the vector (and any blob) is in a pack of the record's day
        _check_packed(store, rec, where, day, rep, day_packs)
        return
    if isinstance(src, dict) and "blob" in src:  # ingest-any: the original file, kept whole
        _check_blob(store, rec, src["blob"], where, rep, referenced)
    seg = rec.get("seg")
    if not isinstance(seg, dict):
        rep.warnings.append(f"{where}: record has no segment reference (not vector-searchable)")
        return
    try:  # a reference that climbs out of the store (e.g. "../../etc") is damage, never a file to open
        shard = layout.safe_path(store.root, str(seg.get("shard", "")))
        tpath, vpath = (
            shard / segment_name(int(seg.get("text", -1))),
            shard / segment_name(int(seg.get("vec", -1))),
        )
    except (ValueError, TypeError) as exc:
        rep.damage.append(f"{where}: bad segment reference ({exc})")
        return
    referenced.update((tpath, vpath))
    try:
        th, tbody = read_segment(tpath)
    except (OSError, SegmentError) as exc:
        rep.damage.append(
            f"{store.rel(tpath) if tpath.exists() else tpath}: {exc} (text of {where})"
        )
        return
    try:
        vh, vbody = read_segment(vpath)
    except (OSError, SegmentError) as exc:
        rep.damage.append(f"{vpath}: {exc} (vector of {where})")
        return
    if th.data_type != DT_TEXT or th.next_id != seg["vec"]:
        rep.damage.append(f"{tpath}: text segment does not link to vector {seg['vec']}")
    if vh.data_type not in VECTOR_TYPES or vh.prev_id != seg["text"]:
        rep.damage.append(f"{vpath}: vector segment does not link back to text {seg['text']}")
    if vh.dim != dim:
        rep.damage.append(f"{vpath}: vector has {vh.dim} dimensions, the store uses {dim}")
    if tbody != rec["text"].encode("utf-8"):
        rep.damage.append(f"{tpath}: text differs from the log record at {where}")


def _check_tree(store, rep, known: set[str]) -> None:
    """Every tree op line must parse (named file:line), and a format-1 tree.json as a topic tree.

    A topic that names a record no day log holds is a warning: git took the record's line out
    (a revert or a rebase of its write) and kept the tree's op line, which merges by union.
    """
    from ..errors import FormatError
    from ..format import tree as treefmt
    from ..format import treelog

    if treelog.exists(store.root):
        ops, damage = treelog.read_ops(store.root)
        rep.damage += [
            d.replace(f"{store.root}{os.sep}", "", 1) for d in damage
        ]  # paths as the store names them
        tree = treelog.replay(ops)
        for topic in sorted(tree.topics.values(), key=lambda t: t.id):
            for rid in [r for r in topic.records if r not in known]:
                rep.warnings.append(
                    f"{treefmt.DIR}/: topic {topic.id} ({topic.name}) names record {rid}, which no day log holds "
                    f'(git removed its line, e.g. in a revert or a rebase, and kept the tree\'s); "ct forget {rid}" '
                    "takes it out of the tree and remakes the topic's name and summary"
                )
        return
    if not treefmt.path_of(store.root).exists():
        return
    try:
        treefmt.read(store.root)
    except FormatError as exc:
        rep.damage.append(str(exc).splitlines()[0])


def _check_orphans(store, rep, referenced) -> None:
    seg_root = store.root / "segments"
    if not seg_root.exists():
        return
    for dirpath, dirnames, filenames in os.walk(seg_root):
        folder = Path(dirpath)
        for sid in segment_ids(folder):
            rep.segments += 1
            p = folder / segment_name(sid)
            if p not in referenced:
                try:
                    h, _ = read_segment(p)
                except (OSError, SegmentError) as exc:
                    rep.damage.append(f"{p}: {exc}")
                    continue
                if h.data_type in (DT_TEXT, *VECTOR_TYPES, *BLOB_TYPES, DT_JSON):
                    rep.warnings.append(
                        f"{store.rel(p)}: segment not referenced by any record (orphan)"
                    )
        for name in filenames:
            if name.startswith(".") and ".tmp-" in name:
                rep.warnings.append(
                    f"{store.rel(folder / name)}: temp file left by an interrupted write"
                )


BLOB_TYPES = (DT_IMAGE, DT_AUDIO, DT_BLOB)


def _check_blob(store, rec, ref, where, rep, referenced) -> None:
    """A record's `source.blob`: blob and manifest segments exist, link both ways, and the bytes hash right."""
    import hashlib

    try:
        shard = layout.safe_path(store.root, str(ref.get("shard", "")))
        bid, mid = int(ref["blob"]), int(ref["manifest"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        rep.damage.append(f"{where}: bad blob reference ({exc})")
        return
    bpath, mpath = shard / segment_name(bid), shard / segment_name(mid)
    if bpath in referenced and mpath in referenced:
        return  # another record (an earlier chunk of the same PDF) had it checked
    referenced.update((bpath, mpath))
    try:
        bh, body = read_segment(bpath)
        mh, mbody = read_segment(mpath)
    except (OSError, SegmentError) as exc:
        rep.damage.append(f"{shard}: {exc} (blob of {where})")
        return
    if bh.data_type not in BLOB_TYPES or bh.next_id != mid:
        rep.damage.append(f"{store.rel(bpath)}: blob segment does not link to its manifest {mid}")
    if mh.data_type != DT_JSON or mh.prev_id != bid:
        rep.damage.append(f"{store.rel(mpath)}: manifest does not link back to blob {bid}")
    try:
        manifest = safejson.loads(mbody)
    except ValueError:
        manifest = None
    if not isinstance(manifest, dict):
        rep.damage.append(f"{store.rel(mpath)}: manifest is not a JSON object")
        return
    digest = hashlib.sha256(body).hexdigest()
    if manifest.get("sha256") != digest or rec["source"].get("file_sha256") not in (None, digest):
        rep.damage.append(
            f"{store.rel(bpath)}: blob bytes do not match the sha256 in its manifest and record ({where})"
        )


# ----- format 2: packs ----------------------------------------------------------------------------


@dataclass
class DayPacks:
    """What one day's packs hold: {record id: {hash16: pack path}} and the blobs by record id."""

    vectors: dict[str, dict[str, str]] = field(default_factory=dict)
    blobs: list[tuple[str, str, bytes, dict]] = field(
        default_factory=list
    )  # (record id, pack, bytes, manifest)


def _check_packs(store, rep, dim: int) -> dict[str, DayPacks]:
    """Verify every file under packs/: name = sha256 of the bytes, parseable, in its day's folder."""
    from ..format import pack as packfmt

    out: dict[str, DayPacks] = {}
    rings: dict = {}
    top = store.root / layout.PACKS
    for dirpath, _dirs, files in os.walk(top):
        folder = Path(dirpath)
        for name in sorted(files):
            path = folder / name
            if os.path.islink(path):
                continue  # named by check_links
            rel = store.rel(path)
            if name.startswith(".") and ".tmp-" in name:
                rep.warnings.append(f"{rel}: temp file left by an interrupted write")
                continue
            parts = Path(rel).parts
            if (
                not packfmt._NAME.match(name)
                or len(parts) != 4
                or not parts[2].startswith(parts[1])
            ):
                rep.warnings.append(
                    f"{rel}: not a pack (packs are packs/YYYY/YYYY-MM-DD/<sha256>.is)"
                )
                continue
            rep.packs += 1
            try:
                data = storefile.read_bytes(path, store.root)
                if packfmt.pack_name(data) != name:
                    rep.damage.append(
                        f"{rel}: bytes do not hash to the file name (the pack is damaged)"
                    )
                pk = packfmt.parse(data, rel)  # still read, so the damage can be named more closely
            except (OSError, ValueError) as exc:
                rep.damage.append(f"{rel}: {str(exc).replace(rel + ': ', '')}")
                continue
            day = parts[2]
            if pk.manifest.get("day") != day:
                rep.damage.append(
                    f"{rel}: manifest says day {pk.manifest.get('day')!r}, the pack is in {day}"
                )
            if pk.manifest.get("dim") != dim:
                rep.damage.append(
                    f"{rel}: manifest says {pk.manifest.get('dim')} dimensions, the store uses {dim} (made with "
                    'another embedder, e.g. merged from a clone that re-embedded; "ct reembed" makes every vector '
                    'again with the store\'s, and "ct sync" does it for what a merge brings)'
                )
            got = out.setdefault(day, DayPacks())
            keys = _day_keys(store, day, rings, pk.sealed)
            odd = 0
            for it in pk.items(keys):
                if it.header.dim != dim:
                    odd += 1
                    if (
                        odd <= 3
                    ):  # the manifest line above says what to run; three examples are enough
                        rep.damage.append(
                            f"{rel}: vector of {it.record_id} has {it.header.dim} dimensions, the store uses {dim}"
                        )
                elif not _finite(it.header, it.payload):
                    rep.damage.append(
                        f'{rel}: vector of {it.record_id} holds NaN or Infinity (searches leave it out); "ct reembed" '
                        "makes every vector again"
                    )
                got.vectors.setdefault(it.record_id, {}).setdefault(it.h16, rel)
            for rid, _key, _bh, body, mbody in pk.blobs(keys):
                try:
                    manifest = safejson.loads(mbody)
                except ValueError:
                    manifest = None
                records = (manifest.get("records") or []) if isinstance(manifest, dict) else None
                if not isinstance(records, list) or not all(type(r) is str for r in records):
                    rep.damage.append(
                        f"{rel}: blob manifest of {rid} is not a JSON object listing record ids"
                    )
                    continue
                got.blobs.append((str(rid), rel, body, manifest))
    return out


def _day_keys(store, day: str, cache: dict, sealed: bool = True) -> list:
    """What opens the day's packs: the (record id, key) pairs of its log's lines; for a format-2
    pack, (record id, None) for every line. Read once per day."""
    from ..format import pack as packfmt

    if day not in cache:
        path = store.root / layout.day_log(day)
        try:
            lines = [ln.record for ln in logfmt.read_lines(path) if ln.record]
        except (FileNotFoundError, StoreLink):  # a link is named by check_links
            lines = []
        cache[day] = (packfmt.ring(lines), [(str(r.get("id")), None) for r in lines])
    return cache[day][0 if sealed else 1]


def _finite(header, payload: bytes) -> bool:
    import numpy as np

    from ..format.segment import decode_vector

    try:
        return bool(np.isfinite(decode_vector(header, payload)).all())
    except SegmentError:
        return True  # a payload of the wrong size is named by the pack's own checks


EXPLAINED_DAYS = 20  # days whose missing vectors are looked up in git; fsck stays bounded past that


def _explain_unvectored(store, rep) -> None:
    """A record with no vector in its day's packs is damage; say what git did with the vector.

    The usual cause is plain git undoing a write that is not its day's last: `git revert` of it,
    or a rebase that drops it. The write's pack is a whole file and goes, but the day log merges
    by union, so the record's line stays wherever later lines follow it. Each message names the
    commit and the command that finishes the job (or undoes it).
    """
    by_day: dict[str, list[tuple[str, str]]] = {}
    for where, day, rid in rep.unvectored:
        by_day.setdefault(day, []).append((where, rid))
    for n, (day, items) in enumerate(sorted(by_day.items())):
        why = _vector_history(store, day, {rid for _, rid in items}) if n < EXPLAINED_DAYS else {}
        for where, rid in items:
            said = f"{where}: record {rid} has no vector in {layout.pack_dir(day)}/"
            rep.damage.append(f"{said}: {why[rid]}" if rid in why else said)


def _vector_history(store, day: str, ids: set[str]) -> dict[str, str]:
    """{record id: where its vector went and what to run}, read from git for one day's packs."""
    import re

    from ..errors import MemstoreError
    from ..format import pack as packfmt

    folder, out, rings = layout.pack_dir(day), {}, {}

    def held(data: bytes | None, path: str) -> set[str]:
        try:
            pk = packfmt.parse(data, path)
            keys = [k for k in _day_keys(store, day, rings, pk.sealed) if k[0] in ids]
            return {it.record_id for it in pk.items(keys)} & (ids - set(out))
        except (SegmentError, TypeError):
            return set()

    try:
        git = store.git
        on_disk = {store.rel(p) for p in packfmt.pack_files(packfmt.day_dir(store.root, day))}
        in_head = git.run("ls-tree", "-r", "-z", "--name-only", "HEAD", "--", folder).split("\0")
        for path in [p for p in in_head if p and p not in on_disk]:
            for rid in held(git.blob("HEAD", path), path):
                out[rid] = (
                    f'{path}, which holds it, was deleted and the deletion is not committed: "git checkout -- {path}" brings it back'
                )
        for c in git.deletions(folder):
            short, subject = c["sha"][:10], c["subject"]
            reverted = re.search(r"This reverts commit [0-9a-f]{7,40}", c["body"])
            for path in c["paths"]:
                for rid in held(git.blob(f"{c['sha']}^", path), path):
                    out[rid] = (
                        f"commit {short} ({subject}) reverted the write that made it and deleted its pack, but "
                        "the day log merges by union, so the record's line stayed (later lines follow it): the "
                        f'revert is half done. "ct forget {rid}" finishes it; to keep the record instead, "git '
                        f'checkout {short}^ -- {path}" and a commit bring its vector back'
                        if reverted
                        else f'commit {short} ({subject}) deleted {path}, which held it: "git checkout {short}^ '
                        f'-- {path}" and a commit bring it back; "ct forget {rid}" drops the record'
                    )
            if not ids - set(out):
                break
        shallow = git.run("rev-parse", "--is-shallow-repository") == "true"
    except (MemstoreError, OSError):  # no git, or no history to ask: the plain message stands
        return out
    history = "this shallow clone's history" if shallow else "this branch's history"
    for rid in ids - set(out):
        out[rid] = (
            f"no commit in {history} held its vector: the write that made it is not in it (dropped by a "
            "rebase or a reset?) while the day log, which merges by union, kept the record's line. "
            f'"ct forget {rid}" drops the record'
        )
    return out


def _check_packed(store, rec, where, day, rep, day_packs: "DayPacks | None") -> None:
    """A format-2 record: a vector in a pack of its day made from this text; its blob, if any, intact."""
    from ..format import pack as packfmt

    rid = str(rec["id"])
    entries = (day_packs.vectors if day_packs else {}).get(rid)
    if not entries:
        rep.unvectored.append(
            (where, day, rid)
        )  # why, and what to run, is read from git afterwards
    elif packfmt.hash16(str(rec.get("hash") or "")) not in entries:
        rep.damage.append(
            f"{sorted(entries.values())[0]}: vector of record {rid} was made from other text "
            f"than the record at {where} (hash16 differs)"
        )
    src = rec.get("source")
    if isinstance(src, dict) and isinstance(src.get("blob"), dict):
        _check_packed_blob(rec, src["blob"], where, day, rep, day_packs)


def _check_packed_blob(
    rec, ref: dict, where: str, day: str, rep, day_packs: "DayPacks | None"
) -> None:
    import hashlib

    found = find_day_blob(day_packs.blobs if day_packs else [], str(rec["id"]), ref.get("sha256"))
    if found is None:
        rep.damage.append(
            f"{where}: its original file (sha256 {str(ref.get('sha256'))[:12]}…) is in no pack of {day}"
        )
        return
    pack_rel, body, _manifest = found
    if hashlib.sha256(body).hexdigest() != ref.get("sha256") or len(body) != ref.get(
        "bytes", len(body)
    ):
        rep.damage.append(
            f"{pack_rel}: blob bytes of {rec['id']} do not match the sha256 and size in {where}"
        )


def find_day_blob(blobs: list[tuple[str, str, bytes, dict]], record_id: str, sha256: str | None):
    """(pack, bytes, manifest) of a record's original: its own entry, else the blob that lists it or has its hash."""
    for rid, rel, body, manifest in blobs:
        if rid == record_id:
            return rel, body, manifest
    for rid, rel, body, manifest in blobs:
        if record_id in (manifest.get("records") or []) or (
            sha256 and manifest.get("sha256") == sha256
        ):
            return rel, body, manifest
    return None


def _check_git_lock(store, rep) -> None:
    """git's .git/index.lock left by a git process that died: every write fails on it until it goes."""
    import time

    from ..gitrepo import git_dir

    gdir = git_dir(store.root)
    lock = gdir / "index.lock" if gdir is not None else None
    try:
        age = time.time() - lock.stat().st_mtime if lock is not None else None
    except OSError:
        return
    if age is not None and age > 60:
        rep.warnings.append(
            f"{lock}: a git lock file {int(age // 60)} minutes old, left by a git process that died; every write "
            f'fails on it. If no git command is running here, remove it ("rm {lock}")'
        )


def _check_disposable_untracked(store, rep) -> None:
    """.memstore/ is this clone's own (index, caches): a commit that holds files there hands every
    clone that merges it someone else's, written over its own by git."""
    try:
        held = store.git.run("ls-files", "--", ".memstore").split()
    except Exception:
        return
    rep.damage += [
        f"{path}: committed, in memstore's disposable folder (never committed: git writes it over "
        'each clone\'s own). "git rm -r --cached .memstore", then commit'
        for path in held
    ]


def _check_line_files(store, rep) -> None:
    """A folder named like a day log, every damaged line of markers.jsonl, forgotten.jsonl and
    purged-history.jsonl, and any .gitattributes line that makes git change the store's bytes."""
    from ..format import markers as markfmt
    from ..format.attributes import problems as attribute_problems
    from ..forget.purge import purge_problems

    for path in logfmt.list_days(store.root).values():
        if path.is_dir() and not path.is_symlink():  # a link is named by check_links
            rep.damage.append(
                f"{store.rel(path)}: is a folder where a day log belongs; reads skip it "
                '("git rm -r" it)'
            )
    for damaged in (markfmt.problems, tombstones.problems):
        try:
            rep.damage += damaged(store.root)
        except OSError:  # a link or special file: named by check_links
            pass
    rep.damage += purge_problems(store)
    rep.damage += attribute_problems(store.root)


def _check_forgotten_markers(store, rep) -> None:
    from ..format import markers as markfmt
    from ..forget.leftovers import stale_quotes
    from ..forget.purge import old_history_back

    back = old_history_back(store)
    if back:
        rep.warnings.append(back)
    _check_git_lock(store, rep)
    try:
        sparse = store.git.sparse
    except MemstoreError:  # no git here (a copy without .git): nothing to say about a checkout
        sparse = False
    if sparse:
        rep.warnings.insert(
            0,
            "this clone is a sparse checkout (core.sparseCheckout): files outside it are not here, so a record, "
            "vector or topic entry named missing below may be in them; ct refuses to write until "
            '"git sparse-checkout disable"',
        )

    if tombstones.ids(store.root):
        store.index()
        for topic in stale_quotes(store):
            rep.damage.append(
                f'{topic["note"]}; "ct forget {topic["id"]}" or "ct fsck --repair" names it again from the records '
                "it holds"
            )

    for line in markfmt.forgotten_lines(store.root):
        rep.damage.append(
            f"{markfmt.FILENAME}: marker {line['id']} was forgotten (forgotten.jsonl), but a git merge brought its "
            f"line back; reads never show it. {REMOVE_AGAIN.format(rid=line['id'])}"
        )


def _check_pack_orphans(
    store, rep, packed: dict[str, DayPacks], claimed: dict[str, set[str]], gone: set[str]
) -> None:
    for day, got in sorted(packed.items()):
        mine = claimed.get(day, set())
        by_pack: dict[str, list[str]] = {}
        for rid, entries in got.vectors.items():
            if rid in gone and rid not in mine:
                for rel in entries.values():
                    rep.damage.append(
                        f"{rel}: holds the vector of forgotten record {rid} (forgotten.jsonl): a git merge kept "
                        f"another clone's copy of the day's pack. {REMOVE_AGAIN.format(rid=rid)}"
                    )
            elif rid not in mine:
                for rel in entries.values():
                    by_pack.setdefault(rel, []).append(rid)
        for rid, rel, _body, manifest in got.blobs:
            if rid not in mine and not mine & set(manifest.get("records") or []):
                by_pack.setdefault(rel, []).append(f"blob of {rid}")
        for rel, rids in sorted(by_pack.items()):
            rep.warnings.append(
                f"{rel}: {len(rids)} vectors or blobs for no record of {day} (orphan: {', '.join(sorted(rids)[:3])}"
                + (", …)" if len(rids) > 3 else ")")
            )
