"""Chaos runs (issue 18): a real stack under random faults, its history checked."""
