"""Advisory file locks (fcntl) that keep two writers, or two indexers, of one clone apart."""

from __future__ import annotations

import fcntl
import os
import time
from contextlib import contextmanager
from pathlib import Path

from .errors import LockTimeout
from .storefile import mkdirs, open_fd


@contextmanager
def file_lock(path: Path, timeout: float = 60.0, what: str = "store", shared: bool = False):
    """Hold an exclusive (or shared) lock on `path`; LockTimeout after `timeout` seconds."""
    mkdirs(path.parent)
    fd = open_fd(path, os.O_RDWR | os.O_CREAT)  # never through a link a copied .memstore/ holds
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(
                        f"Another memstore process has held the {what} lock ({path}) for {timeout:.0f} s.",
                        "Wait for it to finish, or raise MEMSTORE_LOCK_TIMEOUT.",
                    ) from None
                time.sleep(0.02)
        if not shared:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def lock_timeout() -> float:
    try:
        return float(os.environ.get("MEMSTORE_LOCK_TIMEOUT", "60"))
    except ValueError:
        return 60.0
