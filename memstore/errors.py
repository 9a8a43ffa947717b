"""Every error memstore raises on purpose, each with the exit code the CLI turns it into."""


class MemstoreError(Exception):
    """Base class: a message for the user and an exit code for the CLI."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n{self.hint}"


class UsageError(MemstoreError):
    """The command was called wrongly (bad option value, missing argument)."""

    exit_code = 2


class NotAStoreError(MemstoreError):
    """No store at or above the given path."""

    exit_code = 3

    def __init__(self, path):
        super().__init__(f'Not a memory store: {path}. Run "ct init" first.')
        self.path = path


def shown_path(path) -> str:
    """A path as text that prints and stores everywhere: name bytes that are not UTF-8 as \\xNN."""
    text = str(path)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file system gave (from JSON): escape it as such
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


class FormatError(MemstoreError):
    """A file in the store (or an input file) is malformed; names the file and what is wrong."""

    exit_code = 4

    def __init__(self, path, problem: str, line: int | None = None, hint: str | None = None):
        where = f"{shown_path(path)}:{line}" if line is not None else shown_path(path)
        super().__init__(f"{where}: {problem}", hint)
        self.path = str(path)
        self.line = line
        self.problem = problem


class VersionError(MemstoreError):
    """The store was written by a format version this program does not read."""

    exit_code = 5


class EmbedderMismatch(MemstoreError):
    """The store's vectors were made by another embedder than the one requested."""

    exit_code = 6


class LockTimeout(MemstoreError):
    """Another process holds the store's lock for longer than we are willing to wait."""

    exit_code = 7


class GitError(MemstoreError):
    """A git command failed; the message carries git's own words."""

    exit_code = 8


class SecretsFound(MemstoreError):
    """Input looks like it contains credentials; nothing was written."""

    exit_code = 9


class NotPermitted(UsageError):
    """A served store (`ct serve`, `ct mcp`) refuses what its server was not started to allow; the message names the flag."""
