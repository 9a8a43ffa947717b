"""Progress: a long import or ingest says what part of the work it is in (embedding, placing in
topics, naming, grouping), on a terminal only; a library caller's plain callable still counts."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from conftest import make_store, read_terminal


class Recorder:
    """A progress callable with stages, as the CLI's bar is."""

    def __init__(self):
        self.stages: list[tuple[str, int | None]] = []
        self.ticks: dict[str, int] = {}

    def stage(self, desc, total=None):
        self.stages.append((desc, total))

    def __call__(self, n=1):
        name = self.stages[-1][0] if self.stages else ""
        self.ticks[name] = self.ticks.get(name, 0) + n


def _export(path, conversations: int, turns: int):
    convs = []
    for c in range(conversations):
        mapping, parent = {}, None
        for m in range(turns):
            node = f"c{c}-m{m}"
            mapping[node] = {
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": "user" if m % 2 == 0 else "assistant"},
                    "create_time": 1767261600 + 3600 * c + 60 * m,
                    "content": {
                        "content_type": "text",
                        "parts": [f"Conversation {c} about subject {c % 7}, turn {m}: plans."],
                    },
                },
            }
            if parent:
                mapping[parent]["children"].append(node)
            parent = node
        convs.append(
            {"id": f"conv-{c}", "title": f"Chat {c}", "mapping": mapping, "current_node": parent}
        )
    path.write_text(json.dumps(convs))
    return path


def test_an_import_tells_each_part_of_its_work(tmp_path):
    store = make_store(tmp_path / "s")
    rec = Recorder()
    res = store.import_("chatgpt", _export(tmp_path / "c.json", 6, 8), progress=rec)
    assert len(res.added) == 48
    names = [d for d, _ in rec.stages]
    assert names == [
        "Embedding",
        "Writing logs and packs",
        "Placing in topics",
        "Grouping topics",
        "Naming topics",  # (topics and the groups grouping made, in one pass)
        "Committing",
        "Indexing",
    ], names
    assert dict(rec.stages)["Embedding"] == 48 and rec.ticks["Embedding"] == 48
    assert rec.ticks["Writing logs and packs"] == 48 and rec.ticks["Indexing"] == 48
    assert dict(rec.stages)["Placing in topics"] == 48 and rec.ticks["Placing in topics"] == 48
    assert rec.ticks["Naming topics"] == dict(rec.stages)["Naming topics"] > 0


def test_a_plain_callable_still_counts(tmp_path):
    store = make_store(tmp_path / "s")
    seen = []
    store.import_("chatgpt", _export(tmp_path / "c.json", 2, 4), progress=seen.append)
    assert sum(seen) >= 8


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_the_cli_bar_names_the_stage_on_a_terminal_and_stays_quiet_elsewhere(tmp_path):
    import fcntl
    import pty
    import struct
    import subprocess
    import termios

    script = textwrap.dedent(
        """
        import sys, time
        from memstore.cli.common import Ctx, progress_for
        with progress_for(Ctx(store_paths=[]), "Importing chatgpt") as bar:
            bar.stage("Placing in topics", 3)
            for _ in range(3):
                time.sleep(0.6)
                bar(1)
        """
    )
    env = dict(os.environ)
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=child, env=env)
    os.close(child)
    out = read_terminal(main)
    proc.wait()
    assert b"Importing chatgpt: Placing in topics" in out, out
    piped = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env)
    assert piped.stderr == b""
