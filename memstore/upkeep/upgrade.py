"""`ct upgrade`: turn a format-1 or format-2 store into format 3 in one commit, losing nothing.

What changes (docs/format.md, "Upgrading from format 1 or 2"):

- every day-log record gains a `vkey` (a random key: format/seal.py); from format 1 it also loses
  its `seg` field, and a record whose `source.blob` named format-1 segments gets `{"sha256",
  "bytes"}` of the original instead — nothing else in a line changes;
- every record's vector (type, dim, int8 scale, Unix time, payload) goes bit for bit, sealed under
  its record's key, into one new pack per day (`PackWriter.add_encoded`), so every vector is the
  same and search ranks exactly as before; each ingest-any original goes, with its manifest bytes
  as they were, into the pack of its first record's day; from format 2 the day's old packs go
  (and with them any vector a merge kept of a forgotten record, which format 2 held in the clear);
- from format 1: `tree.json` becomes the tree log (`memstore.format.tree.write`), `.gitattributes`
  is rewritten without the merge driver and `segments/` is removed;
- `memstore.toml` says `format_version = 3`.

Everything is read and checked before anything is written: a damaged line, segment or pack stops
the upgrade with its file named and the store untouched. A store that is already format 3 is left
alone. The files are written in one write transaction (`store.transaction`) and committed together; an upgrade
killed before its commit is undone by the next `ct upgrade` (it started from a clean store, so every
uncommitted change is its own), which then runs again.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from .. import storefile
from ..errors import FormatError, MemstoreError
from ..format import config as configfmt
from ..format import log as logfmt
from ..format import pack as packfmt
from ..format import record as recordfmt
from ..format import safejson
from ..format import seal
from ..format.segment import SegmentError, write_file_atomic
from ..format.stored import seg_blob, seg_vector
from ..repair import UPGRADE_MARKER as MARKER
from ..repair import undo_interrupted_upgrade as undo_interrupted
from ..results import UpgradeResult

TARGET = 3
TREE_JSON = "tree.json"


@dataclass
class DayPlan:
    """One day's new log bytes and the pack that will hold its vectors and originals."""

    day: str
    log: Path
    data: bytes
    writer: packfmt.PackWriter
    records: int = 0
    old_packs: list[Path] = field(default_factory=list)  # format 2: the day's packs, replaced


def upgrade(store, dry_run: bool = False) -> UpgradeResult:
    """Upgrade `store` to format 3 (see the module docstring); a format-3 store is left alone."""
    if undo_interrupted(store):
        store.config = configfmt.read(store.root)
    if store.config.format_version >= TARGET:
        return UpgradeResult(already=True, dry_run=dry_run)
    _refuse_unfinished(store)
    res = UpgradeResult(dry_run=dry_run, source=store.config.format_version)
    if res.source == 2:
        days = sorted(set(logfmt.list_days(store.root)) | set(packfmt.all_pack_days(store.root)))
        res.days = [_plan_day2(store, day) for day in days]
    else:
        res.days = [
            _plan_day(store, day, path) for day, path in logfmt.list_days(store.root).items()
        ]
        res.segment_files = sum(len(files) for _, _, files in os.walk(store.root / "segments"))
        res.tree = (store.root / TREE_JSON).is_file()
    if dry_run:
        return res
    marker = store.meta_dir / MARKER
    # The one write transaction (lock, journal, one commit), allowed on the format-1 store it converts.
    with store.transaction(lambda: _message(res), allow_old_format=True) as tx:
        _refuse_unfinished(store)
        storefile.mkdirs(marker.parent, store.meta_dir.parent)
        storefile.check(marker, store.meta_dir.parent)  # never written through a link
        marker.write_text(str(os.getpid()), encoding="utf-8")
        tx.stage(_apply(store, res))
    marker.unlink()
    res.commit = tx.commit
    return res


def _refuse_unfinished(store) -> None:
    """An upgrade starts from a committed store: uncommitted changes would be folded into its commit."""
    dirty = store.git.run("status", "--porcelain", "--untracked-files=all").splitlines()
    if dirty:
        raise MemstoreError(
            f"{store.root}: has uncommitted changes ({', '.join(line[3:] for line in dirty[:3])}"
            + (", …" if len(dirty) > 3 else "")
            + ").",
            "Commit or remove them first (an interrupted ct write: run ct fsck --repair). Nothing was changed.",
        )


def _plan_day(store, day: str, path: Path) -> DayPlan:
    """Read one day log and its segments; the new log bytes and the day's pack, or FormatError."""
    writer = packfmt.PackWriter(day, int(store.config.embedder["dim"]))
    lines, packed_blobs, n, keys = [], set(), 0, {}
    for ln in logfmt.read_lines(path):
        if ln.record is None:
            raise FormatError(
                path,
                f"line {ln.line_no}: {ln.error}",
                hint="Run ct fsck --repair first; nothing was changed.",
            )
        rec = dict(ln.record)
        seg = rec.pop("seg", None)
        rec["vkey"] = keys.setdefault(
            str(rec["id"]), rec.get("vkey") or seal.record_key(rec["id"], rec.get("text", ""))
        )
        key = seal.key_bytes(rec["vkey"])
        if isinstance(seg, dict):
            try:
                header, payload = seg_vector(store.root, {"seg": seg})
            except (OSError, SegmentError, KeyError, ValueError) as exc:
                raise _unreadable(path, ln.line_no, rec, "its vector segment", exc) from None
            writer.add_encoded(
                str(rec["id"]), key, packfmt.hash16(str(rec.get("hash", ""))), header, payload
            )
        _convert_blob(store, rec, key, writer, packed_blobs, path, ln.line_no)
        lines.append(recordfmt.dumps(rec) + "\n")
        n += 1
    return DayPlan(day, path, "".join(lines).encode("utf-8"), writer, n)


def _plan_day2(store, day: str) -> DayPlan:
    """Format 2: the day log with a key on every line, and one sealed pack of what the day's packs
    hold for its records (a tombstoned record's vector, which a merge may have kept, is not carried)."""
    from ..format import tombstones

    path = logfmt.day_path(store.root, day)
    keys: dict[str, str] = {}
    lines, n = [], 0
    for ln in logfmt.read_lines(path) if path.exists() else []:
        if ln.record is None:
            raise FormatError(
                path,
                f"line {ln.line_no}: {ln.error}",
                hint="Run ct fsck --repair first; nothing was changed.",
            )
        rec = dict(ln.record)
        rec["vkey"] = keys.setdefault(
            str(rec["id"]), rec.get("vkey") or seal.record_key(rec["id"], rec.get("text", ""))
        )  # copies of a line stay alike
        lines.append(recordfmt.dumps(rec) + "\n")
        n += 1
    old = packfmt.pack_files(packfmt.day_dir(store.root, day))
    ring = [(rid, seal.key_bytes(k)) for rid, k in keys.items()]
    gone = tombstones.ids(store.root)
    try:
        writer = packfmt.merged_writer(
            day, int(store.config.embedder["dim"]), old, ring, lambda rid, _h: rid not in gone
        )
    except (OSError, SegmentError) as exc:
        raise FormatError(
            packfmt.day_dir(store.root, day), str(exc), hint="Run ct fsck; nothing was changed."
        ) from None
    return DayPlan(day, path, "".join(lines).encode("utf-8"), writer, n, old_packs=old)


def _unreadable(path: Path, line_no: int, rec: dict, what: str, exc: Exception) -> FormatError:
    """The error for a record whose format-1 segment cannot be read: the upgrade stops, nothing changed."""
    return FormatError(
        path,
        f"line {line_no}: record {rec.get('id')}: {what} cannot be read ({exc})",
        hint="Run ct fsck; nothing was changed.",
    )


def _convert_blob(
    store, rec: dict, key: bytes, writer, packed: set, path: Path, line_no: int
) -> None:
    """A format-1 `source.blob` becomes {"sha256", "bytes"}; the original goes into the day's pack once."""
    src = rec.get("source")
    ref = src.get("blob") if isinstance(src, dict) else None
    if not (isinstance(ref, dict) and "shard" in ref):
        return
    try:
        bheader, body, mbody = seg_blob(store.root, ref)
        sha = safejson.loads(mbody).get("sha256")
    except (OSError, SegmentError, KeyError, ValueError, AttributeError) as exc:
        raise _unreadable(path, line_no, rec, "its original (source.blob)", exc) from None
    actual = hashlib.sha256(body).hexdigest()
    where = (ref["shard"], ref["blob"])
    if where not in packed:  # chunks of one PDF share one original
        packed.add(where)
        writer.add_blob(str(rec["id"]), key, body, bheader.data_type, mbody, bheader.unix_time)
    rec["source"] = {**src, "blob": {"sha256": sha or actual, "bytes": len(body)}}


def _message(res: UpgradeResult) -> str:
    packs = sum(1 for d in res.days if d.writer)
    if res.source == 2:
        return (
            f"Upgrade store to format 3: {res.records} records keyed, {res.vectors} vectors and {res.blobs} "
            f"originals sealed in {packs} day packs (bit for bit)"
        )
    return (
        f"Upgrade store to format 3: {res.records} records, {res.vectors} vectors and {res.blobs} originals "
        f"sealed in {packs} day packs (bit for bit); segments/ removed"
        + ("; tree.json became the tree log" if res.tree else "")
    )


def _apply(store, res: UpgradeResult) -> list[str]:
    """Write packs, logs, config, attributes and tree; remove segments/; the paths to commit."""
    from ..format import tree as treefmt

    root = store.root
    tree = treefmt.read(root) if res.tree else None  # read while the store still says format 1
    staged = []
    for d in res.days:
        if d.writer:
            staged.append(store.rel(d.writer.write(root)))
        for p in d.old_packs:
            p.unlink()
            staged.append(store.rel(p))
        if d.data or d.log.exists():
            tmp = d.log.with_name(f".{d.log.name}.upgrade-{os.getpid()}")
            write_file_atomic(tmp, d.data, fsync=True)
            os.replace(tmp, d.log)
            staged.append(store.rel(d.log))
    store.config.format_version = TARGET
    store.config.write(root)
    staged.append(configfmt.FILENAME)
    if res.source == 2:
        return sorted(set(staged))
    from ..format.layout import (
        GITATTRIBUTES,
    )  # a new store's: union merges for the logs, no merge driver

    (root / ".gitattributes").write_text(GITATTRIBUTES, encoding="utf-8")
    staged += [configfmt.FILENAME, ".gitattributes"]
    if tree is not None:
        written = treefmt.write(root, tree)
        written = [written] if isinstance(written, (str, Path)) else list(written or [])
        rels = [p if isinstance(p, str) else store.rel(p) for p in written]
        if TREE_JSON not in rels:  # format 2's tree lives in its log; tree.json is history now
            (root / TREE_JSON).unlink()
            rels.append(TREE_JSON)
        staged += rels
    if (root / "segments").exists():
        shutil.rmtree(root / "segments")
        staged.append("segments")
    return sorted(set(staged))
