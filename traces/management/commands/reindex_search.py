"""Write the console search's index of business keys (traces/search.py) again, under the
current TOOLOPS_SEARCH_KEY, for every recorded call of a tool the catalog marks with
searchable fields.

Run it after changing TOOLOPS_SEARCH_KEY (or SECRET_KEY, when the search key is derived
from it: until then, rows written under the old key find nothing), or after marking more
fields searchable. Safe to run again, and beside live traffic: calls are done in batches,
each call's rows replaced in one transaction."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from toolops.models import ToolCall
from toolops.tools import registry
from traces.search import reindex, searches


class Command(BaseCommand):
    help = "Rebuild the search index of business keys under the current TOOLOPS_SEARCH_KEY."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size", type=int, default=500, help="Calls per transaction (default 500)."
        )

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        specs = {s.name: s for s in registry.load().values() if searches(s)}
        calls = (
            ToolCall.objects.filter(tool__in=specs)
            .exclude(status__in=ToolCall.WAITING)
            .only("run_id", "tool", "args", "result", "result_sealed", "call_id")
            .order_by("pk")
        )
        done = written = 0
        last = 0
        while True:
            batch = list(calls.filter(pk__gt=last)[:batch_size])
            if not batch:
                break
            last = batch[-1].pk
            with transaction.atomic():
                written += reindex(batch, specs.get)
            done += len(batch)
        tools = ", ".join(sorted(specs)) or "no tool has searchable fields"
        self.stdout.write(
            f"Indexed {written} searchable value{'s' if written != 1 else ''} of {done} "
            f"call{'s' if done != 1 else ''} ({tools})."
        )
