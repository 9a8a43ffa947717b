"""`ct upgrade`: turn a format-1 store into format 2 in one commit, losing nothing.

What changes (docs/format.md, "Upgrading from format 1"):

- every day-log record loses its `seg` field — nothing else in it changes — and a record whose
  `source.blob` named format-1 segments gets `{"sha256", "bytes"}` of the original instead;
- every record's vector segment is copied byte for byte (type, dim, int8 scale, Unix time,
  payload) into one pack per day (`PackWriter.add_encoded`), so every vector is bit-identical and
  search ranks exactly as before; each ingest-any original goes, with its manifest bytes as they
  were, into the pack of its first record's day;
- `tree.json` becomes the tree log (`memstore.format.tree.write` once the store says format 2);
- `.gitattributes` is rewritten without the merge driver, `segments/` is removed and
  `memstore.toml` says `format_version = 2`.

Everything is read and checked before anything is written: a damaged line or segment stops the
upgrade with its file named and the store untouched. A store that is already format 2 is left
alone. The files are written in one write transaction (`store.transaction`) and committed together; an upgrade
killed before its commit is undone by the next `ct upgrade` (it started from a clean store, so every
uncommitted change is its own), which then runs again.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, MemstoreError
from ..format import config as configfmt
from ..format import log as logfmt
from ..format import pack as packfmt
from ..format import record as recordfmt
from ..format.segment import Header, SegmentError, write_file_atomic
from ..format.stored import seg_blob, seg_vector

TARGET = 2
MARKER = "upgrade-in-progress"  # in .memstore/: an upgrade that dies before its commit is undone by the next
TREE_JSON = "tree.json"


@dataclass
class DayPlan:
    """One day's new log bytes and the pack that will hold its vectors and originals."""

    day: str
    log: Path
    data: bytes
    writer: packfmt.PackWriter
    records: int = 0


@dataclass
class UpgradeResult:
    """What `ct upgrade` did or would do."""

    already: bool = False
    dry_run: bool = False
    days: list[DayPlan] = field(default_factory=list)
    segment_files: int = 0
    tree: bool = False
    commit: str | None = None

    @property
    def records(self) -> int:
        return sum(d.records for d in self.days)

    @property
    def vectors(self) -> int:
        return sum(len(d.writer.records) for d in self.days)

    @property
    def blobs(self) -> int:
        return sum(len(d.writer.blobs) for d in self.days)

    def to_json(self) -> dict:
        return {
            "already": self.already,
            "dry_run": self.dry_run,
            "days": len(self.days),
            "records": self.records,
            "vectors": self.vectors,
            "blobs": self.blobs,
            "packs": sum(1 for d in self.days if d.writer),
            "segment_files_removed": self.segment_files,
            "tree": self.tree,
            "commit": self.commit,
        }

    def lines(self) -> list[str]:
        if self.already:
            return [f"already format {TARGET}: nothing to do"]
        verb = "would" if self.dry_run else "did"
        out = [
            f"{verb} rewrite {len(self.days)} day logs: {self.records} records lose their seg field",
            f"{verb} pack {self.vectors} vectors (bit for bit) and {self.blobs} originals into "
            f"{sum(1 for d in self.days if d.writer)} day packs",
            f"{verb} remove segments/ ({self.segment_files} files)",
        ]
        if self.tree:
            out.append(f"{verb} turn tree.json into the tree log (tree/)")
        out.append(f"{verb} rewrite .gitattributes (no merge driver) and set format_version = {TARGET}")
        if self.commit:
            out.append(f"commit {self.commit[:10]}")
        return out


def upgrade(store, dry_run: bool = False) -> UpgradeResult:
    """Upgrade `store` to format 2 (see the module docstring); a format-2 store is left alone."""
    if undo_interrupted(store):
        store.config = configfmt.read(store.root)
    if store.config.format_version >= TARGET:
        return UpgradeResult(already=True, dry_run=dry_run)
    _refuse_unfinished(store)
    res = UpgradeResult(dry_run=dry_run)
    res.days = [_plan_day(store, day, path) for day, path in logfmt.list_days(store.root).items()]
    res.segment_files = sum(len(files) for _, _, files in os.walk(store.root / "segments"))
    res.tree = (store.root / TREE_JSON).is_file()
    if dry_run:
        return res
    marker = store.meta_dir / MARKER
    # The one write transaction (lock, journal, one commit), allowed on the format-1 store it converts.
    with store.transaction(lambda: _message(res), allow_old_format=True) as tx:
        _refuse_unfinished(store)
        marker.parent.mkdir(exist_ok=True)
        marker.write_text(str(os.getpid()), encoding="utf-8")
        tx.stage(_apply(store, res))
    marker.unlink()
    res.commit = tx.commit
    return res


def interrupted(store) -> str | None:
    """What to tell a person when an upgrade died before its commit (its marker is there and HEAD is
    still format 1), else None: every other command's rollback would only undo part of it."""
    from ..errors import GitError

    marker = store.meta_dir / MARKER
    try:
        if not marker.exists() or store.git.run("show", f"HEAD:{configfmt.FILENAME}").find("format_version = 1") < 0:
            return None
        pid = marker.read_text(encoding="utf-8").strip()
    except (GitError, OSError):
        return None
    return (
        f".memstore/{MARKER}: an upgrade to format {TARGET} (pid {pid}) was killed before its commit; "
        'run "ct upgrade": it puts the committed format-1 store back and upgrades it again'
    )


def undo_interrupted(store) -> bool:
    """An upgrade that died before its commit started from a clean format-1 store: put that store back."""
    if interrupted(store) is None:
        return False
    store.git.run("checkout", "HEAD", "--", ".")
    store.git.run("clean", "-fdq", "--", "packs", "tree", "log")
    (store.meta_dir / MARKER).unlink()
    return True


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
    lines, packed_blobs, n = [], set(), 0
    for ln in logfmt.read_lines(path):
        if ln.record is None:
            raise FormatError(
                path, f"line {ln.line_no}: {ln.error}", hint="Run ct fsck --repair first; nothing was changed."
            )
        rec = dict(ln.record)
        seg = rec.pop("seg", None)
        if isinstance(seg, dict):
            try:
                header, payload = seg_vector(store.root, {"seg": seg})
            except (OSError, SegmentError, KeyError, ValueError) as exc:
                raise _unreadable(path, ln.line_no, rec, "its vector segment", exc) from None
            writer.add_encoded(str(rec["id"]), packfmt.hash16(str(rec.get("hash", ""))), header, payload)
        _convert_blob(store, rec, writer, packed_blobs, path, ln.line_no)
        lines.append(recordfmt.dumps(rec) + "\n")
        n += 1
    return DayPlan(day, path, "".join(lines).encode("utf-8"), writer, n)


def _unreadable(path: Path, line_no: int, rec: dict, what: str, exc: Exception) -> FormatError:
    """The error for a record whose format-1 segment cannot be read: the upgrade stops, nothing changed."""
    return FormatError(
        path,
        f"line {line_no}: record {rec.get('id')}: {what} cannot be read ({exc})",
        hint="Run ct fsck; nothing was changed.",
    )


def _convert_blob(store, rec: dict, writer, packed: set, path: Path, line_no: int) -> None:
    """A format-1 `source.blob` becomes {"sha256", "bytes"}; the original goes into the day's pack once."""
    src = rec.get("source")
    ref = src.get("blob") if isinstance(src, dict) else None
    if not (isinstance(ref, dict) and "shard" in ref):
        return
    try:
        bheader, body, mbody = seg_blob(store.root, ref)
        sha = json.loads(mbody.decode("utf-8")).get("sha256")
    except (OSError, SegmentError, KeyError, ValueError) as exc:
        raise _unreadable(path, line_no, rec, "its original (source.blob)", exc) from None
    actual = hashlib.sha256(body).hexdigest()
    key = (ref["shard"], ref["blob"])
    if key not in packed:  # chunks of one PDF share one original
        packed.add(key)
        writer.blobs.append(
            (
                str(rec["id"]),
                Header(-1, -1, bheader.data_len, bheader.data_type, 0, bheader.scale, bheader.unix_time),
                body,
                mbody,
            )
        )
    rec["source"] = {**src, "blob": {"sha256": sha or actual, "bytes": len(body)}}


def _message(res: UpgradeResult) -> str:
    return (
        f"Upgrade store to format 2: {res.records} records, {res.vectors} vectors and {res.blobs} originals "
        f"in {sum(1 for d in res.days if d.writer)} day packs (bit for bit); segments/ removed"
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
        tmp = d.log.with_name(f".{d.log.name}.upgrade-{os.getpid()}")
        write_file_atomic(tmp, d.data, fsync=True)
        os.replace(tmp, d.log)
        staged.append(store.rel(d.log))
    store.config.format_version = TARGET
    store.config.write(root)
    from ..store import GITATTRIBUTES  # a new store's: union merges for the logs, no merge driver

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
