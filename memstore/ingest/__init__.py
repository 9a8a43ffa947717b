"""Getting outside things into memory (a feature): walkers, chunkers and importers of other tools'
logs. Nouns: the record each becomes (docs/format.md, "Records"), what is done with bad items
("Input files") and where a document came from ("Document sources")."""
