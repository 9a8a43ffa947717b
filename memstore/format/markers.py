"""markers.jsonl: "where are we now" markers, one JSON object per line, appended and never edited.

A marker line is `{"id", "ts", "text", "status": "open"}`; closing it appends
`{"id", "ts", "text", "status": "done", "done": <marker id>}`. The file merges by union in git, so
two clones that mark on the same day both keep their lines: ids are time-ordered random ids that
never collide, and readers sort by (ts, id) rather than trusting line order after a merge.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import FormatError
from . import log as logfmt
from . import safejson
from .record import new_id
from .timeutil import from_iso, to_iso

FILENAME = "markers.jsonl"
STATUSES = ("open", "done")
MAX_TEXT = 2000


@dataclass(frozen=True)
class MarkerLine:
    """One line of markers.jsonl."""

    id: str
    ts: str
    text: str
    status: str
    done: str | None = None

    def to_json(self) -> dict:
        out = {"id": self.id, "ts": self.ts, "text": self.text, "status": self.status}
        if self.done is not None:
            out["done"] = self.done
        return out


@dataclass
class Marker:
    """A marker as readers see it: its opening line and, once closed, when it was closed."""

    id: str
    ts: str
    text: str
    closed_at: str | None = None
    closed_by: str | None = None

    @property
    def status(self) -> str:
        return "done" if self.closed_at else "open"

    def to_json(self) -> dict:
        out = {"id": self.id, "ts": self.ts, "text": self.text, "status": self.status}
        if self.closed_at:
            out["closed_at"] = self.closed_at
            out["closed_by"] = self.closed_by
        return out


def path(root: Path) -> Path:
    return Path(root) / FILENAME


def _parse(raw: str, where: Path, line_no: int) -> MarkerLine:
    try:
        obj = safejson.loads(raw)
    except ValueError as exc:  # not JSON, nested too deep, a giant number, NaN
        raise FormatError(where, str(exc), line_no, _HINT) from None
    if not isinstance(obj, dict):
        raise FormatError(where, "a marker line must be a JSON object", line_no, _HINT)
    for key in ("id", "ts", "text", "status"):
        if not isinstance(obj.get(key), str) or (key != "text" and not obj[key]):
            raise FormatError(
                where, f"marker field {key!r} is missing or not a string", line_no, _HINT
            )
    if obj["status"] not in STATUSES:
        raise FormatError(
            where, f"marker status must be open or done, not {obj['status']!r}", line_no, _HINT
        )
    done = obj.get("done")
    if obj["status"] == "done" and not isinstance(done, str):
        raise FormatError(
            where, "a done line must name the closed marker in 'done'", line_no, _HINT
        )
    try:
        from_iso(obj["ts"])
    except ValueError as exc:
        raise FormatError(where, f"bad ts: {exc}", line_no, _HINT) from None
    return MarkerLine(
        obj["id"], obj["ts"], obj["text"], obj["status"], done if obj["status"] == "done" else None
    )


_HINT = f"Fix or remove that line (git keeps the committed {FILENAME}: git checkout -- {FILENAME})."


def read_lines(root: Path) -> list[MarkerLine]:
    """Every line of markers.jsonl in (ts, id) order; FormatError naming the file and line if one is bad."""
    p = path(root)
    try:
        data = logfmt.read_plain(p)
    except FileNotFoundError:
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FormatError(p, f"invalid UTF-8 at byte {exc.start}", None, _HINT) from None
    from .tombstones import ids as forgotten

    gone = forgotten(root)  # a forgotten marker's line that a git merge brought back stays hidden
    out = []
    for no, raw in enumerate(text.split("\n"), start=1):
        if raw.strip():
            line = _parse(raw, p, no)
            if line.id not in gone:
                out.append(line)
    out.sort(key=lambda m: (m.ts, m.id))
    return out


def problems(root: Path) -> list[str]:
    """`markers.jsonl:LINE: why` for every damaged line (fsck names them all; reads stop at the first)."""
    p = path(root)
    try:
        data = logfmt.read_plain(p)
    except FileNotFoundError:
        return []
    out = []
    for no, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            _parse(raw.decode("utf-8"), p, no)
        except UnicodeDecodeError as exc:
            out.append(f"{FILENAME}:{no}: invalid UTF-8 at byte {exc.start}")
        except FormatError as exc:
            out.append(f"{FILENAME}:{no}: {exc.problem}")
    return out


def forgotten_lines(root: Path) -> list[dict]:
    """The lines of markers.jsonl that a tombstone names (a forgotten marker a git merge brought back)."""
    from .tombstones import ids as forgotten
    from .tombstones import lines_named

    gone = forgotten(root)
    try:
        return lines_named(logfmt.read_plain(path(root)), gone) if gone else []
    except FileNotFoundError:
        return []


def fold(lines: list[MarkerLine]) -> list[Marker]:
    """Markers in the order they were opened, each closed by the earliest done line naming it."""
    markers: dict[str, Marker] = {}
    for ln in lines:
        if ln.status == "open" and ln.id not in markers:
            markers[ln.id] = Marker(ln.id, ln.ts, ln.text)
    for ln in lines:
        if ln.status == "done" and ln.done in markers and markers[ln.done].closed_at is None:
            markers[ln.done].closed_at, markers[ln.done].closed_by = ln.ts, ln.id
    return sorted(markers.values(), key=lambda m: (m.ts, m.id))


def read(root: Path) -> list[Marker]:
    return fold(read_lines(root))


def opening(text: str, when) -> MarkerLine:
    """A new open marker; ValueError for empty or oversized text."""
    text = text.strip()
    if not text:
        raise ValueError("a marker needs some text")
    if len(text) > MAX_TEXT:
        raise ValueError(
            f"a marker is a short note (at most {MAX_TEXT} characters, got {len(text)})"
        )
    return MarkerLine(new_id(), to_iso(when), text, "open")


def closing(marker: Marker, when) -> MarkerLine:
    return MarkerLine(new_id(), to_iso(when), marker.text, "done", marker.id)


def append(root: Path, line: MarkerLine) -> None:
    """Append one complete line in one write (after a newline if the last write was cut short)."""
    payload = (json.dumps(line.to_json(), ensure_ascii=False, separators=(",", ":")) + "\n").encode(
        "utf-8"
    )
    logfmt.append_lines(path(root), payload)
