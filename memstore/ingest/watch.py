"""`ct watch`: follow growing transcript files and import their new complete lines in debounced batches.

lossless-memory ran a daemon that re-indexed every ten minutes; here the files are the truth and a
batch is a commit. Every `interval` seconds the watched paths are scanned (size and mtime of each
*.jsonl file). Files that changed since they were last imported form the pending batch, which is
imported once all of them have been quiet for `debounce` seconds, or at the latest `max_delay`
seconds after the first change was seen, so a file that never stops growing is still followed.
A batch is one `import_source` call (one commit). Its per-file cursors only ever move past
complete lines, so a line caught half-written is read again, whole, in a later batch.

Stopping: the first SIGINT/SIGTERM lets the batch in progress finish and commit, then returns; a
second one abandons it (what it left uncommitted is rolled back by the next write, see repair.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import FormatError, MemstoreError, SecretsFound, UsageError

KINDS = ("claude-code", "jsonl", "chatgpt")
DETECT_BYTES = 1 << 16  # how much of a file's start format detection reads
# Errors that repeat until the input changes: do not retry them on every tick.
INPUT_ERRORS = (FormatError, SecretsFound, UsageError)


@dataclass
class Batch:
    """What one batch did: files read, records added, the commit (or None), errors met."""

    at: float
    files: list[str]
    added: int = 0
    skipped: int = 0
    commits: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "at": self.at,
            "files": self.files,
            "added": self.added,
            "skipped": self.skipped,
            "commits": self.commits,
            "notes": self.notes,
            "errors": self.errors,
        }

    def describe(self) -> str:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.at))
        parts = [f"[{stamp}] {len(self.files)} file{'s' if len(self.files) != 1 else ''}"]
        if self.commits:
            parts.append(
                f"added {self.added} records; commit {', '.join(c[:10] for c in self.commits)}"
            )
        elif not self.errors:
            unread = sum(1 for n in self.notes if n.startswith("skipped "))
            parts.append(
                f"nothing new; {unread} line{'s' if unread != 1 else ''} could not be read (above)"
                if unread
                else "nothing new"
                if not self.skipped
                else f"{self.skipped} already present"
            )
        return ": ".join(parts) + "".join(f"\n  error: {e}" for e in self.errors)


def detect_kind(path: Path) -> str | None:
    """What a file holds, from its first complete lines: "claude-code" rows, plain "jsonl" records
    ({ts, role, text}) or a "chatgpt" export (conversations.json); None while no complete line says.

    FormatError when the lines are JSON but neither shape, so the file is reported, not ignored.
    """
    from .importers import parse_json

    with open(path, "rb") as f:
        head = f.read(DETECT_BYTES)
    stripped = head.lstrip()
    if stripped.startswith(b"[") and b'"mapping"' in head:
        return "chatgpt"
    lines = head.split(b"\n")
    if not head.endswith(b"\n"):
        lines = lines[:-1]  # the last line may still be being written
    broken = None  # the first complete line that is no JSON object
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        row, why = parse_json(raw)
        if why is not None:
            broken = broken or (number, "not valid JSON")
            continue  # a broken line says nothing; the reader reports it by line
        if not isinstance(row, dict):
            broken = broken or (number, "not a JSON object")
            continue
        if row.get("type") in ("user", "assistant", "summary", "system") and (
            "message" in row or "sessionId" in row or "uuid" in row or "summary" in row
        ):
            return "claude-code"
        if "text" in row and "role" in row:
            return "jsonl"
        if "type" in row or "sessionId" in row or "uuid" in row:
            return "claude-code"  # another Claude Code row kind (file-history-snapshot, ...)
        raise FormatError(
            path,
            "line is neither a Claude Code transcript row nor a {ts, role, text} record; pass --kind",
            line=number,
        )
    if (
        broken is not None and len(head) < DETECT_BYTES
    ):  # every complete line is broken: say so, not "nothing new"
        raise FormatError(
            path, f"{broken[1]}, and no line says what the file holds; pass --kind", line=broken[0]
        )
    return None


def watched_files(paths: list[Path]) -> list[Path]:
    """Each path itself when a file, else every *.jsonl below it (symlinked folders not followed)."""
    out: list[Path] = []
    for p in paths:
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            for folder, dirs, files in os.walk(p):
                dirs.sort()
                out.extend(Path(folder, n) for n in sorted(files) if n.endswith(".jsonl"))
    return out


class Watcher:
    """The pending-batch state machine; `tick(now)` decides and imports, `run()` loops until stopped."""

    def __init__(
        self,
        store,
        paths,
        kind: str | None = None,
        interval: float = 5.0,
        debounce: float = 2.0,
        max_delay: float = 60.0,
        allow_secrets: bool = False,
        secrets: str | None = None,
    ):
        if kind is not None and kind not in KINDS:
            raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if interval <= 0 or debounce < 0 or max_delay < debounce:
            raise UsageError("need --interval > 0, --debounce >= 0 and --max-delay >= --debounce")
        self.store, self.kind = store, kind
        self.paths = [Path(p).expanduser().resolve() for p in paths]
        for p in self.paths:
            if not p.exists():
                raise UsageError(f"{p}: no such file or folder to watch")
        self.interval, self.debounce, self.max_delay = interval, debounce, max_delay
        self.secrets = secrets or ("allow" if allow_secrets else "refuse")
        self.imported: dict[str, tuple[int, int]] = {}  # file -> (size, mtime_ns) when last read
        self.pending_since: float | None = None
        self.stop_requested = False
        self._signals = 0

    # ----- one tick ---------------------------------------------------------------------------

    def scan(self) -> dict[str, tuple[int, int, float]]:
        """file -> (size, mtime_ns, mtime) for every watched file that exists now."""
        out = {}
        for f in watched_files(self.paths):
            if f.is_relative_to(self.store.root):
                continue  # the store's own day logs: importing them would chase our own writes
            try:
                s = f.stat()
            except OSError:
                continue  # removed between listing and stat
            out[str(f)] = (s.st_size, s.st_mtime_ns, s.st_mtime)
        return out

    def changed(self, snap: dict) -> list[str]:
        return [f for f, (size, ns, _) in snap.items() if self.imported.get(f) != (size, ns)]

    def tick(self, now: float | None = None) -> Batch | None:
        """Import the pending batch if it is due; None when nothing changed or it is not due yet."""
        now = time.time() if now is None else now
        snap = self.scan()
        todo = self.changed(snap)
        if not todo:
            self.pending_since = None
            return None
        if self.pending_since is None:
            self.pending_since = now
        quiet = now - max(snap[f][2] for f in todo) >= self.debounce
        overdue = now - self.pending_since >= self.max_delay
        if not (quiet or overdue):
            return None
        return self.import_files(todo, snap, now)

    def import_files(self, files: list[str], snap: dict, now: float | None = None) -> Batch:
        """Import `files` in one commit; a batch that fails on one file's input is split per file."""
        batch = Batch(time.time() if now is None else now, list(files))
        if not files:
            return batch
        try:
            self._one(files, batch)
            done = list(files)
        except INPUT_ERRORS as exc:
            if len(files) == 1:
                batch.errors.append(str(exc))
                done = list(files)  # retried once the file changes again
            else:
                done = []
                for f in files:  # keep the good files flowing: one commit each this time
                    try:
                        self._one([f], batch)
                        done.append(f)
                    except INPUT_ERRORS as exc1:
                        batch.errors.append(str(exc1))
                        done.append(f)
                    except MemstoreError as exc1:
                        batch.errors.append(str(exc1))
        except MemstoreError as exc:  # a held lock, a git failure: try again next tick
            batch.errors.append(str(exc))
            done = []
        for f in done:
            # The size seen *before* reading: whatever was appended meanwhile makes the next batch.
            self.imported[f] = snap[f][:2]
        if done:
            self.pending_since = None
        return batch

    def _one(self, files: list[str], batch: Batch) -> None:
        """Import the files, one commit per format (the given --kind, else each file's detected one)."""
        from .run import import_source

        by_kind: dict[str, list[str]] = {}
        for f in files:
            kind = self.kind or detect_kind(Path(f))
            if kind is None:
                continue  # no complete line yet: nothing to read, nothing to report
            by_kind.setdefault(kind, []).append(f)
        for kind, group in sorted(by_kind.items()):
            res = import_source(self.store, kind, group, secrets=self.secrets, follow=True)
            batch.added += len(res.added)
            batch.skipped += res.skipped
            batch.notes += res.notes
            if res.commit:
                batch.commits.append(res.commit)

    # ----- the loop ---------------------------------------------------------------------------

    def once(self) -> Batch:
        """Import every complete line now, debounce aside (for cron)."""
        snap = self.scan()
        return self.import_files(sorted(snap), snap)

    def run(
        self,
        report: Callable[[Batch], None] | None = None,
        handle_signals: bool = True,
        deadline: float | None = None,
    ) -> int:
        """Tick every `interval` seconds until a stop signal (or `deadline`, a time.time()); returns batches run."""
        restore = self._install_signals() if handle_signals else {}
        batches = 0
        try:
            while not self.stop_requested:
                batch = self.tick()
                if batch is not None:
                    batches += 1
                    if report:
                        report(batch)
                if deadline is not None and time.time() >= deadline:
                    break
                self._sleep(self.interval)
        finally:
            for sig, old in restore.items():
                signal.signal(sig, old)
        return batches

    def stop(self) -> None:
        self.stop_requested = True

    def _sleep(self, seconds: float) -> None:
        # Short naps so a stop request (a plain flag set by the signal handler) is seen at once.
        end = time.monotonic() + seconds
        while not self.stop_requested:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.1))

    def _install_signals(self) -> dict:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum, _frame):
            self._signals += 1
            self.stop_requested = True
            if self._signals > 1:
                raise KeyboardInterrupt  # a second signal: abandon the batch in progress

        return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def watch(
    store,
    paths,
    kind: str | None = None,
    interval: float = 5.0,
    debounce: float = 2.0,
    max_delay: float = 60.0,
    once: bool = False,
    allow_secrets: bool = False,
    report: Callable[[Batch], None] | None = None,
    secrets: str | None = None,
) -> int:
    """Follow `paths` (see the module docstring); with `once`, import what is there and return. Returns batches run."""
    w = Watcher(store, paths, kind, interval, debounce, max_delay, allow_secrets, secrets)
    if once:
        batch = w.once()
        if report:
            report(batch)
        return 1
    return w.run(report)
