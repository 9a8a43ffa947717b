"""Bytes on disk: records and day logs, .is segments, memstore.toml, markers and tree.json.

Nothing in this package imports the index or retrieval code; it only reads and writes files.
"""
