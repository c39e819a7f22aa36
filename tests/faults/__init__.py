"""Faults injected into real parts: a TCP fault proxy, and the tests that use it."""
