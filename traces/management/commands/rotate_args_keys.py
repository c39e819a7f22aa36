"""Re-encrypt every sealed args row, sealed result and console webhook with the first key of
TOOLOPS_ARGS_KEYS (MultiFernet.rotate), so that the older keys can then be dropped.

Rotation: put a new key first in TOOLOPS_ARGS_KEYS and keep the old ones after it,
restart the processes (they now seal with the new key and still open the old rows), run
this command, then drop the old keys. Safe to run again, and beside live traffic: rows
are done in batches, each in its own transaction, and a row is rewritten only if it still
holds the token that was read (a result recorded meanwhile is not overwritten)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from toolops.models import ToolCall
from toolops.notify.models import Webhook
from traces.models import SealedArgs
from traces.vault import VaultError, rotate


class Command(BaseCommand):
    help = "Re-encrypt sealed args and results with the first key of TOOLOPS_ARGS_KEYS."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch-size", type=int, default=500, help="Rows per transaction (default 500)."
        )

    def handle(self, *args: Any, batch_size: int, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        sealed, bad_sealed = self._rotate(SealedArgs, "token", batch_size)
        results, bad_results = self._rotate(ToolCall, "result_sealed", batch_size)
        # A console webhook's URL and secret are sealed with the same keys (notify/hooks.py).
        hooks, bad_hooks = self._rotate(Webhook, "sealed", batch_size)
        self.stdout.write(
            f"Re-encrypted {sealed} sealed args, {results} sealed results and {hooks} "
            "console webhooks with the first key of TOOLOPS_ARGS_KEYS."
        )
        if bad_sealed or bad_results or bad_hooks:
            raise CommandError(
                f"{bad_sealed} sealed args, {bad_results} sealed results and {bad_hooks} "
                "console webhooks could not be decrypted by any key in TOOLOPS_ARGS_KEYS "
                "and were left as they are: keep the key that sealed them until they are "
                "rotated or purged (a webhook: removed and added again)."
            )

    def _rotate(self, model: Any, field: str, batch_size: int) -> tuple[int, int]:
        done = bad = 0
        last: Any = None
        rows = model.objects.exclude(**{field: ""}).order_by("pk").values_list("pk", field)
        while True:
            batch = list((rows if last is None else rows.filter(pk__gt=last))[:batch_size])
            if not batch:
                return done, bad
            last = batch[-1][0]
            with transaction.atomic():
                for pk, token in batch:
                    try:
                        fresh = rotate(token)
                    except VaultError:
                        bad += 1
                        continue
                    # Only if unchanged since read: a row sealed meanwhile is already fresh.
                    done += model.objects.filter(pk=pk, **{field: token}).update(**{field: fresh})
