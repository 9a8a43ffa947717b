"""What `ct` prints to a terminal is shown, never obeyed: a stored text is someone else's words (an
imported export, a model's answer), and an escape sequence in it must not retitle the window, hide
lines or write the clipboard when a search or the tree prints it. A pipe gets the exact text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import make_store, read_terminal, write_turns

HOSTILE = (
    "quasar notes \x1b]0;pwned\x07 title \x1b]52;c;ZWNobyBvd25lZA==\x07 clip"
    " \x1b[2J cleared \x9b31m c1 \x08back \x7f del ok\rhidden line"
)


def _on_a_terminal(args: list[str], cwd, stderr: bool = False) -> bytes:
    import pty

    main, child = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memstore", *args],
        stdout=child,
        stderr=child if stderr else subprocess.DEVNULL,
        cwd=cwd,
    )
    os.close(child)
    out = read_terminal(main)
    proc.wait()
    os.close(main)
    return out


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_stored_control_characters_are_shown_on_a_terminal_and_kept_in_a_pipe(tmp_path):
    store = make_store(tmp_path / "s")
    write_turns(
        store,
        [("2026-03-01T10:00:00Z", "user", HOSTILE, "s1")],
        fields=("ts", "role", "text", "session"),
    )
    for args in (["search", "quasar"], ["tree"]):
        out = _on_a_terminal(["-C", str(store.root), *args], tmp_path)
        text = out.decode("utf-8", "replace")
        assert b"\x1b" not in out and b"\x07" not in out and b"\x08" not in out, out
        assert "\xc2\x9b".encode("latin-1") not in out and b"\x7f" not in out
        if args[0] == "search":
            assert "\u241b]0;pwned\u2407" in text and "\u241b]52;c;" in text, text
            assert "\\x9b31m" in text, text
        assert re.search(rb"\r(?!\n)", out) is None, out  # (a pty turns each line feed into CRLF)
    piped = subprocess.run(
        [sys.executable, "-m", "memstore", "-C", str(store.root), "search", "quasar", "--json"],
        capture_output=True,
        check=True,
    )
    assert json.loads(piped.stdout)["hits"][0]["text"] == HOSTILE  # a pipe: the text as stored


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_a_warning_naming_a_pulled_key_shows_its_control_characters(tmp_path):
    """stderr too: a pulled memstore.toml's [llm] key is named in a warning, and its name is the
    pusher's choice."""
    store = make_store(tmp_path / "s")
    toml = store.root / "memstore.toml"
    toml.write_text(toml.read_text() + '\n[llm]\n"x\\u001b]0;owned\\u0007" = 1\n')
    out = _on_a_terminal(["-C", str(store.root), "search", "anything"], tmp_path, stderr=True)
    assert b"\x1b" not in out and b"\x07" not in out, out
    assert "x\u241b]0;owned\u2407" in out.decode("utf-8", "replace"), out


def test_a_carriage_return_is_shown_unless_it_ends_a_line():
    from memstore.cli import TerminalText

    class Sink:
        def __init__(self):
            self.got = ""

        def write(self, text):
            self.got += text

        def flush(self):
            pass

    out = Sink()
    TerminalText(out).write("shown\rhidden\r\nnext\x1b[2J\t\n")
    assert out.got == "shown\u240dhidden\r\nnext\u241b[2J\t\n"
    out.got = ""  # stderr's: its progress bar redraws its line with carriage returns
    TerminalText(out, keep_cr=True).write("\r 40% \x1b]0;t\x07")
    assert out.got == "\r 40% \u241b]0;t\u2407"
