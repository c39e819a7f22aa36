"""Demo downstream services that ToolOps' demo and test suite call as real HTTP tools."""
