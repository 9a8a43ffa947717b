"""The store served to others: the HTTP API and web page (`http`, `web/`) and MCP for agents (`mcp`)."""
