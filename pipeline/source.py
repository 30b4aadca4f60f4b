"""The `rocketport` data source: Spark's entry point to the readers and writers.

Spark runs each step of a query's planning (the source's schema, its reader, its
partitions) in a Python worker that imports this module, so it imports only what the
step at hand needs: the readers and writers (the client, numpy, pyarrow.compute: about
0.3 s of imports on a quiet machine) are imported by the method that returns them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .options import OptionError, ReadOptions, WriteOptions
from .schema import DDL

if TYPE_CHECKING:
    from .batch import BatchReader
    from .stream import StreamReader
    from .writer import BatchWriter, StreamWriter


class RocketportDataSource(DataSource):
    """``spark.read.format("rocketport").option("namesrv", ...).option("topic", ...)``"""

    @classmethod
    def name(cls) -> str:
        return "rocketport"

    def schema(self) -> str:
        return DDL

    def reader(self, schema: StructType) -> BatchReader:
        from .batch import BatchReader
        return BatchReader(ReadOptions.parse(self.options))

    def streamReader(self, schema: StructType) -> StreamReader:
        from .stream import StreamReader
        return StreamReader(ReadOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        from .writer import BatchWriter
        if overwrite:
            raise OptionError("a topic cannot be overwritten: use mode('append')")
        return BatchWriter(WriteOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        from .writer import StreamWriter
        # the dedup keys of a replayed micro-batch must be those of its first run, so the id
        # must outlive the driver: a fresh one here would make every restart's replay new
        writer_id = self.options.get("writerId") or self.options.get("checkpointLocation")
        if not writer_id:
            raise OptionError("a streaming write needs .option('checkpointLocation', ...) on the "
                              "query (or .option('writerId', ...)): its replayed batches must "
                              "carry the keys of their first run")
        return StreamWriter(WriteOptions.parse(self.options), schema, writer_id)
