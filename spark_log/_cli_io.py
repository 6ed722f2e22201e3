"""File input, record output and progress bars of the ``spark-log`` command line (part of
``cli.py``).

``produce --file PATH [--format parquet|csv|jsonl] [--key-column C]``: the file is read with
pyarrow (``.parquet``, ``.csv``, ``.jsonl``/``.ndjson``/``.json`` lines, or ``--format``) and
sent in slices of ``--chunk-rows`` rows with ``Producer.send_batch``.  A typed topic takes
the file's columns as they are (its schema must fit); a bytes topic takes ``key``/``value``
columns when the file has a ``value`` column, else each row becomes a JSON object as the
value (keyed by ``--key-column`` when given).

``consume --format text|table|json|csv``: ``text`` (default) is one value a line, its
bytes as they are (``--print-key``: key, tab, value; ``null`` for a missing one), as Kafka's
console consumer writes them; a typed topic's row as a JSON object.  ``json`` is one JSON
object a record (topic, partition, offset, timestamp, key and the value, or a typed topic's
columns); ``csv`` a header, then one row a record; ``table`` a table (rich) of what was
read, printed once the command stops.  These three never alter bytes: a bytes topic's key
or value that is UTF-8 is given as text, else in base64, and the record says so:
``"key_encoding": "base64"`` / ``"value_encoding": "base64"`` in JSON (absent: text), the
``key_encoding`` and ``value_encoding`` columns in csv and table (empty: text).  A typed
topic's binary columns are always base64, as Spark's ``to_json`` gives them.

Progress bars (rich, on stderr): ``produce --file`` (rows sent of the file's rows),
``topics compact --wait`` (partitions settled), ``topics reassign --wait`` (offsets the new
replicas copied, plus one a replica once it is in sync) and ``dev up`` (nodes answering,
then brokers every node sees live).  ``--progress`` forces them on, ``--no-progress``
off; by default they show when stderr is a terminal.
"""
from __future__ import annotations

import base64
import csv
import datetime as dt
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa

from .arrays import binary_array
from .errors import InvalidConfigError
from .progress import progress as progress
from .progress import progress_steps as progress_steps

if TYPE_CHECKING:
    from ._consumer import ConsumerRecord

__all__ = ["read_table", "progress", "RecordWriter", "FORMATS", "FILE_FORMATS"]

FORMATS = ("text", "table", "json", "csv")
FILE_FORMATS = ("parquet", "csv", "jsonl")
_SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl",
             ".json": "jsonl"}


def read_table(path: str, fmt: str | None) -> pa.Table:
    """The rows of ``path`` (``fmt`` None: from its suffix); ``InvalidConfigError`` when it
    cannot be read."""
    file = Path(path)
    kind = fmt or _SUFFIXES.get(file.suffix.lower())
    if kind is None:
        raise InvalidConfigError(f"cannot tell the format of {path!r}: name it .parquet, .csv or .jsonl, or pass --format",
                                 key="format")
    if not file.is_file():
        raise InvalidConfigError(f"no such file: {path}", key="file")
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(file)
        if kind == "csv":
            import pyarrow.csv as pcsv

            return pcsv.read_csv(file)
        import pyarrow.json as pjson

        return pjson.read_json(file)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InvalidConfigError(f"cannot read {path} as {kind}: {exc}", key="file") from None


def bytes_rows(table: pa.Table, key_column: str | None) -> pa.Table:
    """A bytes topic's ``key``/``value`` table from ``table`` (module docstring)."""
    if "value" in table.column_names:
        if key_column is not None:
            raise InvalidConfigError("--key-column applies to a file without a value column: this file's rows are "
                                     "records (its key column keys them)", key="key-column")
        return table.select([c for c in ("key", "value", "timestamp") if c in table.column_names])
    if key_column is not None and key_column not in table.column_names:
        raise InvalidConfigError(f"--key-column {key_column!r} is not a column of the file "
                                 f"({', '.join(table.column_names)})", key="key-column")
    rows = table.to_pylist()
    values = [json.dumps(row, default=str).encode() for row in rows]
    columns: dict[str, Any] = {"value": binary_array(values)}
    if key_column is not None:
        columns["key"] = binary_array([None if r[key_column] is None else str(r[key_column]).encode() for r in rows])
    return pa.table(columns)


def _text(value: Any) -> str:
    """A csv or table cell (and JSON's fallback): a typed column's bytes in base64."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    return str(value)


def _str_or_base64(value: Any) -> str:
    return base64.b64encode(value).decode("ascii") if isinstance(value, bytes) else str(value)


def _bytes_field(data: bytes | None) -> tuple[str | None, str | None]:
    """A bytes topic's key or value as ``(text, encoding)``: UTF-8 as it is (encoding
    None), anything else in base64 (encoding ``"base64"``)."""
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


class RecordWriter:
    """Writes records to the binary stream ``out`` in one of ``FORMATS`` (module
    docstring); the formats other than ``text`` in UTF-8."""

    def __init__(self, fmt: str, out: BinaryIO, *, print_key: bool) -> None:
        if fmt not in FORMATS:
            raise InvalidConfigError(f"--format must be one of {', '.join(FORMATS)}", key="format")
        self.fmt = fmt
        self.out = out
        self.print_key = print_key
        self._columns: list[str] | None = None
        self._rows: list[list[str]] = []

    def _text_line(self, record: ConsumerRecord) -> bytes:
        if isinstance(record.value, dict):
            return json.dumps(record.value, default=_str_or_base64).encode()
        value = record.value if record.value is not None else b"null"
        if self.print_key:
            return (record.key if record.key is not None else b"null") + b"\t" + value
        return bytes(value)

    def _fields(self, record: ConsumerRecord) -> dict[str, Any]:
        fields: dict[str, Any] = {"topic": record.topic, "partition": record.partition, "offset": record.offset,
                                  "timestamp": record.timestamp}
        if isinstance(record.value, dict):
            fields.update(record.value)
            return fields
        fields["key"], key_encoding = _bytes_field(record.key)
        fields["value"], value_encoding = _bytes_field(record.value)
        if self.fmt != "json":  # fixed columns: empty for text
            fields["key_encoding"], fields["value_encoding"] = key_encoding or "", value_encoding or ""
        else:
            if key_encoding is not None:
                fields["key_encoding"] = key_encoding
            if value_encoding is not None:
                fields["value_encoding"] = value_encoding
        return fields

    def write(self, record: ConsumerRecord) -> None:
        if self.fmt == "text":
            self.out.write(self._text_line(record) + b"\n")
            return
        fields = self._fields(record)
        if self.fmt == "json":
            self.out.write(json.dumps(fields, default=_text).encode() + b"\n")
            return
        if self._columns is None:
            self._columns = list(fields)
            if self.fmt == "csv":
                self._write_csv(self._columns)
        row = [_text(fields.get(c)) for c in self._columns]
        if self.fmt == "csv":
            self._write_csv(row)
        else:
            self._rows.append(row)

    def _write_csv(self, row: list[str]) -> None:
        line = io.StringIO()
        csv.writer(line, lineterminator="\n").writerow(row)
        self.out.write(line.getvalue().encode())

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        if self.fmt != "table":
            self.out.flush()
            return
        from rich.console import Console
        from rich.table import Table

        table = Table(*(self._columns or ["topic", "partition", "offset", "timestamp", "key", "value"]))
        for row in self._rows:
            table.add_row(*row)
        buffer = io.StringIO()
        Console(file=buffer, width=200, force_terminal=False, color_system=None).print(table)
        self.out.write(buffer.getvalue().encode())
        self.out.flush()
