"""A commit that removes keys/ (anyone who can push to the remote can make one) never turns an
encrypted store's memory into plain text: a clone that has opened the store as encrypted refuses
every command, naming keys/recipients, and a clone that never did (a fresh clone) refuses to
append a plain line to a file of sealed lines. Before, the next `ct add` committed the turn in
the clear and then said "Nothing was changed" (exit 10)."""

from __future__ import annotations

from conftest import ct
from test_encrypt import as_, git, people, sealed_clones  # noqa: F401 (fixtures)

DAY = "2026-11-30"


def _keys_removed_upstream(tmp_path, remote) -> None:
    """A clone with no key removes keys/ and pushes, as an untrusted remote could."""
    mallory = tmp_path / "mallory"
    git(tmp_path, "clone", "-q", str(remote), str(mallory))
    git(mallory, "rm", "-rq", "keys")
    git(mallory, "-c", "user.name=m", "-c", "user.email=m@x", "commit", "-qm", "routine update")
    git(mallory, "push", "-q")


def _plain_text_anywhere(root, text: str) -> bool:
    logs = git(root, "log", "-p", "--all", "--format=%s", "--", "log", "markers.jsonl").stdout
    return text in logs or text in (root / "log" / "2026" / f"{DAY}.jsonl").read_text()


def _alice_wrote(tmp_path, people):
    """(a, b, remote): two clones of a store sealed to alice and bob; alice wrote a turn on DAY in
    a and synced it."""
    alice = people[0]
    a, b, remote = sealed_clones.__wrapped__(tmp_path, people)
    git(a, "config", "user.name", "alice")
    git(a, "config", "user.email", "a@x")
    as_(alice, a, "add", "sealed before", "--ts", f"{DAY}T09:00:00Z")
    as_(alice, a, "sync")
    return a, b, remote


def test_a_clone_that_opened_the_store_encrypted_refuses_when_keys_go(tmp_path, people):
    alice = people[0]
    a, _b, remote = _alice_wrote(tmp_path, people)
    _keys_removed_upstream(tmp_path, remote)
    git(a, "pull", "-q", "--no-rebase", "--no-edit")
    before = git(a, "rev-parse", "HEAD").stdout
    out = as_(alice, a, "add", "would be plain", "--ts", f"{DAY}T10:00:00Z", check=False)
    assert out.returncode == 4 and "keys/recipients: is gone" in out.stderr, out.stderr
    assert git(a, "rev-parse", "HEAD").stdout == before
    assert not _plain_text_anywhere(a, "would be plain")
    assert as_(alice, a, "search", "sealed", check=False).returncode == 4  # reads say it too


def test_a_clone_without_the_mark_never_appends_a_plain_line_to_sealed_lines(tmp_path, people):
    """A clone whose git folder lacks the mark (made before it existed) has its index from when
    the keys were there; the append itself refuses a plain line into a file of sealed lines."""
    bob = people[2]
    _a, b, remote = _alice_wrote(tmp_path, people)
    git(b, "pull", "-q", "--no-rebase", "--no-edit")
    as_(bob, b, "search", "sealed")  # b's index, built with bob's key
    (b / ".git" / "memstore-encrypted").unlink()
    _keys_removed_upstream(tmp_path, remote)
    git(b, "pull", "-q", "--no-rebase", "--no-edit")
    git(b, "config", "user.name", "b")
    git(b, "config", "user.email", "b@x")
    before = git(b, "rev-parse", "HEAD").stdout
    out = ct("-C", b, "add", "would be plain", "--ts", f"{DAY}T10:00:00Z", check=False)
    assert out.returncode != 0 and "never writes a plain line" in out.stderr, out.stderr
    assert git(b, "rev-parse", "HEAD").stdout == before
    assert not _plain_text_anywhere(b, "would be plain")
