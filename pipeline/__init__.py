"""Rocketport's data pipeline on Apache Spark (PySpark's Python Data Source API).

``rocketport.pipeline.register(spark)`` registers the `rocketport` source and sink (batch
and streaming, over the remoting protocol through the native client) and the
`rocketport-store` source (a store directory's CommitLog read offline). See
docs/pipeline.md.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register every Rocketport data source with this SparkSession (any session: the
    sources need no SQL setting, `spark.sql.python.filterPushdown.enabled` on or off)."""
    from .source import RocketportDataSource
    from .store_source import RocketportStoreDataSource

    spark.dataSource.register(RocketportDataSource)
    spark.dataSource.register(RocketportStoreDataSource)


__all__ = ["register"]
