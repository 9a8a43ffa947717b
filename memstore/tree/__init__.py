"""The topic tree: assignment, fan-out, reorganization, diff and context synthesis."""
