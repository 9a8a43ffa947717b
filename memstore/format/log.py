"""Day logs: `log/YYYY/YYYY-MM-DD.jsonl`, one record per line, appended and never rewritten."""

from __future__ import annotations

import os
import re
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from .. import storefile
from . import layout
from . import record as recordfmt
from . import sealed_lines

SEALED = (sealed_lines.PREFIX, sealed_lines.PRIVATE_PREFIX)  # how a sealed line starts

_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.jsonl$")


def day_path(root: Path, day: str) -> Path:
    return Path(root) / layout.day_log(day)


def segment_day_dir(root: Path, day: str) -> Path:
    return Path(root) / layout.segment_dir(day)


def list_days(root: Path) -> dict[str, Path]:
    """Every day that has a log file: {"YYYY-MM-DD": path}."""
    out: dict[str, Path] = {}
    base = Path(root) / "log"
    try:
        years = sorted(os.listdir(base))
    except FileNotFoundError:
        return out
    for year in years:
        ydir = base / year
        if not ydir.is_dir():
            continue
        for name in sorted(os.listdir(ydir)):
            m = _DAY.match(name)
            if m and m.group(1) == year:
                out[name[:10]] = ydir / name
    return out


@dataclass
class LogLine:
    line_no: int  # 1-based
    offset: int  # byte offset of the line's first byte
    length: int  # bytes, without the newline
    record: dict | None
    error: str | None


def read_lines(path: Path, data: bytes | None = None):
    """Every line of a day log with its byte position; damaged lines carry `error`, not a record.

    A last line without its newline is reported as an error (a write that did not finish).
    """
    data = sealed_lines.plain_view(path) if data is None else sealed_lines.open_bytes(path, data)
    pos, line_no, size = 0, 0, len(data)
    while pos < size:
        end = data.find(b"\n", pos)
        complete = end != -1
        if not complete:
            end = size
        line_no += 1
        raw = data[pos:end]
        rec, err = None, None
        if not raw.strip():
            err = "empty line"
        else:
            try:
                rec = recordfmt.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                err = f"invalid UTF-8 ({exc.reason} at byte {exc.start})"
            except recordfmt.RecordError as exc:
                err = str(exc)
            if rec is not None and not complete:
                rec, err = None, "last line has no newline (an unfinished write)"
        yield LogLine(line_no, pos, end - pos, rec, err)
        pos = end + 1


def read_text_at(path: Path, offset: int, length: int) -> dict:
    """One record read from its known byte position (late dereference for search hits); in an
    encrypted store the position is in the file's plain view (format/sealed_lines.py)."""
    sealer = sealed_lines.sealer_for(path)
    if sealer is not None:
        raw = sealed_lines.plain_view(path, sealer)[offset : offset + length]
        return recordfmt.loads(raw.decode("utf-8"))
    with storefile.open_file(path) as f:
        f.seek(offset)
        return recordfmt.loads(f.read(length).decode("utf-8"))


# Called with each path before `append_lines` first opens it, while a write transaction runs in this
# thread (memstore/transaction.py): the journal then holds the size the file had before the writer
# appended, so a rollback cuts exactly the writer's bytes and nothing a person wrote.
BEFORE_APPEND: ContextVar = ContextVar("memstore_before_append", default=None)
# Called with each path before `rewrite` replaces or removes it whole (forgetting is the one
# writer that does): the transaction keeps the old bytes, so a failed write puts them back.
BEFORE_REWRITE: ContextVar = ContextVar("memstore_before_rewrite", default=None)


def read_plain(path: Path) -> bytes:
    """A committed line file's bytes as plain lines (opened when the store is encrypted)."""
    return sealed_lines.plain_view(path)


def rewrite(path: Path, data: bytes | None) -> None:
    """Replace a file whole by `data` (plain lines; sealed here in an encrypted store) — a temp file
    renamed over it — or remove it when None."""
    storefile.check(path)  # a link (or a linked folder) is refused before anything changes
    sealer = sealed_lines.sealer_for(path)
    if sealer is not None:
        if data is not None:
            sealer.refuse_partial(path)
            data = sealer.seal_payload(path, data)
        else:  # reads the file: the other writers' private lines it holds are kept
            sealer.open_data(path, storefile.read_bytes(path) if path.exists() else b"")
        data = sealer.with_foreign(path, data)  # other writers' private lines are never lost
    before = BEFORE_REWRITE.get()
    if before is not None:
        before(path)
    if data is None:
        path.unlink(missing_ok=True)
        return
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def append(path: Path, records: list[dict], fsync: bool = True) -> None:
    """Append complete lines in one write, so a killed process leaves whole lines or nothing new."""
    storefile.mkdirs(path.parent)
    append_lines(path, "".join(recordfmt.dumps(r) + "\n" for r in records).encode("utf-8"), fsync)


def append_lines(path: Path, payload: bytes, fsync: bool = True) -> None:
    """Append `payload` (whole lines) in one write to an append-only JSONL file.

    A file whose last write was cut short gets a newline first, so the damaged line stays on its
    own and the new lines stay parseable.
    """
    storefile.check(path)  # a link (or a linked folder) is refused before anything is noted
    sealer = sealed_lines.sealer_for(path)
    payload = payload if sealer is None else sealer.seal_payload(path, payload)
    before = BEFORE_APPEND.get()
    if before is not None:
        before(path)
    fd = storefile.open_fd(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        size = os.fstat(fd).st_size
        if sealer is None and size and os.pread(fd, 5, 0).startswith(SEALED):
            raise sealed_lines.plain_into_sealed(path)
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
