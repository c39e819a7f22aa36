"""The MCP server at /mcp/: ToolOps' catalog as MCP tools, every tools/call an executor
call (docs/agents.md)."""
