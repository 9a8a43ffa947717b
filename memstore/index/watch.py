"""Changes to a store's files as the kernel reports them (Linux inotify), so a long-lived reader knows
at the cost of one system call that nothing changed since it last looked.

A `Watch` covers what the index is built from and what git changes: the store's folder, `log/` and
its year folders (an append to a day log, a day log added, removed, moved, rewritten in place or
touched), `packs/`, its year folders and every day's pack folder (a pack added, removed or written
over), and the git directory with `refs/heads` (every commit, merge, checkout, reset or pull moves
HEAD, a branch or git's index). `changed()` says True when any event came since the last `arm()` —
and also whenever it cannot know: no inotify on this platform, a watch that could not be added, the
kernel's queue overflowed. Where the watches do not see everything — the store lives on a network or
FUSE file system (a change made by another machine raises no event here), a format-1 store's
`segments/` (not watched), or more day folders than MAX_DAY_WATCHES — it also says True once
FULL_CHECK_S passed since the last full look. A doubt always means "look"; on a local file system
with every folder watched, an unchanged store is never looked at again, however long a reader waits
between reads.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import struct
import time

FULL_CHECK_S = 5.0  # where the watches cannot see every change (see the module docstring)
MAX_DAY_WATCHES = 20_000  # pack day folders watched one by one; more fall back to FULL_CHECK_S
# File systems whose changes made elsewhere (another machine, the host of a VM) raise no inotify
# event on this machine: a reader there keeps looking every FULL_CHECK_S.
REMOTE_FS = frozenset(
    "nfs nfs4 cifs smb3 smbfs ncpfs afs coda ceph glusterfs lustre gpfs 9p virtiofs vboxsf "
    "vmhgfs davfs beegfs ocfs2 gfs2 orangefs".split()
)
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
_ONLYDIR = 0x01000000
# A watched folder removed or moved away (its watch no longer stands for the path), and an
# overflowed event queue.
_GONE = _IN["DELETE_SELF"] | _IN["MOVE_SELF"] | 0x8000  # IN_IGNORED: the kernel dropped the watch
_Q_OVERFLOW = 0x4000
_EVENT = struct.Struct(
    "iIII"
)  # struct inotify_event: wd, mask, cookie, len (then len bytes of name)
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


def fs_type(path) -> str | None:
    """The type of the file system `path` lives on ("ext4", "nfs4", "fuse.sshfs", …), from
    /proc/self/mountinfo; None when that cannot be read."""
    try:
        real = os.path.realpath(path)
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    best, kind = "", None
    for line in lines:
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        if not sep or len(fields) < 5 or not tail:
            continue
        mount = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):  # the last of equal mount points is the one on top
            best, kind = mount, tail.split()[0]
    return kind


def sees_every_change(path) -> bool:
    """Whether inotify on this machine sees every change to files under `path` (a local file
    system), so that no periodic look is needed."""
    kind = fs_type(path)
    return kind is not None and kind not in REMOTE_FS and not kind.startswith("fuse")


class Watch:
    """Kernel watches over one store's folders (see the module docstring)."""

    def __init__(self, root, git_dir, full_check_s: float | None = None):
        self.root, self.git_dir = os.fspath(root), os.fspath(git_dir)
        self.full_check_s = FULL_CHECK_S if full_check_s is None else full_check_s
        self.fd: int | None = None
        self.watched: dict[str, int] = {}  # folder -> its watch descriptor
        self._folder_of: dict[int, str] = {}
        self.armed_at: float | None = None  # monotonic time of the last arm(); None: never armed
        self.events = False
        self.local: bool | None = None  # the store and its git directory on local file systems
        self.complete = False  # every folder a change can arrive in is watched (set by arm())
        lib = _inotify()
        if lib is not None:
            fd = lib.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            self.fd = fd if fd >= 0 else None

    def _folders(self) -> tuple[list[str], int, bool]:
        """(the folders to watch, how many of them come before the pack day folders, whether they
        are all there is to watch)."""
        root, out = (
            self.root,
            [self.root, self.git_dir, os.path.join(self.git_dir, "refs", "heads")],
        )
        complete, days, pack_years = not os.path.isdir(os.path.join(root, "segments")), 0, []
        for top in ("log", "packs"):
            base = os.path.join(root, top)
            out.append(base)
            try:
                years = [os.path.join(base, y) for y in os.listdir(base) if y.isdigit()]
            except OSError:
                continue
            out += years
            if top == "packs":
                pack_years = years
        first = len(out)
        for year in pack_years:  # a pack added by hand into a day's folder changes only that folder
            try:
                names = os.listdir(year)
            except OSError:
                continue
            days += len(names)
            if days > MAX_DAY_WATCHES:
                complete = False
                continue
            out += [os.path.join(year, name) for name in names]
        return out, first, complete

    def arm(self) -> None:
        """Forget the events seen so far and watch every folder there is now; call it before a full
        look at the files, so that a change made while looking is an event for the next call."""
        if self.fd is None:
            return
        self._drain()
        self.events = False
        if self.local is None:
            self.local = sees_every_change(self.root) and sees_every_change(self.git_dir)
        lib = _inotify()
        folders, first, complete = self._folders()
        for i, folder in enumerate(folders):
            if folder in self.watched:
                continue  # still watched: one removed or moved away was forgotten by _drain above
            # IN_ONLYDIR: a name that is not a folder (or is gone) fails and is skipped.
            wd = lib.inotify_add_watch(self.fd, os.fsencode(folder), MASK | _ONLYDIR)
            if wd < 0:
                if ctypes.get_errno() in (errno.ENOENT, errno.ENOTDIR):
                    continue
                if i < first:
                    self.close()  # out of watches before the logs and git are watched: look every time
                    return
                complete = False  # out of watches among the pack day folders: look now and then
                break
            self.watched[folder] = wd
            self._folder_of[wd] = folder
        self.complete = complete and self.local
        self.armed_at = time.monotonic()

    def _drain(self) -> bool:
        """Read every event queued; True if there was any. The watch of a folder removed or moved
        away is forgotten, so the next arm() watches whatever is at that path then; after an
        overflow every folder is added again."""
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
            at = 0
            while at + _EVENT.size <= len(chunk):
                wd, mask, _cookie, size = _EVENT.unpack_from(chunk, at)
                at += _EVENT.size + size
                if mask & _Q_OVERFLOW:
                    self.watched.clear()
                    self._folder_of.clear()
                elif mask & _GONE and wd in self._folder_of:
                    self.watched.pop(self._folder_of.pop(wd), None)

    def changed(self) -> bool:
        """Whether the files may have changed since the last `arm()` (True when in doubt)."""
        if self.fd is None or self.armed_at is None:
            return True
        if not self.complete and time.monotonic() - self.armed_at > self.full_check_s:
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
        self._folder_of.clear()

    def __del__(self):
        self.close()
