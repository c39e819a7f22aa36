"""The console's pages, one module per area: runs, tools and their policies, unknown
outcomes, tool health and circuit breakers. `common` holds what every page shares."""
