"""The framework floor: a bare DRF endpoint doing the three writes a call needs."""

from __future__ import annotations
