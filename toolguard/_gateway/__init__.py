"""``toolguard mcp-proxy``: the MCP approval gateway."""
