"""reader.fetch_projection: push a projection to the brokers only when it leaves out data."""
from __future__ import annotations

import pyarrow as pa
import pytest

from connectors.options import ReaderOptions
from connectors.plan import ReadPlan
from connectors.reader import fetch_projection
from connectors.schema_mapping import bytes_source_schema, data_columns, project, typed_source_schema

_TYPED = pa.schema([("id", pa.int64()), ("name", pa.string()), ("blob", pa.binary())])


def _plan(kind: str, columns: str | None, include_headers: bool = False) -> ReadPlan:
    options = {"subscribe": "t", **({"columns": columns} if columns else {})}
    full = typed_source_schema(_TYPED) if kind == "typed" else bytes_source_schema(include_headers=include_headers)
    schema = project(full, tuple(columns.split(",")) if columns else None)
    return ReadPlan(options=ReaderOptions.parse(options), kind=kind, schema=schema,
                    fetch_columns=tuple(data_columns(schema, bytes_topic=kind == "bytes")),
                    topic_schema=_TYPED if kind == "typed" else None)


@pytest.mark.parametrize(("kind", "columns", "headers", "expected"), [
    ("bytes", None, False, None),                      # key, value: whole frames
    ("bytes", None, True, None),                       # key, value, headers
    ("bytes", "value,offset", False, None),            # value read: whole frames
    ("bytes", "key,offset", False, ["key"]),           # no value: project
    ("bytes", "partition,offset", False, []),          # metadata only: project to nothing
    ("typed", None, False, None),                      # every column
    ("typed", "blob,name,id,offset", False, None),     # every column, another order
    ("typed", "id,offset", False, ["id"]),             # a subset: project
    ("typed", "offset", False, []),
])
def test_projection_is_pushed_only_when_it_drops_data(kind: str, columns: str | None, headers: bool,
                                                       expected: list[str] | None) -> None:
    assert fetch_projection(_plan(kind, columns, headers)) == expected
