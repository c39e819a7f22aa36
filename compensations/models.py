"""Saga compensations and dead-letter tickets."""

from __future__ import annotations
