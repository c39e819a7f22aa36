"""Spans, metrics and run timelines."""

from __future__ import annotations
