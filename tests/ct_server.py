"""A `ct` server (serve, mcp --http) in its own process for a test or the load script: started,
its address read from the first line it prints, stopped afterwards (SIGTERM, then a kill)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from contextlib import contextmanager

SERVE_ADDRESS = r"at (http://127\.0\.0\.1:\d+)/"
MCP_ADDRESS = r"at (http://127\.0\.0\.1:\d+/mcp)"


@contextmanager
def ct_server(args, address: str = SERVE_ADDRESS, wait: float = 60, env: dict | None = None):
    """`python -m memstore ARGS`; yields the first group of `address` in its first line."""
    argv = [sys.executable, "-m", "memstore", *map(str, args)]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or dict(os.environ),
    )
    try:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(wait)
        m = re.search(address, box[0] if box else "")
        if not m:
            said = proc.poll() is not None and proc.stderr.read()
            raise AssertionError(f"ct {' '.join(map(str, args))} printed no address: {box} {said}")
        yield m.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
