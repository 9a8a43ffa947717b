"""The "where are we now" markers: `mark` opens one and `done` closes one, one commit each
(markers.jsonl, format/markers.py). Reading them is retrieve/where.py."""

from __future__ import annotations

from ..errors import FormatError, MemstoreError, UsageError
from ..format import markers as markerfmt
from ..format.timeutil import now_utc


def _checked_lines(store) -> list[markerfmt.MarkerLine]:
    try:
        return markerfmt.read_lines(store.root)
    except FormatError as exc:
        raise FormatError(
            exc.path, exc.problem, exc.line, "Nothing was changed. " + (exc.hint or "")
        ) from None


def mark(store, text: str, now=None, secrets: str = "refuse") -> markerfmt.Marker:
    """Append an open marker to markers.jsonl and commit it ("Mark: <text>").

    A marker is scanned for secrets like a record: refused (the default), redacted, or kept
    verbatim with `secrets="allow"`; the commit subject never holds one either way."""
    when = now or now_utc()
    text = _checked_for_secrets(text, secrets)
    try:
        text.encode("utf-8")  # the line is stored as UTF-8 JSON, verbatim or not at all
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"cannot mark: the text holds a lone UTF-16 surrogate ({text[exc.start]!r} at character "
            f"{exc.start}, half of an emoji or a byte that was not UTF-8), which UTF-8 cannot store"
        ) from None
    try:
        line = markerfmt.opening(text, when)
    except ValueError as exc:
        raise UsageError(f"cannot mark: {exc}") from None
    with store.transaction(f"Mark: {_subject(line.text)}") as tx:
        _checked_lines(store)
        markerfmt.append(store.root, line)
        tx.stage(markerfmt.FILENAME)
    return markerfmt.Marker(line.id, line.ts, line.text)


def resolve(markers: list[markerfmt.Marker], ref: str) -> markerfmt.Marker:
    """The marker whose id is `ref` or starts with it (at least 4 characters, unambiguous)."""
    ref = ref.strip().lower()
    exact = [m for m in markers if m.id.lower() == ref]
    if exact:
        return exact[0]
    found = [m for m in markers if len(ref) >= 4 and m.id.lower().startswith(ref)]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise UsageError(
            f"marker id {ref!r} is ambiguous: it starts {len(found)} markers ({', '.join(m.id for m in found[:5])}).",
            "Give more of the id.",
        )
    raise MemstoreError(
        f"no marker with id {ref!r} in {markerfmt.FILENAME}; nothing was changed.",
        'Run "ct where" to see the open markers and their ids.',
    )


def done(store, ref: str, now=None) -> markerfmt.Marker:
    """Close an open marker by appending a done line and committing it."""
    when = now or now_utc()
    with store.transaction(lambda: f"Mark done: {_subject(target.text)}") as tx:
        markers = markerfmt.fold(_checked_lines(store))
        target = resolve(markers, ref)
        if target.closed_at:
            raise MemstoreError(
                f"marker {target.id} ({_subject(target.text)!r}) was already closed at "
                f"{target.closed_at}; nothing was changed."
            )
        line = markerfmt.closing(target, when)
        markerfmt.append(store.root, line)
        tx.stage(markerfmt.FILENAME)
    target.closed_at, target.closed_by = line.ts, line.id
    return target


def _checked_for_secrets(text, how: str):
    from ..errors import SecretsFound
    from ..secrets import detect as secrets

    if how not in ("refuse", "redact", "allow"):
        raise UsageError(f"a marker's secrets mode is refuse, redact or allow, not {how!r}")
    if how == "allow" or not isinstance(text, str):
        return text
    found = secrets.scan(text)
    if not found:
        return text
    if how == "redact":
        return secrets.redact(text)[0]
    lines = [
        f"marker text{f' line {f.line}' if chr(10) in text else ''}: {f.kind} ({f.excerpt_redacted})"
        for f in found
    ]
    raise SecretsFound(
        "Refusing to mark what looks like credentials:\n  " + "\n  ".join(lines),
        "Nothing was written. Remove them, or pass --redact-secrets (replace each secret by a marker "
        "naming its kind) or --allow-secrets (keep the marker verbatim; its commit subject is masked).",
    )


def _subject(text: str, width: int = 60) -> str:
    """The commit subject's excerpt of a marker: any secret in it replaced, whatever the mode."""
    from ..secrets.policy import scrub

    flat = " ".join(scrub(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"
