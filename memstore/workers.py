"""A second core for pure, CPU-bound work of one big write: half of a list computed in a forked child.

A big import names thousands of topics, each from its own texts (term counts, phrases, the secrets
scrub): independent pieces of pure Python that one core runs one after the other. `split_map`
forks a child that computes every other item while the parent computes the rest, and sends its
results back over a pipe. The parent's answer never depends on the child: a child that fails, is
killed, or sends back something unreadable only costs time (the parent computes its part too).

The child must touch nothing it shares with the parent but memory it reads: no SQLite connection
(a connection carried across fork() is undefined behaviour), no open git process, no file it
writes. It leaves with os._exit, so no finaliser of the parent's objects runs in it. A process with
other threads is never forked (a lock one of them held would stay locked in the child), nor one
held to a single core; MEMSTORE_WORKERS=1 turns the second process off.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import threading
from collections import deque

WORKERS_ENV = "MEMSTORE_WORKERS"
_CHILD: list[bool] = []  # [True] in a child of split_map


class ParentOnly(BaseException):
    """Raised in a forked child by work that only the parent may do (SQL, git, writing files);
    a BaseException, so no `except Exception` on the way turns it into a wrong answer."""


def parent_only() -> None:
    """Call before anything a forked child must not do: raises ParentOnly in one."""
    if _CHILD:
        raise ParentOnly()


def forked() -> None:
    """Said first in a child just forked: what it inherited is left out of Python's cyclic
    collector. A collection walks every object the collector tracks and writes to each one's
    header: over a big write's heap (its records, the tree) that is a second or more of the child's
    time, and a copy of every page it touches; the child only reads what it inherited (a cycle
    there is the parent's to free), and what it makes is still collected."""
    gc.freeze()


def in_child() -> bool:
    """Whether this process is a child split_map forked."""
    return bool(_CHILD)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def second_core() -> bool:
    """Whether a second process may share a write's work: at least two cores, and the user did not
    turn it off."""
    return os.environ.get(WORKERS_ENV, "").strip() not in {"0", "1"} and cores() >= 2


def can_fork() -> bool:
    """Whether a forked child may take half of the work: `second_core`, fork exists, and this
    process has one thread."""
    return second_core() and hasattr(os, "fork") and threading.active_count() == 1


def split_map(
    fn, items: list, *, min_items: int = 2, extra=None, at: int | None = None
) -> tuple[list, list]:
    """([fn(x) for x in items], what `extra()` gave in the child, or [] when none ran), the items at
    odd positions computed in a forked child where `can_fork()` and there are `min_items` or more;
    with `at`, the items from position `at` on (for items whose neighbours share work through a
    process's caches: a contiguous half keeps them in one process).

    `fn` must be pure in the sense above, and return JSON's values or bytes: the child's answers
    cross the pipe as JSON (no loader that can run what it reads), so its tuples come back as
    lists. `extra`, called in the child once its part is done, returns a list of what the child
    learnt that the parent should keep (say, cache entries); the parent's own calls needed no such
    hand-over."""
    if len(items) < max(min_items, 2) or not can_fork():
        return [fn(x) for x in items], []
    if at is None:
        ours, theirs_of = slice(0, None, 2), slice(1, None, 2)
    else:
        at = min(max(at, 0), len(items))
        ours, theirs_of = slice(0, at), slice(at, None)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running any of the parent's cleanup
        code = 1
        try:
            forked()
            _CHILD.append(True)
            os.close(read_fd)
            out = [fn(x) for x in items[theirs_of]]
            payload = _dump([out, list(extra()) if extra else []])
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(payload)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    theirs, learnt = None, []
    pipe = os.fdopen(read_fd, "rb")
    try:
        mine = [fn(x) for x in items[ours]]
        data = pipe.read()
    except BaseException:  # the parent's own part failed (or was interrupted): no child left behind
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        pipe.close()
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        try:
            theirs, learnt = _load(data)
        except (ValueError, TypeError):  # an unreadable answer: the parent computes that half
            theirs = None
    if not isinstance(theirs, list) or len(theirs) != len(items[theirs_of]):
        theirs, learnt = [fn(x) for x in items[theirs_of]], []
    out: list = [None] * len(items)
    out[ours] = mine
    out[theirs_of] = theirs
    return out, learnt


class Stream:
    """`fn(job)` for each of `jobs` in order, computed ahead by a forked child while the parent
    works through the same jobs' subject: the parent takes each answer (`next`) when it reaches
    it. A big write places its turns one by one on one core; what each turn will need that depends
    only on its own text (its words counted, say) is ready beforehand on the other. The parent's
    answer never depends on the child: `next` gives None once the child is done, has failed, was
    never started (`can_fork()` false) or sent something unreadable, and the caller then computes
    what it needs itself; `ready` says whether an answer is there without waiting for it. `fn` is
    pure as in `split_map` and returns a list of JSON's values or bytes. The child keeps what the
    pipe cannot take yet (up to AHEAD_BYTES) and goes on computing: a stream started while the
    parent still prepares its write (one core busy) gets that far ahead, where a full pipe held it
    back after two answers; beyond AHEAD_BYTES it waits for the parent."""

    def __init__(self, fn, jobs: list):
        self.pid: int | None = None
        self.pipe = None
        if not jobs or not can_fork():
            return
        read_fd, write_fd = os.pipe()
        widen(write_fd)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                forked()
                _CHILD.append(True)
                os.close(read_fd)
                backlog = _Backlog(write_fd)
                for job in jobs:
                    payload = _dump([list(fn(job)), []])
                    backlog.send(len(payload).to_bytes(8, "little") + payload)
                backlog.flush()
                code = 0
            finally:
                os._exit(code)
        os.close(write_fd)
        self.pid, self.pipe = pid, os.fdopen(read_fd, "rb")

    def ready(self) -> bool:
        """Whether `next` would answer now (an answer, or the end) without waiting."""

        return self.pipe is None or bool(select.select([self.pipe], [], [], 0)[0])

    def next(self) -> list | None:
        """The next job's answer (as `fn` gave it), or None: nothing more will come."""
        if self.pipe is None:
            return None
        head = self.pipe.read(8)
        size = int.from_bytes(head, "little") if len(head) == 8 else -1
        data = self.pipe.read(size) if size >= 0 else b""
        try:
            if size < 0 or len(data) < size:
                raise ValueError("the child stopped")
            return _load(data)[0]
        except (ValueError, TypeError):
            self.close()
            return None

    def close(self) -> None:
        """Stop the child (it may still be computing answers nobody will read) and reap it."""
        if self.pipe is not None:
            self.pipe.close()
            self.pipe = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.pid = None


AHEAD_BYTES = 64 << 20  # what a Stream's child keeps unsent before it waits for the parent


class _Backlog:
    """A Stream child's answers on their way into the pipe: written as far as the pipe takes them
    without waiting, the rest kept (in order) until it does, or until AHEAD_BYTES are kept."""

    def __init__(self, fd: int):
        self.fd = fd
        self.kept: deque[memoryview] = deque()
        self.size = 0
        os.set_blocking(fd, False)

    def send(self, data: bytes) -> None:
        self.kept.append(memoryview(data))
        self.size += len(data)
        self._write(AHEAD_BYTES)

    def flush(self) -> None:
        self._write(0)
        os.close(self.fd)

    def _write(self, limit: int) -> None:
        """Write what the pipe takes without waiting; while more than `limit` bytes are kept, wait
        for it to take more."""
        while self.kept:
            try:
                n = os.write(self.fd, self.kept[0])
            except BlockingIOError:
                if self.size <= limit:
                    return
                select.select([], [self.fd], [])
                continue
            self.size -= n
            if n == len(self.kept[0]):
                self.kept.popleft()
            else:
                self.kept[0] = self.kept[0][n:]


PIPE_BYTES = 1 << 20  # what a Stream's pipe holds (Linux's default pipe-max-size for any user)


def widen(fd: int) -> int:
    """Let the pipe of `fd` hold PIPE_BYTES (Linux; best effort): an answer of a Stream (a
    counted chunk of texts, about 0.7 MB) then goes in at once, and the parent reads it without
    waiting for the child to be scheduled again for each 64 KB of the default pipe (0.5 s of a
    100k-turn import's placement spent waiting, the cores being busy with the files and the
    index). Returns the pipe's size, 0 where it is not known."""
    import fcntl

    setter = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setter is None:
        return 0
    try:
        return fcntl.fcntl(fd, setter, PIPE_BYTES)
    except OSError:  # above a lowered pipe-max-size, or out of the user's pipe quota
        return 0


def _dump(value) -> bytes:
    """`value` (JSON's values and bytes) as JSON, each bytes value as {"$raw": [start, size]} into
    the raw bytes that follow it: a count block of a megabyte crosses the pipe as it is, with no
    base64 to encode on one side and decode (and scan as a JSON string) on the other."""
    return b"".join(_dump_parts(value))


def _dump_parts(value) -> list:
    """`_dump(value)` in the parts it joins (the JSON's size, the JSON, each raw part as given): a
    caller writing them to a file one by one copies no part (a memoryview of an array included)."""
    blobs: list = []
    at = [0]

    def other(obj):
        if isinstance(obj, (bytes, bytearray, memoryview)):
            size = memoryview(obj).nbytes
            blobs.append(obj)
            at[0] += size
            return {"$raw": [at[0] - size, size]}
        raise TypeError(f"{type(obj).__name__} does not cross the pipe")

    text = json.dumps(value, default=other, ensure_ascii=False, separators=(",", ":"))
    head = text.encode("utf-8", "surrogatepass")
    return [len(head).to_bytes(8, "little"), head, *blobs]


def _load(data, views: bool = False):
    """What `_dump` made of a value, from `data` (bytes, or a buffer such as an mmap); each raw
    part as bytes, or with `views` as a memoryview of `data` itself (no copy)."""
    size = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    if size < 0 or 8 + size > len(data):
        raise ValueError("not what a child sends")
    raw = memoryview(data)[8 + size :]

    def hook(obj: dict):
        if obj.keys() == {"$raw"}:
            start, n = obj["$raw"]
            if not (
                isinstance(start, int)
                and isinstance(n, int)
                and 0 <= n
                and 0 <= start <= len(raw) - n
            ):
                raise ValueError("a raw part out of bounds")
            return raw[start : start + n] if views else bytes(raw[start : start + n])
        return obj

    got = json.loads(data[8 : 8 + size].decode("utf-8", "surrogatepass"), object_hook=hook)
    if not (isinstance(got, list) and len(got) == 2 and all(isinstance(x, list) for x in got)):
        raise ValueError("not what a child sends")
    return got


_BLAS: list = []


def one_blas_thread():
    """A context in which numpy's BLAS uses one thread (threadpoolctl, its libraries found once per
    process). Small products (a query against a scan chunk, a turn against a write's topics) gain
    nothing from a BLAS thread team, and on a busy machine the team waiting for a core costs
    milliseconds a product (100k rows on a busy 2-core machine: 70-98 ms with two BLAS threads,
    26-29 ms with one)."""
    import contextlib

    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS.append(ThreadpoolController().select(user_api="blas"))
        except Exception:  # noqa: BLE001 - no threadpoolctl, or a BLAS it does not know: as it is
            _BLAS.append(None)
    return _BLAS[0].limit(limits=1) if _BLAS[0] is not None else contextlib.nullcontext()
