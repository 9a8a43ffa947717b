"""The topic tree's logic (a feature): placement, naming, fan-out, reorganization, diff, rendering
and forgetting in op lines. Nouns: topics and their op log (docs/format.md, "tree/ — topic tree
operations"), whose bytes memstore/format/ reads and writes."""
