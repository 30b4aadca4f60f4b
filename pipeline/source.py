"""The `rocketport` data source: Spark's entry point to the readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from .batch import BatchReader
from .options import ReadOptions
from .schema import DDL


class RocketportDataSource(DataSource):
    """``spark.read.format("rocketport").option("namesrv", ...).option("topic", ...)``"""

    @classmethod
    def name(cls) -> str:
        return "rocketport"

    def schema(self) -> str:
        return DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(ReadOptions.parse(self.options))
