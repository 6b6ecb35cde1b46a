"""Empty DataFrames and py4j calls without pandas, pyarrow and numpy in the process.

PySpark's `createDataFrame` imports pandas, numpy and pyarrow on every call, whatever
the data, and its numpy input converters import them (through `pyspark.testing.utils`)
on the first py4j call that passes an argument. A process that only resolves plans on
empty DataFrames (the planner) never needs them, and they are ~100 MB of its resident
memory (benchmarks/README.md, "Planner memory"). A job's own code that uses them still
gets them: it imports them itself, and the converters then work as before.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

_NUMPY_CONVERTERS = ("NumpyArrayConverter", "NumpyScalarConverter")


class _OnlyOnceNumpyIsLoaded:
    """A numpy converter asked only when numpy is imported: no argument can be a numpy
    value before, and asking imports pandas, pyarrow and numpy."""

    def __init__(self, converter: Any) -> None:
        self.converter = converter

    def can_convert(self, obj: Any) -> bool:
        return "numpy" in sys.modules and self.converter.can_convert(obj)

    def convert(self, obj: Any, gateway_client: Any) -> Any:
        return self.converter.convert(obj, gateway_client)


def defer_numpy_converters() -> None:
    """Wrap PySpark's numpy input converters (registered when pyspark.sql.types is
    imported) so that py4j calls do not import numpy; idempotent."""
    import pyspark.sql.types  # noqa: F401  (registers the converters)
    from py4j import protocol

    protocol.INPUT_CONVERTER[:] = [
        _OnlyOnceNumpyIsLoaded(converter) if type(converter).__name__ in _NUMPY_CONVERTERS else converter
        for converter in protocol.INPUT_CONVERTER
    ]


def empty_frame(spark: SparkSession, schema: StructType | str) -> DataFrame:
    """`spark.createDataFrame([], schema)` with the same schema (nullability included),
    built in the JVM so that pandas, numpy and pyarrow stay unimported."""
    from pyspark.sql import DataFrame
    from pyspark.sql.types import DataType, StructField, StructType

    if type(spark).__module__.startswith("pyspark.sql.connect"):  # no JVM in this process
        return spark.createDataFrame([], schema)
    if isinstance(schema, str):
        parsed = DataType.fromDDL(schema)
        schema = parsed if isinstance(parsed, StructType) else StructType([StructField("value", parsed, True)])
    jvm = spark._jvm  # type: ignore[attr-defined]
    java_schema = jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json())
    java_frame = spark._jsparkSession.createDataFrame(jvm.java.util.ArrayList(), java_schema)  # type: ignore[attr-defined]
    return DataFrame(java_frame, spark)
