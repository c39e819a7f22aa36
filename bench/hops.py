"""The path one write takes through ToolOps' own modules: how many times it crosses from
one module (or package) into another, measured with `sys.setprofile`.

    DATABASE_URL=postgres:///toolops_hops .venv/bin/python bench/hops.py [--fresh]
        [--depth-package] [--skip MODULE ...] [--json]

One `POST /api/v1/runs/{run}/calls` for `reserve_stock` (a compensable write; a fresh
key, no approval, a success at the first attempt) against the demo shop, served from a
thread, through Django's test client and the API's own middleware chain, as in
bench/sqlcount.py. A warm-up call first loads the policies and lazy imports. Only the
calling thread is profiled. Product modules are those of toolops, compensations and
traces (a frame's `__name__` global, else its file's path); all else is transparent.

- A *hop*: a call whose callee's module differs from the module of the nearest product
  frame below it on the stack (the caller; library frames in between are skipped).
  Calls within one module are not hops. A product call with no product frame below it
  is an *entry* (Django calling in), listed but not counted as a hop.
- A *re-entry*: a hop into a module already on the stack further down, with another
  module in between (A → B → A: a callback up the stack).
- *Data access*: a hop into a `models` module (any dotted part named `models`) or into
  a method of a Django model, queryset or manager; the hop count without them is given
  apart, as model methods are data access, not stages.
- `--skip M` makes the modules M and M.* transparent too (trivial leaves); default none.
- `--depth-package` also shows the same path with modules aggregated to their package
  (toolops.executor.pipeline → toolops.executor; a package's `__init__` is itself):
  calls within one package are then not hops.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import secrets
import sys
import tempfile
import textwrap
from pathlib import Path
from types import FrameType
from typing import Any

import django
from django.core.management import call_command
from django.db.models import Model, QuerySet
from django.db.models.manager import BaseManager
from django.test import Client, override_settings

ROOT = Path(__file__).resolve().parent.parent
# First, before this folder: bench/traces.py must not shadow the traces package.
sys.path.insert(0, str(ROOT))

from bench.db import fresh_database  # noqa: E402 - after the path is set
from bench.procs import AGENT_RATE_LIMIT  # noqa: E402
from toolops.demo.shop import start_shop  # noqa: E402

PRODUCT = ("toolops", "compensations", "traces")
DEMO_PREFIX = "http://127.0.0.1:9000"  # what the demo catalog's URLs start with
ARGS = {"sku": "D9", "qty": 1}


def module_of(frame: FrameType) -> str:
    name = frame.f_globals.get("__name__")
    if name and name != "__main__":
        return str(name)
    path = Path(frame.f_code.co_filename).resolve().with_suffix("")
    if not path.is_relative_to(ROOT):
        return ""
    parts = path.relative_to(ROOT).parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    loaded = sys.modules.get(module)
    if loaded is not None and hasattr(loaded, "__path__"):
        return module  # a package's __init__
    return module.rpartition(".")[0] or module


def is_data_access(module: str, frame: FrameType) -> bool:
    """A `models` module, or a method (or classmethod) of a model, queryset or manager."""
    if "models" in module.split("."):
        return True
    code = frame.f_code
    if not code.co_argcount or code.co_varnames[0] not in ("self", "cls"):
        return False
    first = frame.f_locals.get(code.co_varnames[0])
    kinds = (Model, QuerySet, BaseManager)
    return issubclass(first, kinds) if isinstance(first, type) else isinstance(first, kinds)


class Recorder:
    """Every call into a product module from elsewhere: the callee, its function, the
    product modules below it on the stack (nearest first, consecutive ones collapsed)."""

    def __init__(self, skip: list[str]) -> None:
        self.skip = tuple(skip)
        self.known: dict[str, bool] = {}
        self.records: list[dict[str, Any]] = []

    def product(self, module: str) -> bool:
        if module not in self.known:
            root = module.partition(".")[0]
            skipped = any(module == s or module.startswith(s + ".") for s in self.skip)
            self.known[module] = root in PRODUCT and not skipped
        return self.known[module]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        callee = module_of(frame)
        if not self.product(callee):
            return
        below: list[str] = []
        back = frame.f_back
        while back is not None:
            module = module_of(back)
            if self.product(module) and (not below or below[-1] != module):
                below.append(module)
            back = back.f_back
        if below and below[0] == callee:
            return  # within one module
        self.records.append(
            {
                "callee": callee,
                "function": frame.f_code.co_qualname,
                "below": below,
                "data": is_data_access(callee, frame),
            }
        )


def analyse(records: list[dict[str, Any]], unit: Any) -> dict[str, Any]:
    """The hops, entries, modules entered and totals, with modules mapped by `unit`."""
    hops: list[dict[str, Any]] = []
    for rec in records:
        callee = unit(rec["callee"])
        below = _collapse([unit(m) for m in rec["below"]])
        caller = below[0] if below else None
        if caller == callee:
            continue
        hops.append(
            {
                "caller": caller,
                "callee": callee,
                "function": rec["function"],
                "depth": len(below),
                "reentry": callee in below,
                "data": rec["data"],
            }
        )
    real = [h for h in hops if h["caller"] is not None]
    modules = {r["callee"] for r in records} | {r["below"][0] for r in records if r["below"]}
    plain = [h for h in hops if not h["data"]]
    stages = [h for h in plain if h["caller"] is not None]
    return {
        "hops": hops,
        "sequence": _collapse([h["callee"] for h in hops]),
        "totals": {
            "hops": len(real),
            "entries": len(hops) - len(real),
            "distinct_modules": len(modules),
            "distinct_packages": len({package_of(m) for m in modules}),
            "reentries": sum(h["reentry"] for h in real),
        },
        "without_data_access": {
            "hops": len(stages),
            "reentries": sum(h["reentry"] for h in stages),
            "sequence": _collapse([h["callee"] for h in plain]),
        },
    }


def _collapse(items: list[str]) -> list[str]:
    return [x for i, x in enumerate(items) if i == 0 or items[i - 1] != x]


def set_up(tmp: Path, fresh: bool) -> Any:
    """The database migrated, the demo shop and its catalog, an agent, a run: a client."""
    if not os.environ.get("DATABASE_URL"):
        raise SystemExit("DATABASE_URL must name the database to use (see --fresh)")
    if fresh:
        fresh_database(os.environ["DATABASE_URL"])
    _, shop_url = start_shop(port=0)
    catalog = tmp / "catalog.toml"
    demo = ROOT / "toolops" / "demo" / "catalog.toml"
    catalog.write_text(demo.read_text().replace(DEMO_PREFIX, shop_url))
    os.environ.update(TOOLOPS_TOOLS_FILE=str(catalog), DJANGO_SETTINGS_MODULE="toolops.settings")
    os.environ.setdefault("TOOLOPS_DATA_DIR", str(tmp / "data"))
    os.environ.setdefault("DJANGO_DEBUG", "0")
    django.setup()
    call_command("migrate", "--noinput", verbosity=0)
    __import__("toolops.asgi")  # as served: the builtin tools, the catalog loaded
    out = io.StringIO()
    call_command(
        "create_agent",
        f"bench-hops-{secrets.token_hex(4)}",
        "--rate-limit",
        str(AGENT_RATE_LIMIT),
        stdout=out,
    )
    token = out.getvalue().strip().splitlines()[-1].strip()
    return Client(SERVER_NAME="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {token}")


def post(client: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(path, data=json.dumps(body), content_type="application/json")
    if response.status_code not in (200, 201):
        raise SystemExit(f"{path}: {response.status_code} {response.content!r}")
    return dict(json.loads(response.content))


def measure(client: Any, skip: list[str]) -> tuple[dict[str, Any], Recorder]:
    run = f"bench-hops-{secrets.token_hex(4)}"
    post(client, "/api/v1/runs", {"run_id": run})
    path = f"/api/v1/runs/{run}/calls"
    post(client, path, {"step_index": 0, "tool": "reserve_stock", "args": ARGS})  # warm-up
    recorder = Recorder(skip)
    body = {"step_index": 1, "tool": "reserve_stock", "args": ARGS}
    sys.setprofile(recorder)
    try:
        answer = post(client, path, body)
    finally:
        sys.setprofile(None)
    keys = ("status", "attempts", "replayed", "approval")
    call = {"tool": answer.get("tool"), **{k: answer.get(k) for k in keys}}
    if tuple(call[k] for k in keys) != ("succeeded", 1, False, None):
        raise SystemExit(f"the measured call was not a first-attempt success: {call}")
    return call, recorder


def api_middleware() -> dict[str, Any]:
    """The API's own chain, as served; if it has moved, the console's, said so in the output."""
    try:
        from toolops.api.middleware import API_MIDDLEWARE
    except ImportError:
        return {}
    return {"MIDDLEWARE": list(API_MIDDLEWARE)}


def chain(modules: list[str]) -> str:
    # A no-break space before each arrow: lines break after an arrow, never before one.
    return textwrap.fill("\u00a0→ ".join(modules), 100, subsequent_indent="   ")


def print_level(title: str, level: dict[str, Any]) -> None:
    print(f"\n== {title}: hops in order (indented by product stack depth)")
    for i, hop in enumerate(level["hops"], 1):
        mark = " [re-entry]" * hop["reentry"] + " [data]" * hop["data"]
        pad, caller = "  " * hop["depth"], hop["caller"] or "(entry)"
        print(f"{i:4} {pad}{caller} → {hop['callee']} ({hop['function']}){mark}")
    print(f"\n== {title}: entered, in order (consecutive repeats collapsed)")
    print(chain(level["sequence"]))
    print(f"\n== {title}: totals")
    for name, value in level["totals"].items():
        print(f"   {name.replace('_', ' '):20} {value}")
    plain = level["without_data_access"]
    print(f"\n== {title}: without data access (models modules, model/queryset methods)")
    print(f"   hops {plain['hops']}, re-entries {plain['reentries']}")
    print(chain(plain["sequence"]))


def main() -> None:
    parser = argparse.ArgumentParser(description="Count the module hops of one write.")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--fresh", action="store_true", help="drop and create DATABASE_URL")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="MODULE",
        help="a module (and its submodules) to treat as transparent",
    )
    parser.add_argument(
        "--depth-package", action="store_true", help="also aggregate modules to packages"
    )
    options = parser.parse_args()
    skip = [s for value in options.skip for s in value.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="bench-hops-") as tmp:
        client = set_up(Path(tmp), options.fresh)
        middleware = api_middleware()
        with override_settings(**middleware):
            call, recorder = measure(client, skip)
    served = "the API's own chain" if middleware else "settings.MIDDLEWARE (the console's)"
    result = {
        "call": call,
        "middleware": served,
        "skip": skip,
        "modules": analyse(recorder.records, str),
    }
    if options.depth_package:
        result["packages"] = analyse(recorder.records, package_of)
    if options.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return
    print(f"call: {call} — middleware: {served}; skipped: {', '.join(skip) or 'none'}")
    print_level("modules", result["modules"])
    if "packages" in result:
        print_level("packages", result["packages"])


if __name__ == "__main__":
    main()
