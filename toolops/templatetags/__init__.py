"""Template tags the console's pages share (load them by module name)."""
