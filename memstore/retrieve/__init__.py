"""Reading (a feature): search (exact, vector, fused), recall by time phrase, where we are now,
context within a token budget, and chat through an LLM. Nouns: the hit and its fields (docs/format.md,
"Records"; docs/python-api.md for the result types), read from the index ("The index (derived)")."""
