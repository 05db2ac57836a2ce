"""Fast bulk UPDATE of many rows with different values: one `UPDATE ... FROM (VALUES ...)` per batch.

Django's `bulk_update` builds a CASE expression per field and row, which costs seconds for the ten thousand wait
explanations a large cycle writes; this builds the SQL directly, with values prepared by the model fields (so
datetimes and JSON are adapted as Django would) and, on PostgreSQL, cast to the columns' types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection
from django.db.models import Model


def bulk_set(model: type[Model], fields: Sequence[str], rows: Sequence[tuple[Any, ...]], batch_size: int = 2000) -> int:
    """Set `fields` of each row's object: every row is (pk, value for fields[0], value for fields[1], ...)."""
    if not rows:
        return 0
    meta = model._meta
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    quote = connection.ops.quote_name
    postgres = connection.vendor == "postgresql"
    placeholder = "(" + ", ".join(f"CAST(%s AS {c.db_type(connection)})" if postgres else "%s" for c in columns) + ")"
    aliases = ", ".join(f"column{i + 1} AS c{i}" for i in range(len(columns)))
    assignments = ", ".join(f"{quote(c.column)} = v.c{i}" for i, c in enumerate(columns) if i)
    table = quote(meta.db_table)
    updated = 0
    with connection.cursor() as cursor:
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            params = [column.get_db_prep_value(value, connection, prepared=False)
                      for row in batch for column, value in zip(columns, row, strict=True)]
            values = ", ".join([placeholder] * len(batch))
            cursor.execute(
                f"UPDATE {table} SET {assignments} FROM (SELECT {aliases} FROM (VALUES {values}) AS t) AS v "
                f"WHERE {table}.{quote(meta.pk.column)} = v.c0",
                params,
            )
            updated += cursor.rowcount
    return updated
