"""How every console page shows JSON (args, results, undo args): one helper, so the run
page (timeline.py) and the pages in toolops/views/ and compensations/ never drift apart.
It lives here, below the views, because the run timeline needs it and traces/ must not
import toolops.views; toolops/views/common.py re-exports it for the pages."""

from __future__ import annotations

import json
from typing import Any


def pretty(value: Any) -> str:
    """`value` as indented JSON for a <pre>; None → empty."""
    if value is None:
        return ""
    return json.dumps(value, indent=2, ensure_ascii=False)
