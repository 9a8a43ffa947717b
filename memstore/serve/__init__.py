"""The store served to others (a face): the HTTP API and web page (`http`, `web/`) and MCP for agents
(`mcp`), calling the public `Store` verbs only; docs/serve.md and docs/security.md ("Serving a
store") say what each allows."""
