"""Walks a file or folder for ingest: decides which files are read, and says why each other one is not."""

from __future__ import annotations

import codecs
import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import pathspec

from ..format.record import doc_kind
from ..errors import UsageError, shown_path
from ..secrets.detect import is_credentials_file

__all__ = [
    "FileItem",
    "BlobItem",
    "Skip",
    "Excluded",
    "DEFAULT_EXCLUDES",
    "walk",
    "DEFAULT_EXTS",
    "DEFAULT_MAX_BYTES",
    "kind_of",
    "decode_text",
    "doc_kind",
]

MARKDOWN_EXTS = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
RST_EXTS = frozenset({".rst", ".rest"})
ASCIIDOC_EXTS = frozenset({".adoc", ".asciidoc"})
PLAIN_EXTS = frozenset({".txt", ".text", ".org"}) | RST_EXTS | ASCIIDOC_EXTS
CODE_EXTS = frozenset(
    # ContextTape's list, then the obvious additions. Config, data and log formats count as code
    # because they are line-oriented: the code chunker cuts them at lines, not sentences.
    ".log .cfg .conf .ini .csv .tsv .json .yaml .yml .toml .py .js .ts .java .go .rb .php .c .cc .cpp"
    " .h .hpp .sh .bash .zsh .html .htm .css"
    " .jsx .tsx .rs .kt .swift .scala .sql .r .lua .pl .ex .exs .hs .ml .proto .xml"
    " .mjs .cjs .cs .m .vue .svelte .scss .less .jl .dart .clj .erl .tf .gradle .bat .ps1".split()
)
PDF_EXTS = frozenset({".pdf"})
DEFAULT_EXTS = MARKDOWN_EXTS | PLAIN_EXTS | CODE_EXTS | PDF_EXTS
# Extensionless files that are text by convention; read only when `exts` is the default.
DEFAULT_NAMES = frozenset(
    {"README", "LICENSE", "COPYING", "CHANGELOG", "NOTICE", "AUTHORS", "Makefile", "Dockerfile"}
)
DEFAULT_MAX_BYTES = 10 * 1024 * 1024

# Never descended into: version-control metadata and memstore's own disposable cache.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", ".bzr", "_darcs", "CVS", ".jj", ".pijul", ".memstore"}
)
IGNORE_FILES = (".gitignore", ".memstoreignore")  # same syntax; the second one wins on conflict

# Left out unless --no-default-excludes: build output, tool caches, installed packages and a
# Sphinx project's templates and static assets, in any folder of the walk (gitignore patterns).
DEFAULT_EXCLUDES = (
    "_build/",
    "build/",
    "dist/",
    "site-packages/",
    "node_modules/",
    ".tox/",
    ".nox/",
    ".venv/",
    "venv/",
    "__pycache__/",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    "_templates/",
    "_static/",
)
# ... and a Sphinx project's scaffolding: its conf.py (a conf.py beside one of these pages), and a
# Makefile or make.bat that runs sphinx-build (its text names SPHINXBUILD).
SPHINX_INDEXES = frozenset({"index.rst", "index.md", "index.txt", "contents.rst"})
SPHINX_MAKE = frozenset({"Makefile", "make.bat"})

# A release history (format/record.py doc_kind) is ingested like any page, but its chunks say
# `source.doc_kind: "changelog"` and rank below a how-to page's in search (CHANGELOG_PRIOR).

_SNIFF_BYTES = 8192
_TEXT_CONTROL_OK = frozenset(b"\t\n\r\f\b\x1b")
_MAX_CONTROL_RATIO = 0.3  # more control bytes than this in the sniffed head means "not text"


@dataclass(frozen=True)
class Skip:
    """A file or folder the walk did not read, with the reason to print."""

    path: Path
    reason: str


@dataclass(frozen=True)
class Excluded:
    """A file or folder left out by an exclude pattern (--exclude, or the defaults), and which."""

    path: Path
    rel: str  # relative to the walk root; a folder's ends in "/"
    pattern: str  # the pattern that matched, or what the default rule calls it


@dataclass(frozen=True)
class FileItem:
    """A readable file: where it is, what its bytes hash to, which chunker fits, and its text."""

    path: Path  # absolute, as walked (a followed symlink keeps its own name)
    rel: str  # relative to the walk root, POSIX separators; the file name when root is a file
    size: int
    sha256: str  # of the raw bytes, so re-ingest can be skipped without reading text again
    kind: str  # "markdown" | "rst" | "asciidoc" | "code" | "text" | "pdf"
    pages: int | None = None  # PDFs: pages in the file
    pages_read: int | None = None  # PDFs: pages extracted (less than `pages` under max_pdf_pages)
    _text: str = field(default="", repr=False, compare=False)

    def read_text(self) -> str:
        """The decoded text; for a PDF the pages' text joined by form feeds ("\\f")."""
        return self._text


@dataclass(frozen=True)
class BlobItem:
    """A file that is not text (walks with `blobs=True` only): kept whole by ingest-any."""

    path: Path
    rel: str
    size: int
    sha256: str
    reason: (
        str  # why it is not text: "binary file", "invalid UTF-8 at byte 3", "encrypted PDF", ...
    )


def kind_of(path: str | Path) -> str:
    """Which chunker suits a file, from its extension."""
    suffix = Path(path).suffix.lower()
    if suffix in MARKDOWN_EXTS:
        return "markdown"
    if suffix in RST_EXTS:
        return "rst"
    if suffix in ASCIIDOC_EXTS:
        return "asciidoc"
    if suffix in PDF_EXTS:
        return "pdf"
    if suffix in CODE_EXTS or Path(path).name in ("Makefile", "Dockerfile"):
        return "code"
    return "text"


def walk(
    root: str | Path,
    *,
    exts: Iterable[str] | None = None,
    max_bytes: int | None = DEFAULT_MAX_BYTES,
    follow_symlinks: bool = False,
    exclude: Iterable[str | Path] = (),
    allow_secrets: bool = False,
    max_pdf_pages: int | None = None,
    blobs: bool = False,
    patterns: Iterable[str] = (),
    default_excludes: bool = False,
) -> Iterator[FileItem | BlobItem | Skip | Excluded]:
    """Yields every file under root to ingest (FileItem) or that could not be (Skip), sorted by path.

    Files filtered out on purpose (other extensions, ignored by .gitignore/.memstoreignore, VCS
    folders, anything under `exclude`) are passed over silently. A root that is a file is read
    whatever its extension and ignore files say. Raises UsageError when root does not exist.
    With `blobs` (ingest-any), every file is wanted whatever its extension, and one that is not
    text (binary, undecodable, a PDF without text) comes as a BlobItem instead of a Skip.
    `patterns` are gitignore lines matched against the path relative to root (`_build/`,
    `*.html`, `docs/conf.py`, `!keep.md`); with `default_excludes`, DEFAULT_EXCLUDES and the
    Sphinx scaffolding rule come first, so a `!` pattern can take one back. A file or folder they
    leave out comes as an Excluded, never silently (a file only when its extension is wanted).
    """
    walker = _Walker(root, exts, max_bytes, follow_symlinks, exclude, allow_secrets, max_pdf_pages)
    walker.blobs = blobs
    walker.set_patterns(patterns, default_excludes)
    return walker.run()


class _Walker:
    """One walk's settings and the state that guards against symlink loops."""

    def __init__(
        self, root, exts, max_bytes, follow_symlinks, exclude, allow_secrets, max_pdf_pages
    ):
        self.root = Path(os.path.abspath(root))
        if not os.path.lexists(self.root):
            raise UsageError(f"No such file or folder: {root}")
        self.root_real = os.path.realpath(self.root)
        self.exts = DEFAULT_EXTS if exts is None else _normalise_exts(exts)
        self.names = DEFAULT_NAMES if exts is None else frozenset()
        self.max_bytes = max_bytes
        self.follow = follow_symlinks
        self.exclude = tuple(os.path.realpath(p) for p in exclude)
        self.allow_secrets = allow_secrets
        self.max_pdf_pages = max_pdf_pages
        self.visited: dict[tuple[int, int], str] = {}  # (st_dev, st_ino) of walked dirs -> rel path

    spec = None  # the exclude patterns as one GitIgnoreSpec, or None
    lines: tuple = ()
    sphinx = False  # the Sphinx scaffolding rule is on

    def set_patterns(self, patterns: Iterable[str], default_excludes: bool) -> None:
        patterns = [p for p in patterns if p.strip()]
        self.lines = (*(DEFAULT_EXCLUDES if default_excludes else ()), *patterns)
        self.sphinx = default_excludes
        if self.lines:
            try:
                self.spec = pathspec.GitIgnoreSpec.from_lines(self.lines)
            except Exception as exc:  # pathspec raises its own error types for a malformed pattern
                raise UsageError(f"--exclude: {exc}") from None

    def _pattern(self, rel: str, is_dir: bool) -> str | None:
        """The exclude pattern that leaves rel out (the last one that matches), or None."""
        if self.spec is None:
            return None
        result = self.spec.check_file(rel + ("/" if is_dir else ""))
        return self.lines[result.index] if result.include else None

    def _sphinx_scaffolding(self, rel: str, names: frozenset, path: Path) -> str | None:
        """What the Sphinx rule calls a file it leaves out, or None; a `!` pattern takes it back."""
        name = rel.rsplit("/", 1)[-1]
        if not self.sphinx or (self.spec and self.spec.check_file(rel).include is False):
            return None
        if name == "conf.py" and names & SPHINX_INDEXES:
            return "Sphinx conf.py"
        if name in SPHINX_MAKE:
            try:
                with open(path, "rb") as fh:
                    if b"SPHINXBUILD" in fh.read(_SNIFF_BYTES):
                        return f"Sphinx {name}"
            except OSError:
                return None
        return None

    def run(self) -> Iterator[FileItem | Skip]:
        if self._excluded(self.root_real):
            return
        if os.path.isdir(self.root):
            st = os.stat(self.root)
            self.visited[(st.st_dev, st.st_ino)] = "."
            yield from self._walk_dir(self.root, "", self.root_real, [], ())
        elif not _utf8(self.root.name):
            yield Skip(_shown(self.root), "file name is not valid UTF-8; rename it")
        else:
            yield from self._read_file(self.root, self.root.name, self.root_real)

    def _walk_dir(self, path: Path, rel: str, real: str, specs: list, ancestors: tuple) -> Iterator:
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as exc:
            yield Skip(path, f"cannot list folder: {exc.strerror or exc}")
            return
        specs = specs + _load_ignore_specs(path, rel, entries)
        ancestors = ancestors + (real,)
        names = frozenset(e.name for e in entries)
        for entry in entries:
            child = path / entry.name
            try:
                yield from self._entry(entry, child, rel, real, specs, ancestors, names)
            except OSError as exc:  # it went away or changed while walked (/proc, a build folder)
                yield Skip(_shown(child), f"cannot read: {exc.strerror or exc}")

    def _entry(
        self,
        entry: os.DirEntry,
        child: Path,
        rel: str,
        real: str,
        specs: list,
        ancestors: tuple,
        names: frozenset = frozenset(),
    ) -> Iterator:
        """What one folder entry yields: itself, its folder's files, or a Skip saying why not."""
        child_rel = f"{rel}{entry.name}"
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=True)
        except OSError as exc:
            yield Skip(_shown(child), f"cannot stat: {exc.strerror or exc}")
            return
        if is_dir and entry.name in SKIP_DIRS:
            return
        if _ignored(specs, child_rel, is_dir):
            return
        if not is_dir and not self._wanted(entry.name):
            return  # other extensions pass silently, or every image in a folder would print
        why = self._pattern(child_rel, is_dir)
        if why is None and not is_dir:
            why = self._sphinx_scaffolding(child_rel, names, child)
        if why is not None:
            yield Excluded(_shown(child), child_rel + ("/" if is_dir else ""), why)
            return
        if not _utf8(entry.name):  # a record stores its path as UTF-8 text, verbatim or not at all
            yield Skip(
                _shown(child),
                f"{'folder' if is_dir else 'file'} name is not valid UTF-8; rename it",
            )
            return
        child_real = os.path.realpath(child) if is_link else os.path.join(real, entry.name)
        if self._excluded(child_real):
            return
        if is_link:
            problem = self._symlink_problem(child, child_real, is_dir, ancestors)
            if problem:
                yield Skip(child, problem)
                return
        if is_dir:
            if is_link and not self._first_visit(child, child_rel):
                yield Skip(child, f"symlink to a folder already walked ({self._seen_as(child)})")
                return
            if not is_link:
                self._first_visit(child, child_rel)
            yield from self._walk_dir(child, child_rel + "/", child_real, specs, ancestors)
        else:
            yield from self._read_file(child, child_rel, child_real)

    blobs = False

    def _wanted(self, name: str) -> bool:
        return self.blobs or name in self.names or _extension(name) in self.exts

    def _excluded(self, real: str) -> bool:
        return any(real == ex or real.startswith(ex.rstrip(os.sep) + os.sep) for ex in self.exclude)

    def _inside_root(self, real: str) -> bool:
        return real == self.root_real or real.startswith(self.root_real.rstrip(os.sep) + os.sep)

    def _symlink_problem(
        self, link: Path, target: str, is_dir: bool, ancestors: tuple
    ) -> str | None:
        """Why a symlink is not followed, or None when the walk goes through it."""
        if not os.path.exists(link):
            return f"broken symlink (to {os.readlink(link)})"
        if not self.follow:
            if self._inside_root(target):
                return "symlink inside the root; its target is walked under its own name"
            return f"symlink to {target}, outside the root (use --follow-symlinks to include)"
        if is_dir and any(
            _within(a, target) for a in ancestors
        ):  # a link to `/` holds the walk too
            return f"symlink loop (points back to {target}, which holds this folder)"
        return None

    def _first_visit(self, path: Path, rel: str) -> bool:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        if key in self.visited:
            return False
        self.visited[key] = rel
        return True

    def _seen_as(self, path: Path) -> str:
        st = os.stat(path)
        return self.visited[(st.st_dev, st.st_ino)]

    def _read_file(self, path: Path, rel: str, real: str) -> Iterator[FileItem | Skip]:
        if not self.allow_secrets and is_credentials_file(path):
            yield Skip(path, "credentials file (use --allow-secrets to include)")
            return
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                yield Skip(path, "not a regular file")
                return
            if self.max_bytes is not None and st.st_size > self.max_bytes:
                yield Skip(path, f"{st.st_size} bytes exceeds --max-bytes {self.max_bytes}")
                return
            data = _read_bytes(path)
        except OSError as exc:
            yield Skip(path, f"cannot read: {exc.strerror or exc}")
            return
        kind = kind_of(path)
        digest = hashlib.sha256(data).hexdigest()
        if kind == "pdf":
            result = _pdf_text(data, self.max_pdf_pages)
            if isinstance(result, str):
                yield (
                    BlobItem(path, rel, len(data), digest, result)
                    if self.blobs
                    else Skip(path, result)
                )
                return
            text, pages, pages_read = result
        else:
            text = decode_text(data)
            if not isinstance(text, str):
                yield (
                    BlobItem(path, rel, len(data), digest, text.reason)
                    if self.blobs
                    else Skip(path, text.reason)
                )
                return
            pages = pages_read = None
        if not text.strip():
            yield Skip(path, "empty file" if not data else "no text")
            return
        yield FileItem(path, rel, len(data), digest, kind, pages, pages_read, _text=text)


def _within(path: str, folder: str) -> bool:
    """Is `path` the folder `folder` or below it?"""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _utf8(name: str) -> bool:
    """Can the name be stored as UTF-8 text (os gives bytes that are not UTF-8 as lone surrogates)?"""
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _shown(path: Path) -> Path:
    """The path as it can be printed: bytes that are not UTF-8 written as \\xNN."""
    return Path(shown_path(path))


def _extension(name: str) -> str:
    """ ".md" for "a.MD"; a dotfile with no other dot is its own extension (".env"), so exts can name it."""
    ext = os.path.splitext(name)[1]
    return (ext or (name if name.startswith(".") else "")).lower()


def _read_bytes(path: Path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _normalise_exts(exts: Iterable[str]) -> frozenset[str]:
    """Accepts "md", ".md" or ".MD" alike."""
    return frozenset("." + e.lower().lstrip(".") for e in exts if e.strip("."))


def _load_ignore_specs(path: Path, rel: str, entries: list[os.DirEntry]) -> list:
    """The folder's own ignore files as (base rel path, spec), in the order they apply."""
    names = {e.name for e in entries}
    specs = []
    for name in IGNORE_FILES:
        if name in names:
            try:
                lines = (path / name).read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                continue  # an unreadable ignore file ignores nothing; the files still get walked
            specs.append((rel, pathspec.GitIgnoreSpec.from_lines(lines)))
    return specs


def _ignored(specs: list, rel: str, is_dir: bool) -> bool:
    """Git's rule: the last matching pattern decides, deeper ignore files over shallower ones."""
    verdict = False
    for base, spec in specs:
        local = rel[len(base) :] + ("/" if is_dir else "")
        include = spec.check_file(local).include
        if include is not None:
            verdict = include
    return verdict


class _Undecodable:
    """Why bytes are not text, returned in place of the decoded string."""

    def __init__(self, reason: str):
        self.reason = reason


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_text(data: bytes) -> str | _Undecodable:
    """Strict decoding: UTF-8 (BOM dropped), or UTF-16/32 when a BOM says so; never a guess."""
    for bom, encoding in _BOMS:  # UTF-32 first: its LE BOM starts with UTF-16's
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(encoding)
            except UnicodeDecodeError as exc:
                return _Undecodable(
                    f"invalid {encoding.upper()[:6]} at byte {exc.start + len(bom)}"
                )
    head = data[:_SNIFF_BYTES]
    if b"\x00" in head:
        return _Undecodable("binary file")
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROL_OK)
    if head and controls / len(head) > _MAX_CONTROL_RATIO:
        return _Undecodable("binary file")
    offset = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[offset:].decode("utf-8")
    except UnicodeDecodeError as exc:
        return _Undecodable(f"invalid UTF-8 at byte {exc.start + offset}")


def _pdf_text(data: bytes, max_pages: int | None) -> tuple[str, int, int] | str:
    """(text with pages joined by form feeds, pages, pages read), or the reason it cannot be read."""
    import io

    from pypdf import PdfReader  # heavy import kept off the path of walks with no PDF

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return "encrypted PDF"
        pages = reader.pages
        count = len(pages)
        limit = count if max_pages is None else min(count, max_pages)
        texts = [(pages[i].extract_text() or "") for i in range(limit)]
    except Exception as exc:  # pypdf raises many types for damaged files; its message is the reason
        return f"cannot read PDF: {exc}"
    text = "\f".join(texts)
    if not text.strip():
        return "PDF has no extractable text (scanned images?)"
    return text, count, limit
