"""The ``spark-log`` Python Data Source: one class for reads, writes, streams and batches.

>>> from connectors.session import register
>>> register(spark)
>>> spark.readStream.format("spark-log").option("subscribe", "clicks").load()
>>> df.writeStream.format("spark-log").option("topic", "clicks").option("checkpointLocation", p).start()

Contract with Spark
-------------------
- ``schema()`` runs on the driver when the query is defined.  It validates every reader
  option (unknown or contradictory options raise ``InvalidConfigError`` naming the
  option) and asks the brokers for the topics' kind and schema: bytes topics read as
  Spark's Kafka source columns, typed topics as their own columns plus ``topic``,
  ``partition``, ``offset``, ``timestamp`` (``connectors.schema_mapping``).  What it
  learns is kept on the instance, which Spark pickles to the readers.
- ``reader``/``streamReader`` build the batch and streaming readers
  (``connectors.reader``); ``writer``/``streamWriter`` validate the writer options and
  the DataFrame against the topic on the driver and build the Arrow writers
  (``connectors.writer``, which also states the delivery guarantee).
- A user-given schema (``.schema(...)``) must equal the one the topic implies.
"""
from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from spark_log.errors import InvalidConfigError, NoSchemaError, SchemaMismatchError, UnknownTopicOrPartitionError

from . import client
from .options import ReaderOptions, WriterOptions
from .plan import ReadPlan
from .reader import SparkLogBatchReader, SparkLogFilteringBatchReader, SparkLogStreamReader
from .schema_mapping import bytes_source_schema, data_columns, project, spark_arrow_schema, typed_source_schema
from .writer import SparkLogBatchWriter, SparkLogStreamWriter, WriteTarget, resolve_target

__all__ = ["SparkLogDataSource"]


class SparkLogDataSource(DataSource):
    """Topics of a spark-log cluster as a Spark source and sink, format ``spark-log``."""

    @classmethod
    def name(cls) -> str:
        return "spark-log"

    def schema(self) -> StructType:
        return self._plan().schema

    def _plan(self) -> ReadPlan:
        cached: ReadPlan | None = self.__dict__.get("_read_plan")
        if cached is None:
            cached = build_plan(ReaderOptions.parse(self.options))
            self.__dict__["_read_plan"] = cached
        return cached

    def _checked_plan(self, schema: StructType) -> ReadPlan:
        plan = self._plan()
        if schema != plan.schema:
            raise SchemaMismatchError(
                f"the schema given to the reader ({schema.simpleString()}) differs from the topic's "
                f"({plan.schema.simpleString()}); use the 'columns' option to select columns"
            )
        return plan

    def reader(self, schema: StructType) -> DataSourceReader:
        plan = self._checked_plan(schema)
        return SparkLogFilteringBatchReader(plan) if plan.options.push_filters else SparkLogBatchReader(plan)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return SparkLogStreamReader(self._checked_plan(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return SparkLogBatchWriter(self._target(schema, overwrite))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return SparkLogStreamWriter(self._target(schema, overwrite))

    def _target(self, schema: StructType, overwrite: bool) -> WriteTarget:
        if overwrite:
            raise InvalidConfigError("a topic is append-only: save mode 'overwrite' is not supported; use 'append'")
        return resolve_target(WriterOptions.parse(self.options), spark_arrow_schema(schema))


def build_plan(options: ReaderOptions) -> ReadPlan:
    """Resolve what a query reads (driver side): kind, schema, projection.

    Every topic a query reads at start must have the same kind and, when typed, the same
    schema.  A ``subscribePattern`` that matches nothing yet reads as bytes topics.
    Subscribed topics that do not exist are left out (a deleted one is the reader's
    data loss); ``UnknownTopicOrPartitionError`` when none of them exists.
    """
    admin = client.open_admin(options)
    try:
        if options.subscribe is not None:
            # a subscribed topic deleted under a query (restarted or not) is data loss, which
            # the reader reports or skips (failOnDataLoss); the schema comes from the others
            existing = set(client.list_topics(admin))
            topics = [t for t in options.subscribe if t in existing]
            if not topics:
                raise UnknownTopicOrPartitionError(
                    f"option 'subscribe': no topic of {', '.join(options.subscribe)} exists; create it first")
        elif options.assign is not None:
            topics = sorted({tp.topic for tp in options.assign})
        else:
            import re

            topics = sorted(t for t in client.list_topics(admin) if re.fullmatch(options.subscribe_pattern or "", t))
        infos = [client.describe(admin, topic) for topic in topics]
    finally:
        admin.close()
    schemaless = [info.name for info in infos if info.kind == "typed" and info.schema is None]
    if schemaless:
        raise NoSchemaError(
            f"typed topic(s) {', '.join(schemaless)} have no schema yet, so there is nothing to read and no columns "
            f"to infer: write to them first (the spark-log sink registers the DataFrame's schema) or register one "
            f"with Admin.register_schema")
    kinds = {(info.kind, info.schema if info.kind == "typed" else None) for info in infos}
    if len(kinds) > 1:
        listing = ", ".join(f"{i.name} ({i.kind})" for i in infos)
        raise SchemaMismatchError(f"a query reads topics of one schema; these differ: {listing}")
    kind, topic_schema = next(iter(kinds)) if kinds else ("bytes", None)
    if kind == "typed":
        if options.include_headers:
            raise InvalidConfigError("option 'includeHeaders' applies to bytes topics only", key="includeHeaders")
        assert topic_schema is not None
        full = typed_source_schema(topic_schema)
    else:
        full = bytes_source_schema(include_headers=options.include_headers)
    schema = project(full, options.columns)
    return ReadPlan(
        options=options,
        kind=kind,
        schema=schema,
        fetch_columns=tuple(data_columns(schema, bytes_topic=kind == "bytes")),
        topic_schema=topic_schema,
        timestamp_types={info.name: info.timestamp_type for info in infos},
    )
