"""The traces app's console pages and endpoints, one module per page."""

from __future__ import annotations
