"""Decoding JSON that came from a stranger: the one checked `loads` for a store's JSON files.

Every file of a store may arrive by `git pull`, and `json.loads` raises more than JSONDecodeError
on hostile input: RecursionError for a value nested thousands deep, ValueError for an integer of
more than 4,300 digits (Python's int-string limit), UnicodeDecodeError for bytes that are not
UTF-8; and it accepts NaN and Infinity, which are no JSON numbers (docs/format.md). `loads` turns
each into `BadJSON`, a ValueError whose message says in a sentence what is wrong, so the reader
names the file and line, as for any damaged line, and goes on.
"""

from __future__ import annotations

import json
import sys


class BadJSON(ValueError):
    """The text is not JSON a store may hold; the message says why (the caller names the file)."""


def _constant(name: str):
    raise BadJSON(f"holds {name}, which JSON cannot store (not a number)")


# parse_constant keeps the C scanner: a line without NaN decodes as fast as with json.loads.
# DECODER.decode takes text only; a hot path calls it directly and `problem` names what it raised.
DECODER = json.JSONDecoder(parse_constant=_constant)


def problem(exc: BaseException) -> str:
    """What `DECODER.decode` (or decoding bytes as UTF-8) raised, as a sentence."""
    if isinstance(exc, BadJSON):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc})"
    if isinstance(exc, RecursionError):
        return "not valid JSON we can read (nested too deep)"
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 ({exc.reason} at byte {exc.start})"
    if "digits" in str(exc):  # the int-string conversion limit
        return f"holds a number of more than {sys.get_int_max_str_digits() or 4300:,} digits"
    return f"not valid JSON ({exc})"


def line_problems(name: str, data: bytes, problem) -> list[str]:
    """`NAME:LINE: why` for each non-blank line of a JSONL file's `data` that `problem(line)`
    finds wrong (None: a good line)."""
    out = []
    for n, line in enumerate(data.split(b"\n"), 1):
        why = problem(line) if line.strip() else None
        if why is not None:
            out.append(f"{name}:{n}: {why}")
    return out


def loads(text: str | bytes | bytearray):
    """The decoded value; BadJSON for anything a store's file must not hold."""
    try:
        return DECODER.decode(text if type(text) is str else bytes(text).decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise BadJSON(problem(exc)) from None
