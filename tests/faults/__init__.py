"""Faults injected into real parts: a TCP fault proxy, crash points, whole-service faults
(a dependency restarted or unreachable, clocks apart), and the tests that use them."""
