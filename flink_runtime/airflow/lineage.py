"""What a flink-runtime job reads and writes, for lineage and data-aware scheduling.

Pure functions from a JobGraph (and, once the job has ended, its ``GET /jobs/:id``
answer) to data: the files its sources read and its sinks write, named the way
OpenLineage and Airflow Assets name files; the task's XCom result; and the
``OperatorLineage`` SubmitJobOperator reports. The operator only calls these.

Naming follows the OpenLineage naming spec (https://openlineage.io/docs/spec/naming):
a local path is namespace ``file`` and its absolute path (as Airflow's own file
Assets translate); ``file://host/p`` is ``file://host``; ``s3a://b/k`` (and s3, s3n)
is ``s3://b`` and ``k``; ``gs://b/k`` is ``gs://b``; ``hdfs://nn:8020/p`` is
``hdfs://nn:8020`` and ``/p``; any other scheme ``scheme://authority`` and the path.
A source's glob (``in/*.csv``) names the directory before its first wildcard: the
dataset is the folder, whatever files it holds today. Relative local paths are made
absolute against the worker's working directory, which is the cluster's too for the
embedded cluster; give absolute paths or URIs when the cluster runs elsewhere.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from flink_runtime.io import jdbc
from flink_runtime.jobgraph.jobgraph import JobGraph

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage

__all__ = [
    "DataLocation",
    "asset_uri",
    "dataset_name",
    "job_graph_of",
    "job_result",
    "log_outputs",
    "operator_lineage",
    "record_asset_events",
    "schema_fields",
    "sinks_of",
    "sources_of",
]

# The schema of a text source (Spark's text reader): one string column.
TEXT_SCHEMA = "value STRING"
# The built-in test sink writes JSON files under config["path"].
_COLLECT_SINK = "collect-sink"
_WILDCARDS = re.compile(r"[*?\[{]")
# Schemes whose authority is a bucket or container: the object key has no leading slash.
_BUCKET_SCHEMES = {"s3": "s3", "s3a": "s3", "s3n": "s3", "gs": "gs", "gcs": "gs"}
_CONTAINER_SCHEMES = {"abfs", "abfss", "wasb", "wasbs"}
# What a URI path may hold as it is (RFC 3986 pchar and "/"); the rest is percent-encoded.
_URI_PATH_SAFE = "/=:@!$&'()*+,;~-._"


@dataclass(frozen=True)
class DataLocation:
    """One source or sink of a job: where (as the JobGraph names it), in which format."""

    vertex_id: str
    path: str
    format: str
    # Spark DDL ("id BIGINT, name STRING") when the JobGraph declares the columns.
    schema: str | None = None

    @property
    def namespace(self) -> str:
        return dataset_name(self.path)[0]

    @property
    def name(self) -> str:
        return dataset_name(self.path)[1]

    @property
    def uri(self) -> str:
        """The Airflow Asset URI of this location."""
        return asset_uri(self.path)


# -- the JobGraph ----------------------------------------------------------------------------------------


def job_graph_of(source: Any) -> JobGraph:
    """The JobGraph of what SubmitJobOperator submits: a JobGraph, a Pipeline, a JSON-like
    dict, JSON text or bytes, or the path of a .json file. Raises ValueError (or the
    JobGraph's own InvalidJobGraph) saying what is wrong."""
    if isinstance(source, JobGraph):
        return source
    if callable(getattr(source, "job_graph", None)):  # a Pipeline
        return source.job_graph()
    if isinstance(source, Mapping):
        return JobGraph.from_dict(dict(source))
    if isinstance(source, bytes):
        return JobGraph.from_json(source)
    if isinstance(source, str):
        text = source.strip()
        if text.startswith("{"):
            return JobGraph.from_json(text)
        if text.endswith(".json") and Path(text).is_file():
            return JobGraph.from_json(Path(text).read_bytes())
        raise ValueError(f"not a JobGraph: a string that is neither JSON nor a readable .json file ({text[:80]!r})")
    raise ValueError(f"not a JobGraph: {type(source).__name__}")


def sources_of(graph: JobGraph) -> list[DataLocation]:
    """Every path a Spark source vertex reads (one per path), in vertex order."""
    locations = []
    for vertex in graph.vertices:
        source = vertex.config.get("source")
        if not isinstance(source, Mapping):
            continue
        file_format = str(source.get("format", "unknown"))
        schema = source.get("schema") if isinstance(source.get("schema"), str) else None
        if file_format == "text":
            schema = TEXT_SCHEMA
        if file_format == "jdbc":
            locations.extend(_jdbc_location(vertex.id, source))
            continue
        paths = source.get("paths")
        for path in [paths] if isinstance(paths, str) else paths if isinstance(paths, list) else []:
            if isinstance(path, str) and path.strip():
                locations.append(DataLocation(vertex.id, path.strip(), file_format, schema))
    return _unique(locations)


def sinks_of(graph: JobGraph) -> list[DataLocation]:
    """Every sink of the job (a Spark vertex's ``sink``, the built-in collect-sink), in vertex order."""
    locations = []
    for vertex in graph.vertices:
        sink = vertex.config.get("sink")
        if isinstance(sink, Mapping) and sink.get("format") == "jdbc":
            locations.extend(_jdbc_location(vertex.id, sink))
        elif isinstance(sink, Mapping) and isinstance(sink.get("path"), str) and sink["path"].strip():
            locations.append(DataLocation(vertex.id, sink["path"].strip(), str(sink.get("format", "unknown"))))
        elif vertex.invokable == _COLLECT_SINK and isinstance(vertex.config.get("path"), str):
            locations.append(DataLocation(vertex.id, vertex.config["path"], "json"))
    return locations


def _jdbc_location(vertex_id: str, spec: Mapping[str, Any]) -> list[DataLocation]:
    """A JDBC table as `postgres://host:port/database.schema.table` (a query: `database.query`),
    which dataset_name splits as the OpenLineage naming spec names PostgreSQL tables."""
    try:
        parsed = jdbc.parse_url(spec.get("url"))  # type: ignore[arg-type]
        name = jdbc.dataset_name(spec["url"], spec.get("table"))
    except (jdbc.JdbcError, KeyError):
        return []  # refused at submit, saying why
    return [DataLocation(vertex_id, f"{parsed.namespace}/{name}", "jdbc")]


def _unique(locations: list[DataLocation]) -> list[DataLocation]:
    """One entry per dataset: two globs of one folder, or one folder read twice, are one input."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for location in locations:
        key = (location.namespace, location.name)
        if key not in seen:
            seen.add(key)
            unique.append(location)
    return unique


# -- naming ----------------------------------------------------------------------------------------------


def dataset_name(path: str) -> tuple[str, str]:
    """(OpenLineage namespace, name) of a file path or URI (see the module)."""
    parts = urlsplit(path)
    scheme = parts.scheme.lower()
    if len(scheme) <= 1:  # no scheme, or a Windows drive letter
        return "file", _local_path(path)
    location = _without_glob(parts.path)
    if scheme == "file":
        host = parts.netloc if parts.netloc not in ("", "localhost") else ""
        return (f"file://{host}" if host else "file"), posixpath.normpath(location or "/")
    if scheme in _BUCKET_SCHEMES:
        return f"{_BUCKET_SCHEMES[scheme]}://{parts.netloc}", location.strip("/") or "/"
    if scheme == "postgres":  # a JDBC table: `database.schema.table` (_jdbc_location)
        return f"postgres://{parts.netloc}", parts.path.lstrip("/")
    if scheme in _CONTAINER_SCHEMES:
        return f"{scheme}://{parts.netloc}", location.strip("/") or "/"
    return f"{scheme}://{parts.netloc}", posixpath.normpath(location or "/")


def asset_uri(path: str) -> str:
    """The Airflow Asset URI of a file path or URI: ``file:///abs/path`` for a local path,
    ``s3://`` for s3a/s3n, ``gs://`` for gcs, others as OpenLineage names them."""
    namespace, name = dataset_name(path)
    # A URI's path is percent-encoded: a space, '#' or '?' in a folder name would otherwise
    # end the path (Airflow drops a URI's fragment) and the event would name another asset.
    name = quote(name, safe=_URI_PATH_SAFE)
    if namespace == "file":
        return f"file://{name}"
    if namespace.startswith("postgres://"):  # Airflow's form: postgres://host:port/database/schema/table
        return f"{namespace}/{name.replace('.', '/')}"
    separator = "" if name.startswith("/") else "/"
    return f"{namespace}{separator}{name}"


def _local_path(path: str) -> str:
    return posixpath.normpath(posixpath.join(os.getcwd(), _without_glob(path)))


def _without_glob(path: str) -> str:
    """The directory part of ``path`` before its first wildcard (``path`` if it has none)."""
    match = _WILDCARDS.search(path)
    if match is None:
        return path.rstrip("/") or path
    return posixpath.dirname(path[: match.start()]) or "."


# -- schemas ---------------------------------------------------------------------------------------------


def schema_fields(ddl: str) -> list[tuple[str, str, str | None]]:
    """(name, type, comment) of each column of a Spark DDL schema, e.g.
    ``"id BIGINT, price DECIMAL(10,2) COMMENT 'in EUR', tags ARRAY<STRING>"``.
    Commas inside <...> and (...) do not split; backquoted names keep their spaces."""
    fields = []
    for column in _split_top_level(ddl):
        column = column.strip()
        if not column:
            continue
        if column.startswith("`"):
            end = column.index("`", 1) if "`" in column[1:] else len(column)
            name, rest = column[1:end], column[end + 1 :]
        else:
            name, _, rest = column.partition(" ")
            name = name.rstrip(":")
        rest = rest.strip().lstrip(":").strip()
        comment = None
        match = re.search(r"\s+COMMENT\s+(['\"])(.*)\1\s*$", rest, flags=re.IGNORECASE)
        if match:
            comment, rest = match.group(2), rest[: match.start()]
        rest = re.sub(r"\s+NOT\s+NULL\s*$", "", rest, flags=re.IGNORECASE).strip()
        fields.append((name, rest.upper() if rest else "UNKNOWN", comment))
    return fields


def _split_top_level(text: str) -> list[str]:
    parts, depth, current, quote = [], 0, [], ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(char)
    parts.append("".join(current))
    return parts


# -- results ---------------------------------------------------------------------------------------------


def sink_metrics(details: Mapping[str, Any] | None) -> dict[str, tuple[int, int]]:
    """vertex id -> (records, bytes) written, from ``GET /jobs/:id``'s vertex metrics.

    A sink vertex's ``write-records`` are the rows it produced (once, however many
    outputs) and its ``write-bytes`` the bytes of the files it wrote: its sink's files,
    since a Pipeline's sink vertex feeds no other vertex."""
    metrics = {}
    for vertex in (details or {}).get("vertices", []):
        values = vertex.get("metrics") or {}
        metrics[str(vertex.get("id"))] = (int(values.get("write-records", 0)), int(values.get("write-bytes", 0)))
    return metrics


def job_result(
    job_id: str,
    state: str,
    job_url: str,
    sinks: Sequence[DataLocation],
    details: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """SubmitJobOperator's XCom: ``{"job_id", "state", "job_url", "outputs": [{"path",
    "format", "uri", "records", "bytes"}]}``. Records and bytes are None without
    ``details`` (the job was not awaited) or while the job has not FINISHED: a sink
    publishes its files only then."""
    counted = sink_metrics(details) if state == "FINISHED" else {}
    outputs = []
    for sink in sinks:
        records, size = counted.get(sink.vertex_id, (None, None))
        outputs.append({"path": sink.path, "format": sink.format, "uri": sink.uri, "records": records, "bytes": size})
    return {"job_id": job_id, "state": state, "job_url": job_url, "outputs": outputs}


def log_outputs(result: Mapping[str, Any], log: Any) -> None:
    """One task-log line per output the job wrote."""
    for out in result["outputs"]:
        if out["records"] is not None:
            log.info(
                "Job %s wrote %d records (%d bytes) to %s", result["job_id"], out["records"], out["bytes"], out["uri"]
            )


# -- OpenLineage -----------------------------------------------------------------------------------------


def operator_lineage(
    sources: Sequence[DataLocation],
    sinks: Sequence[DataLocation],
    result: Mapping[str, Any] | None = None,
) -> OperatorLineage:
    """The job's inputs and outputs as OpenLineage datasets (a schema facet where the
    JobGraph declares one), the job id and URL as an ``externalQuery`` run facet, and,
    from a FINISHED job's ``result`` (``job_result``), each output's rowCount and size.
    Needs apache-airflow-providers-openlineage (ImportError otherwise)."""
    from airflow.providers.common.compat.openlineage.facet import (
        ExternalQueryRunFacet,
        InputDataset,
        OutputDataset,
        OutputStatisticsOutputDatasetFacet,
    )
    from airflow.providers.openlineage.extractors import OperatorLineage

    inputs = [InputDataset(namespace=s.namespace, name=s.name, facets=_dataset_facets(s)) for s in sources]
    counted = {(o["path"], o["format"]): o for o in (result or {}).get("outputs", [])}
    outputs = []
    for sink in sinks:
        output_facets = {}
        written = counted.get((sink.path, sink.format))
        if written is not None and written.get("records") is not None:
            output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
                rowCount=written["records"], size=written["bytes"]
            )
        outputs.append(
            OutputDataset(
                namespace=sink.namespace, name=sink.name, facets=_dataset_facets(sink), outputFacets=output_facets
            )
        )
    run_facets = {}
    if result is not None:
        run_facets["externalQuery"] = ExternalQueryRunFacet(
            externalQueryId=str(result["job_id"]), source=str(result["job_url"])
        )
    return OperatorLineage(inputs=inputs, outputs=outputs, run_facets=run_facets)


def _dataset_facets(location: DataLocation) -> dict[str, Any]:
    from airflow.providers.common.compat.openlineage.facet import SchemaDatasetFacet, SchemaDatasetFacetFields

    if not location.schema:
        return {}
    try:
        fields = schema_fields(location.schema)
    except ValueError:
        return {}  # a schema Spark would refuse: the job fails at submit, saying why
    return {
        "schema": SchemaDatasetFacet(
            fields=[SchemaDatasetFacetFields(name=n, type=t, description=c) for n, t, c in fields]
        )
    }


# -- Airflow Assets --------------------------------------------------------------------------------------


def record_asset_events(outlets: Sequence[Any], outlet_events: Any, result: Mapping[str, Any], log: Any) -> None:
    """Fill a successful task's asset events from its job's ``result`` (``job_result``).

    Every ``AssetAlias`` among ``outlets`` gets one event per output, for
    ``Asset(output["uri"])``; an ``Asset`` outlet whose URI is an output's gets that
    output's extra. The extra: ``job_id``, ``records``, ``bytes``, ``format``. Nothing is
    added before the job FINISHED: a sink publishes its files only then.
    """
    from airflow.sdk import Asset, AssetAlias

    if outlet_events is None or not outlets:
        return
    aliases = [outlet for outlet in outlets if isinstance(outlet, AssetAlias)]
    if result["state"] != "FINISHED":
        if aliases:
            log.info(
                "Job %s is %s: its outputs are not written yet, so no asset events", result["job_id"], result["state"]
            )
        return
    events: dict[str, tuple[Any, dict[str, Any]]] = {}
    for output in result["outputs"]:
        extra = {key: output[key] for key in ("records", "bytes", "format")} | {"job_id": result["job_id"]}
        try:
            asset = Asset(uri=output["uri"])
        except ValueError as exc:  # a URI Airflow refuses: lineage still names it
            log.warning("No asset event for output %s: %s", output["uri"], exc)
            continue
        events[asset.uri] = (asset, extra)
    for outlet in outlets:
        if isinstance(outlet, Asset):
            if outlet.uri in events:
                outlet_events[outlet].extra.update(events[outlet.uri][1])
            else:
                log.warning(
                    "Outlet %s is none of the job's outputs (%s); Airflow records its event without the job's extra",
                    outlet.uri,
                    ", ".join(events) or "none",
                )
    for alias in aliases:
        for asset, extra in events.values():
            outlet_events[alias].add(asset, extra=extra)
        log.info("Asset alias %r: events for %s", alias.name, ", ".join(events) or "no output")
