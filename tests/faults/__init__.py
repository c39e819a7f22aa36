"""Whole-service faults: a dependency restarted or unreachable, clocks apart."""
