"""A local SparkSession set up as the pipeline needs it on a small machine.

The settings are the ones measured to matter (`../shared/reference/spark.md`): workers run
this interpreter (else they may lack pyarrow or this package), Spark binds loopback, no UI,
two shuffle partitions. Rocketport's sources are registered; they need no other setting
(`rocketport.pipeline.register` works on any session).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(app: str = "rocketport", master: str = "local[2]", **conf: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from . import register

    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
