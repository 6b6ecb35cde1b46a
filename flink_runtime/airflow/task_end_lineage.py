"""The OpenLineage events of a task that the triggerer ends (``end_from_trigger``).

Airflow calls its listeners (the OpenLineage provider's among them) only in a worker's
task runner, so a task ended by a TaskSuccessEvent/TaskFailedEvent would never send
its COMPLETE or FAIL event: its lineage run would stay open after the START of its
first try. Airflow's answer is to refuse ``end_from_trigger`` while listeners are
registered, which sends every deferred sensor back to a worker (a scheduler pass, a
queue and a task start: about 2 s more per sensor, measured).

For the OpenLineage listener this module keeps both: when the task defers (on the
worker, where its task, DAG and DAG run are at hand) the provider's own listener code
builds the COMPLETE and FAIL events it would send at the task's end, without sending
them; the trigger carries them (JSON) and sends the one that applies from the
triggerer, through the provider's adapter and the deployment's OpenLineage transport,
with the end's time and, for FAIL, the trigger's reason. Any other listener cannot be
stood in for: with one registered, the task resumes on a worker, and says why.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["emit_task_end_event", "listeners_needing_a_worker", "task_end_events"]

# The FAIL event is built before its error is known; the trigger puts its reason here.
_ERROR_PLACEHOLDER = "flink-runtime: the trigger's reason goes here"
_OPENLINEAGE_LISTENER = "airflow.providers.openlineage.plugins.listener.OpenLineageListener"


def _name(listener: Any) -> str:
    kind = listener if isinstance(listener, type) else type(listener)
    return f"{kind.__module__}.{kind.__qualname__}"


def _registered_listeners() -> list[Any]:
    from airflow.sdk.listener import get_listener_manager

    return list(get_listener_manager().pm.get_plugins())


def listeners_needing_a_worker() -> list[str]:
    """The registered listeners (class paths) whose task-end hooks only a worker can call:
    every one but the OpenLineage provider's, whose events the trigger sends itself."""
    return sorted({_name(listener) for listener in _registered_listeners()} - {_OPENLINEAGE_LISTENER})


def task_end_events(context: Context, log: logging.Logger | Any) -> dict[str, str] | None:
    """The COMPLETE and FAIL events (JSON, by event type) that the OpenLineage listener
    would send at this task's end on a worker, built now by that listener's own code.

    None without the OpenLineage listener, or when its emission policy sends nothing
    for this task (it would not have on a worker either). A failure to build them is
    logged and also gives None: lineage must not fail the task, as on a worker.
    """
    listener = next((item for item in _registered_listeners() if _name(item) == _OPENLINEAGE_LISTENER), None)
    if listener is None:
        return None
    try:
        return _build_events(listener, context)
    except Exception as exc:  # the provider's internals changed, say: the task goes on without them
        log.warning("Could not prepare the task's OpenLineage end events; the triggerer will send none: %s", exc)
        return None


def _build_events(listener: Any, context: Context) -> dict[str, str] | None:
    import copy

    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
    from airflow.providers.openlineage.utils.utils import get_dag_run_dag_and_task_from_ti
    from openlineage.client.serde import Serde

    built: dict[str, str] = {}

    class CapturingAdapter(OpenLineageAdapter):
        """The provider's adapter, keeping the (redacted) event instead of sending it."""

        def emit(self, event: Any) -> Any:
            redacted = self._redacter.redact(event, max_depth=20)
            built[event.eventType.value] = Serde.to_json(redacted)
            return redacted

    # The registered listener's own code (facets, extractors, emission policy), with
    # the capturing adapter, run inline instead of in a fork or thread.
    builder = copy.copy(listener)
    builder.adapter = CapturingAdapter()
    builder._execute = lambda callable, callable_name, use_fork=False: callable()
    ti = context["ti"]
    dagrun, dag, task = get_dag_run_dag_and_task_from_ti(ti)
    builder._on_task_instance_success(ti, dag, dagrun, task)
    builder._on_task_instance_failed(ti, dag, dagrun, task, _ERROR_PLACEHOLDER)
    return built or None


async def emit_task_end_event(
    events: dict[str, str], succeeded: bool, reason: str | None, log: Any, stack_trace: str | None = None
) -> None:
    """Send the prepared COMPLETE (``succeeded``) or FAIL event (with ``reason`` and the
    job's root exception as ``stack_trace``) from the triggerer, stamped with the current
    time, as the listener would have at the end."""
    event_type = "COMPLETE" if succeeded else "FAIL"
    prepared = events.get(event_type)
    if prepared is None:
        return
    from airflow.providers.openlineage import conf as openlineage_conf

    if openlineage_conf.is_disabled():
        log.warning(
            "The task's OpenLineage %s event is not sent: OpenLineage is not configured in the triggerer "
            "(give it the workers' [openlineage] settings).",
            event_type,
        )
        return
    raw = json.loads(prepared)
    raw["eventTime"] = datetime.now(UTC).isoformat()
    if not succeeded:
        error = raw.get("run", {}).get("facets", {}).get("errorMessage")
        if error is not None:
            error["message"] = reason or "the task failed"
            if stack_trace:
                error["stackTrace"] = stack_trace
    from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter

    # The transport may block (HTTP): off the triggerer's event loop.
    await asyncio.to_thread(OpenLineageAdapter().emit, _run_event(raw))
    log.info("Sent the task's OpenLineage %s event (the OpenLineage listener would have, on a worker).", event_type)


class _Facet(dict):  # type: ignore[type-arg]
    """A facet read back from JSON: a dict (serialized as it came) whose fields also read
    as attributes, as the client's and the adapter's code read facet objects."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _facets(value: Any) -> Any:
    if isinstance(value, dict):
        return _Facet({key: _facets(item) for key, item in value.items()})
    if isinstance(value, list):
        return [_facets(item) for item in value]
    return value


def _run_event(raw: dict[str, Any]) -> Any:
    """An openlineage RunEvent from its JSON form (the client sends only RunEvent objects)."""
    from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState

    def datasets(kind: type, items: list[dict[str, Any]], extra: str) -> list[Any]:
        return [
            kind(
                namespace=item["namespace"],
                name=item["name"],
                facets=_facets(item.get("facets", {})),
                **{extra: _facets(item.get(extra, {}))},
            )
            for item in items
        ]

    return RunEvent(
        eventType=RunState(raw["eventType"]),
        eventTime=raw["eventTime"],
        run=Run(runId=raw["run"]["runId"], facets=_facets(raw["run"].get("facets", {}))),
        job=Job(
            namespace=raw["job"]["namespace"], name=raw["job"]["name"], facets=_facets(raw["job"].get("facets", {}))
        ),
        inputs=datasets(InputDataset, raw.get("inputs", []), "inputFacets"),
        outputs=datasets(OutputDataset, raw.get("outputs", []), "outputFacets"),
        producer=raw.get("producer", ""),
    )
