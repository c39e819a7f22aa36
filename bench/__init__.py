"""The benchmark: `make bench` (see README.md)."""

from __future__ import annotations
