"""Looking after a store: fsck, stats, history, sync, reembed, gc, upgrade, hooks, export and the markers."""
