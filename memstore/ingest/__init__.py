"""Getting outside text into memory: walkers, chunkers and importers of other tools' logs."""
