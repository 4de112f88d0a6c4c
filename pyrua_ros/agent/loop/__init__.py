"""The cell loop: the arms, the tools a model calls, the MCP tool server."""
