"""Changes to a store's files as the kernel reports them (Linux inotify), so a long-lived reader knows
at the cost of one system call that nothing changed since it last looked.

A `Watch` covers what the index is built from and what git changes: the store's folder, `log/` and
its year folders (an append to a day log, a day log added, removed, moved or touched), `packs/` and
its year folders (a day's pack folder added or removed), and the git directory with `refs/heads`
(every commit, merge, checkout, reset or pull moves HEAD, a branch or git's index). `changed()` says
True when any event came since the last `arm()` — and also whenever it cannot know: no inotify on
this platform, a watch that could not be added, the kernel's queue overflowed, or FULL_CHECK_S
passed since the last full look (a hand change inside one day's pack folder, with nothing else, is
the one change no watch sees; the full check finds it). A doubt always means "look".
"""

from __future__ import annotations

import ctypes
import os
import time

FULL_CHECK_S = 5.0
_IN = {
    "MODIFY": 0x2,
    "ATTRIB": 0x4,
    "CLOSE_WRITE": 0x8,
    "MOVED_FROM": 0x40,
    "MOVED_TO": 0x80,
    "CREATE": 0x100,
    "DELETE": 0x200,
    "DELETE_SELF": 0x400,
    "MOVE_SELF": 0x800,
}
MASK = sum(_IN.values())
_libc = None


def _inotify():
    """libc with inotify, or None (not Linux, or no such symbols)."""
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(None, use_errno=True)
            lib.inotify_init1.argtypes = [ctypes.c_int]
            lib.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
            _libc = lib
        except (OSError, AttributeError):
            _libc = False
    return _libc or None


class Watch:
    """Kernel watches over one store's folders (see the module docstring)."""

    def __init__(self, root, git_dir, full_check_s: float | None = None):
        self.root, self.git_dir = os.fspath(root), os.fspath(git_dir)
        self.full_check_s = FULL_CHECK_S if full_check_s is None else full_check_s
        self.fd: int | None = None
        self.watched: set[str] = set()
        self.armed_at: float | None = None  # monotonic time of the last arm(); None: never armed
        self.events = False
        lib = _inotify()
        if lib is not None:
            fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            self.fd = fd if fd >= 0 else None

    def _folders(self) -> list[str]:
        root, out = (
            self.root,
            [self.root, self.git_dir, os.path.join(self.git_dir, "refs", "heads")],
        )
        for top in ("log", "packs"):
            base = os.path.join(root, top)
            out.append(base)
            try:
                out += [os.path.join(base, y) for y in os.listdir(base) if y.isdigit()]
            except OSError:
                pass
        return out

    def arm(self) -> None:
        """Forget the events seen so far and watch every folder there is now; call it before a full
        look at the files, so that a change made while looking is an event for the next call."""
        if self.fd is None:
            return
        self._drain()
        self.events = False
        lib = _inotify()
        for folder in self._folders():
            if not os.path.isdir(folder):
                continue  # (a folder watched already gets the same watch back: one cheap call)
            if lib.inotify_add_watch(self.fd, os.fsencode(folder), MASK) < 0:
                self.close()  # out of watches (or a folder gone meanwhile): look every time
                return
            self.watched.add(folder)
        self.armed_at = time.monotonic()

    def _drain(self) -> bool:
        got = False
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return got
            except OSError:
                self.close()
                return True
            if not chunk:
                return got
            got = True

    def changed(self) -> bool:
        """Whether the files may have changed since the last `arm()` (True when in doubt)."""
        if self.fd is None or self.armed_at is None:
            return True
        if time.monotonic() - self.armed_at > self.full_check_s:
            return True
        if not self.events:
            self.events = self._drain()  # an overflow is an event too: it also arrives as bytes
        return self.events

    def dirty(self) -> None:
        """Make the next `changed()` say True (a look that failed half way)."""
        self.armed_at = None

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = None
        self.watched.clear()

    def __del__(self):
        self.close()
