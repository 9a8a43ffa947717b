"""The disposable cache in `.memstore/`: SQLite FTS5 records and a time-ordered vector matrix.

It reads the store's files (never writes them) and is rebuilt day by day when they change.
"""
