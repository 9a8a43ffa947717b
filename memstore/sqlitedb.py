"""The SQLite every memstore database is opened with: one driver for the whole process.

pysqlite3 (the `pysqlite3-binary` wheel on Linux x86-64, a recent SQLite built in) where it is
installed, else Python's own sqlite3 — the same choice sqlite-utils makes, so a connection this
module opens and the sqlite-utils code that wraps it (memstore/index/build.py) agree on the driver
and its exception classes. Two SQLite libraries must never open one file in one process: each keeps
its own POSIX locks, and closing a file in one drops the other's, so every module opens its
databases through this one.

`CONTENTLESS_DELETE`: this SQLite (3.43 or later) keeps a full-text index without a copy of the
text it indexes and still deletes from it (FTS5's contentless_delete). The index then holds the
terms only, not every record's text a second time (the text is in the day logs already): for the
100k LongMemEval dev turns 37 MB of full-text index against 162 MB, and a third less CPU to fill
it (docs/scale.md). Where the SQLite is older the full-text table keeps its copy, and the index
says which kind it is (memstore/index/fresh.py, SCHEMA_ID), so an index made by one kind of
SQLite is rebuilt, not misread, by the other.

This module imports nothing of memstore's: every layer may use it.
"""

from __future__ import annotations

try:
    from pysqlite3 import dbapi2 as sqlite3
except ImportError:
    import sqlite3

CONTENTLESS_DELETE = sqlite3.sqlite_version_info >= (3, 43, 0)

__all__ = ["sqlite3", "CONTENTLESS_DELETE"]
