"""Empty DataFrames without pandas, pyarrow and numpy in the process.

PySpark's `createDataFrame` imports pandas, numpy and pyarrow on every call, whatever
the data. A process that only resolves plans on empty DataFrames (the planner) never
needs them, and they are ~100 MB of its resident memory (benchmarks/README.md, "Planner
without pandas"); spark/session.py keeps py4j's numpy converters from importing them too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flink_runtime.spark.session import is_connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def empty_frame(spark: SparkSession, schema: StructType | str) -> DataFrame:
    """`spark.createDataFrame([], schema)` with the same schema (nullability included),
    built in the JVM so that pandas, numpy and pyarrow stay unimported."""
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructField, StructType

    if is_connect(spark):  # no JVM in this process
        return spark.createDataFrame([], schema)
    if isinstance(schema, str):
        parsed = DataType.fromDDL(schema)
        schema = parsed if isinstance(parsed, StructType) else StructType([StructField("value", parsed, True)])
    jvm = spark._jvm  # type: ignore[attr-defined]
    java_schema = jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json())
    java_frame = spark._jsparkSession.createDataFrame(jvm.java.util.ArrayList(), java_schema)  # type: ignore[attr-defined]
    return DataFrame(java_frame, spark)
