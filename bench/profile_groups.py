"""The stages of bench/profile.py's table: which stage a profiled function's self time
belongs to. Pure functions over pstats' data, so that the rules can be tested alone.

A function belongs to the stage of its module: the first rule whose prefix its dotted
module name has (ToolOps' executor gets a row per module); for a C function (pstats'
file name `~`), the module its name gives (uvloop's loop, psycopg's C part, `_socket`).
A function no rule names is *transparent* when it is a C function or of the standard
library (threading, copy, re, datetime, …): its self time is split over its callers as
cProfile recorded them (the `tt` of each caller's entry) and follows each caller's
stage, so that `copy.deepcopy` called by DRF counts as DRF and `dict.get` called by the
executor as the executor. Any other function no rule names is "other". The profiler's
own functions (and bench code running in the web process) are left out of the total."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Func = tuple[str, int, str]  # pstats' key: file name, first line, function name
PROFILER = "(the profiler)"
OTHER = "other"
EXECUTOR = "toolops.executor"

# Stage, and the module prefixes that are its (a prefix matches the module itself and
# its submodules; "bench." only its submodules). Checked in this order: the first match
# wins, so that a specific module goes before its package's catch-all.
STAGES: tuple[tuple[str, str], ...] = (
    (PROFILER, "cProfile _lsprof pstats bench."),
    (
        "body parsing / JSON",
        "json _json rfc8785 rest_framework.parsers toolops.api.parsers toolops.jsonbound",
    ),
    # Django's `connections[alias]` and the URL resolver's state, thread- and task-local.
    ("context-local look-ups (asgiref.local)", "asgiref.local"),
    (
        "ASGI → Django handoff (asgiref, thread hop)",
        "asgiref concurrent.futures queue _queue asyncio.futures asyncio.threads "
        "django.core.handlers.asgi",
    ),
    ("server (uvicorn, httptools, uvloop, asyncio)", "uvicorn httptools uvloop asyncio _asyncio"),
    (
        "ASGI wrappers (channels router, toolops.asgi layers)",
        "channels toolops.asgi toolops.bodies toolops.proxies toolops.probes toolops.statics",
    ),
    (
        "Django middleware",
        "django.middleware django.utils.deprecation django.core.handlers.base "
        "django.core.handlers.exception django.contrib.sessions.middleware "
        "django.contrib.auth.middleware django.contrib.messages.middleware csp "
        "axes.middleware django_otp.middleware django_htmx toolops.csp "
        "toolops.accounts.middleware",
    ),
    ("DRF (request, auth, serializers, response)", "rest_framework drf_spectacular"),
    ("ToolOps API (toolops.api.*)", "toolops.api"),
    (
        "args validation (jsonschema)",
        "jsonschema jsonschema_specifications referencing rpds attr attrs",
    ),
    ("policy (toolops.policy, cedarpy)", "toolops.policy cedarpy"),
    ("traces / spans / otel", "traces opentelemetry toolops.otel"),
    ("database driver (psycopg)", "psycopg psycopg_pool psycopg_binary psycopg_c toolops.dbconn"),
    ("Django ORM (django.db)", "django.db"),
    ("Django (request, URLs, signals, utils)", "django"),
    (
        "downstream HTTP (urllib3, http.client)",
        "urllib3 http.client email socket _socket ssl toolops.tools.http",
    ),
    ("logging", "logging"),
    ("ToolOps other (models, rows, ids, tools, …)", "toolops compensations"),
)
_PREFIXES = tuple((stage, tuple(prefixes.split())) for stage, prefixes in STAGES)
STDLIB = frozenset(sys.stdlib_module_names) | {"builtins"}
_OWNER = re.compile(r"of '([\w.]+)' objects>$")
_BUILTIN = re.compile(r"^<built-in method ([\w.]+)>$")


def module_of(func: Func, roots: Sequence[str]) -> str | None:
    """The dotted module of a profiled function; for a C function, the dotted name its
    pstats name gives (`_socket.socket`, `builtins.isinstance`); None when nothing says
    (code compiled from a string: a dataclass's __init__, a namedtuple's __new__)."""
    filename, _, name = func
    if filename == "~":
        owner = _OWNER.search(name) or _BUILTIN.match(name)
        return owner.group(1) if owner else None
    if filename.startswith("<frozen ") and filename.endswith(">"):
        return filename[len("<frozen ") : -1]
    if filename.startswith("<"):
        return None
    relative = filename
    for root in sorted(roots, key=len, reverse=True):
        if filename.startswith(root.rstrip("/") + "/"):
            relative = filename[len(root.rstrip("/")) + 1 :]
            break
    parts = relative.removesuffix(".py").strip("/").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of_module(module: str) -> str | None:
    """The stage a module's own functions count in; None: none says (a C function's
    self time then follows its callers)."""
    if module == EXECUTOR or module.startswith(EXECUTOR + "."):
        return module
    for stage, prefixes in _PREFIXES:
        if any(_within(module, prefix) for prefix in prefixes):
            return stage
    return None


@dataclass(frozen=True)
class Overhead:
    """What profiling one call adds to the self times, in seconds: to the called
    function's, and to its caller's (measured by bench/profiled.py's calibration)."""

    callee_s: float = 0.0
    caller_s: float = 0.0


def corrected(stats: Mapping[Func, Any], overhead: Overhead) -> dict[Func, Any]:
    """`stats` with each function's self time less the profiler's cost — `callee_s` for
    each of its calls, `caller_s` for each call it made — never below zero; the callers'
    entries (the weights C functions are split by) likewise."""
    made: dict[Func, int] = {}
    for _, _, _, _, callers in stats.values():
        for caller, entry in callers.items():
            made[caller] = made.get(caller, 0) + entry[0]
    fixed: dict[Func, Any] = {}
    for func, (cc, nc, tt, ct, callers) in stats.items():
        own = tt - nc * overhead.callee_s - made.get(func, 0) * overhead.caller_s
        entries = {
            caller: (e[0], e[1], max(0.0, e[2] - e[0] * overhead.callee_s), e[3])
            for caller, e in callers.items()
        }
        fixed[func] = (cc, nc, max(0.0, own), ct, entries)
    return fixed


def _within(module: str, prefix: str) -> bool:
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


def attribute(
    stats: Mapping[Func, Any], roots: Sequence[str]
) -> tuple[list[tuple[str, float]], float]:
    """Every stage's self time in seconds, largest first, and their total — the
    profiler's own left out of both."""
    found: dict[str, float] = {}
    memo: dict[Func, dict[str, float]] = {}
    for func in stats:
        for stage, seconds in _shares(func, stats, roots, memo, 0).items():
            found[stage] = found.get(stage, 0.0) + seconds
    found.pop(PROFILER, None)
    total = sum(found.values())
    return sorted(found.items(), key=lambda item: -item[1]), total


def _shares(
    func: Func,
    stats: Mapping[Func, Any],
    roots: Sequence[str],
    memo: dict[Func, dict[str, float]],
    depth: int,
) -> dict[str, float]:
    """`func`'s self time by stage: its own stage's, or split over its callers'."""
    if func in memo:
        return memo[func]
    _, _, tottime, _, callers = stats[func]
    module = module_of(func, roots)
    stage = stage_of_module(module) if module is not None else None
    if stage is None and not is_transparent(func, module):
        stage = OTHER
    if stage is None and callers and depth <= 8:
        shares = _split_over_callers(func, stats, roots, memo, depth)
    else:
        shares = {stage or OTHER: tottime}
    memo[func] = shares
    return shares


def is_transparent(func: Func, module: str | None) -> bool:
    """A function whose self time follows its callers: a C function or one of the
    standard library that no stage names, or code compiled from a string."""
    return func[0] == "~" or module is None or module.split(".")[0] in STDLIB


def _split_over_callers(
    func: Func,
    stats: Mapping[Func, Any],
    roots: Sequence[str],
    memo: dict[Func, dict[str, float]],
    depth: int,
) -> dict[str, float]:
    _, _, tottime, _, callers = stats[func]
    called_tt = sum(entry[2] for entry in callers.values())
    shares: dict[str, float] = {}
    for caller, entry in callers.items():
        weight = entry[2] / called_tt if called_tt else 1 / len(callers)
        if caller not in stats:
            caller_stages = {OTHER: 1.0}
        else:
            caller_shares = _shares(caller, stats, roots, memo, depth + 1)
            caller_total = sum(caller_shares.values())
            caller_stages = {
                s: (v / caller_total if caller_total else 1 / len(caller_shares))
                for s, v in caller_shares.items()
            }
        for stage, part in caller_stages.items():
            shares[stage] = shares.get(stage, 0.0) + tottime * weight * part
    return shares


def top_functions(
    stats: Mapping[Func, Any], roots: Sequence[str], count: int
) -> list[dict[str, Any]]:
    """The `count` functions with the most self time, the profiler's own left out."""
    rows = []
    for func, (_, calls, tottime, cumtime, _) in stats.items():
        module = module_of(func, roots)
        if module is not None and stage_of_module(module) == PROFILER:
            continue
        rows.append(
            {
                "function": func[2] if func[0] == "~" else f"{module}:{func[1]}({func[2]})",
                "calls": calls,
                "tottime_s": tottime,
                "cumtime_s": cumtime,
            }
        )
    rows.sort(key=lambda row: -row["tottime_s"])
    return rows[:count]
