"""Model instances from hand-written SQL, for the few hot-path queries where the ORM's
query compilation costs more than the database (~0.5 ms a query on this class of
machine). The column list and value converters are the ORM's own, computed once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)
Converter = Callable[[Any, Any, Any], Any]


class RowLoader(Generic[M]):
    def __init__(self, model: type[M]) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [f.attname for f in self.fields]
        self._converters: list[tuple[int, list[Converter], Any]] | None = None

    def columns(self, alias: str) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{alias}.{quote(f.column)}" for f in self.fields)

    def load(self, values: Sequence[Any]) -> M:
        values = list(values[: len(self.fields)])
        for index, converters, col in self._field_converters():
            value = values[index]
            for convert in converters:
                value = convert(value, col, connection)
            values[index] = value
        return self.model.from_db(connection.alias, self.attnames, values)

    def _field_converters(self) -> list[tuple[int, list[Converter], Any]]:
        # What the SQL compiler would apply to each column, e.g. JSON decoding, or
        # SQLite's text datetimes.
        if self._converters is None:
            table = self.model._meta.db_table
            found = []
            for index, field in enumerate(self.fields):
                col = field.get_col(table)
                converters = connection.ops.get_db_converters(col) + col.get_db_converters(
                    connection
                )
                if converters:
                    found.append((index, converters, col))
            self._converters = found
        return self._converters
