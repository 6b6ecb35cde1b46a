"""User functions for Spark pipeline tests (importable as tests.helpers.transforms:...)."""

from __future__ import annotations

import os
from pathlib import Path


def fail_on_third_split(df):
    """Fails exactly once, on the third non-empty split any task processes.

    The marker directory (env FLINK_RUNTIME_TEST_MARKERS) counts calls across the
    processes of one test; the JobManager's plan check calls us on empty input, which
    does not count.
    """
    if df.isEmpty():
        return df
    markers = Path(os.environ["FLINK_RUNTIME_TEST_MARKERS"])
    markers.mkdir(parents=True, exist_ok=True)
    call = len(list(markers.glob("call-*")))
    (markers / f"call-{call}-{os.getpid()}-{id(df)}").touch()
    if call == 2 and not (markers / "failed").exists():
        (markers / "failed").touch()
        raise RuntimeError("injected failure on the third split")
    return df


def not_a_dataframe(df):
    return 42


def slow(df):
    """Half a second per call: makes a split take long enough to be interrupted."""
    import time

    time.sleep(0.5)
    return df


def slow_to_plan(df):
    """Keeps a job INITIALIZING for 12 s (longer than POST /jobs waits, 10 s): the
    JobManager's plan check (empty input) sleeps, as a plan that starts a SparkSession
    on a fresh cluster does; each split then takes 0.3 s."""
    import time

    time.sleep(12 if df.isEmpty() else 0.3)
    return df


def endless(df):
    """A Spark job of hours (10^12 rows summed): only cancelling its Spark job ends it."""
    return df.crossJoin(df.sparkSession.range(10**12).selectExpr("sum(id * 7 % 13) AS total"))


def wait_for_release(df):
    """Holds the task until the file `release` appears in FLINK_RUNTIME_TEST_MARKERS (at
    most two minutes): lets a test act between one source finishing and another one.
    The JobManager's plan check (empty input) passes at once."""
    import time

    release = Path(os.environ["FLINK_RUNTIME_TEST_MARKERS"]) / "release"
    if df.isEmpty():
        return df
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return df


def make_links(df):
    """A job's own code redirecting one of its paths after submit: the first time data
    arrives that is not read from under one of the links to make, it creates the symbolic
    links listed in FLINK_RUNTIME_TEST_MARKERS/links (`link<TAB>target`, one a line),
    replacing a directory there. The plan check's empty input makes none."""
    import shutil
    from urllib.parse import urlparse

    if df.isEmpty():
        return df
    read = [urlparse(path).path for path in df.inputFiles()]
    for line in (Path(os.environ["FLINK_RUNTIME_TEST_MARKERS"]) / "links").read_text().splitlines():
        link, target = line.split("\t")
        if os.path.islink(link) or any(path.startswith(link + "/") for path in read):
            continue
        if os.path.isdir(link):
            shutil.rmtree(link)
        os.symlink(target, link)
    return df


def fail_on_data(df):
    """Fails every task that gets rows (the JobManager's plan check, on empty input, passes)."""
    if not df.isEmpty():
        raise RuntimeError("injected failure: this job must change nothing")
    return df


def marks_and_waits(df):
    """Leaves a file named after the process that calls it (in env FLINK_RUNTIME_TEST_MARKERS),
    then waits 4 s: a test kills that process meanwhile (a TaskManager resolving the plan)."""
    import time

    markers = Path(os.environ["FLINK_RUNTIME_TEST_MARKERS"])
    markers.mkdir(parents=True, exist_ok=True)
    (markers / f"resolving-{os.getpid()}").touch()
    time.sleep(4)
    return df


def raises_value_error(df):
    raise ValueError("a transform that refuses its input")
