"""Bytes on disk (ground): each file of a store and nothing else. Nouns and their sections of
docs/format.md: the layout and ids ("Layout", "Ids"), memstore.toml, records and day logs
("Records"), packs and sealed vectors ("Packs"), format-1 segments ("Segments"), the topic tree's
topics and op log ("tree/ — topic tree operations"), markers ("markers.jsonl"), tombstones
("forgotten.jsonl").

Nothing in this package imports the index, a feature or the store; it reads and writes files.
"""
