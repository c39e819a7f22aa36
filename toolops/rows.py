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


def _prepared(instance: Model, fields: Sequence[Any], add: bool) -> list[Any]:
    return [f.get_db_prep_save(f.pre_save(instance, add), connection) for f in fields]


def insert(instances: Sequence[Model]) -> None:
    """INSERT the instances (one model) in one statement, setting their primary keys."""
    if not instances:
        return
    model = type(instances[0])
    meta = model._meta
    fields = [f for f in meta.concrete_fields if f is not meta.auto_field]
    quote = connection.ops.quote_name
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
        f"VALUES {', '.join([row] * len(instances))} RETURNING {quote(meta.pk.column)}"
    )
    for obj in instances:
        # A related object saved after it was assigned (a read's call is inserted last):
        # take its primary key now, as Model.save() does.
        obj._prepare_related_fields_for_save(operation_name="insert")
    params = [value for obj in instances for value in _prepared(obj, fields, add=True)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        pks = [r[0] for r in cursor.fetchall()]
    for obj, pk in zip(instances, pks, strict=True):
        obj.pk = pk
        obj._state.adding = False
        obj._state.db = connection.alias


def update(instance: Model, field_names: Sequence[str]) -> int:
    """UPDATE these fields of one row by primary key; the number of rows changed."""
    meta = instance._meta
    fields = [meta.get_field(name) for name in field_names]
    quote = connection.ops.quote_name
    sets = ", ".join(f"{quote(f.column)} = %s" for f in fields)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(meta.pk.column)} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [*_prepared(instance, fields, add=False), instance.pk])
        return cursor.rowcount
