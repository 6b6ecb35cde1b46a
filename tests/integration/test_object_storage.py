"""Object storage without its Hadoop connector: a clear error that says what to add.

PySpark ships Hadoop's client but not its object-storage connectors (hadoop-aws for
s3a://, hadoop-azure for abfs://, Google's gcs-connector for gs://). A job that names
such a path on a cluster without the connector must fail with what to add
(`spark.jars.packages` and the matching version), not with a Java
ClassNotFoundException from deep inside Hadoop. No network is needed: the connector's
class is missing before anything is contacted.
"""

from __future__ import annotations

import pytest

from flink_runtime.client import JobClient, RestClientError
from flink_runtime.minicluster import MiniCluster
from flink_runtime.pipeline import Pipeline

pytestmark = pytest.mark.integration


def test_an_s3a_source_without_hadoop_aws_names_the_package_to_add(minicluster: MiniCluster) -> None:
    pipeline = Pipeline("s3a word count", parallelism=1)
    (
        pipeline.read_csv("s3a://flink-runtime-test-bucket/in/*.csv", schema="word STRING")
        .key_by("word")
        .agg("count(*) AS n")
        .write_json("s3a://flink-runtime-test-bucket/out", mode="overwrite")
    )
    with JobClient(minicluster.rest_url, timeout=60) as client:
        try:
            job_id = client.submit(pipeline.job_graph())
        except RestClientError as error:
            message = str(error)
        else:
            status = client.wait(job_id, timeout=120)
            assert status.value == "FAILED"
            message = client.exceptions(job_id)["root-exception"] or ""
    assert "spark.jars.packages: org.apache.hadoop:hadoop-aws:3." in message, message
    assert "s3a://flink-runtime-test-bucket/in/*.csv" in message
    assert "Traceback" not in message.split("\n")[0]
