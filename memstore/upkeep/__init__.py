"""Looking after a store (a feature): fsck (docs/format.md, "Invariants"), stats, history, sync and
the push guard ("Merging with plain git", "The push guard"), reembed, gc ("Consolidation"),
upgrade ("Upgrading from format 1 or 2"), the git hooks of hooks/, export ("Exporting to
ContextTape") and the markers ("markers.jsonl")."""
