"""The disposable index in `.memstore/` (ground): SQLite FTS5 records and a time-ordered vector
matrix, with every SQL statement of the product (docs/format.md, "The index (derived)").

It reads the store's files (never writes them) and is rebuilt day by day when they change.
"""
