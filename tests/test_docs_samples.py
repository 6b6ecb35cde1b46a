"""The samples of README.md and docs/*.md that need Spark or Airflow, run for real:
```python spark``` samples execute (their MiniCluster's tasks start PySpark), and
```python dag``` samples are DAG files that Airflow's DagBag imports. The quick checks
of every sample are in tests/test_docs.py.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flink_runtime.minicluster import MiniCluster
from tests.helpers.doc_samples import ROOT, all_samples

pytestmark = pytest.mark.integration

SAMPLES = all_samples()
SPARK_SAMPLES = [s for s in SAMPLES if s.language == "python" and "spark" in s.tags]
DAG_SAMPLES = [s for s in SAMPLES if s.language == "python" and "dag" in s.tags]


def test_the_spark_samples_run_to_finished_jobs(
    minicluster: MiniCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each page's Spark samples run in order, in one namespace, in an empty working
    directory. The session's MiniCluster is only held so that its SparkSession (one per
    process) stays warm for the samples' own MiniClusters."""
    assert SPARK_SAMPLES, "the README's tour runs a pipeline"
    monkeypatch.chdir(tmp_path)
    for page in sorted({s.page for s in SPARK_SAMPLES}):
        namespace: dict[str, object] = {"__name__": "__doc_sample__"}
        output = io.StringIO()
        for sample in (s for s in SPARK_SAMPLES if s.page == page):
            with contextlib.redirect_stdout(output):
                exec(compile(sample.code, str(sample), "exec"), namespace)  # noqa: S102 - the docs' own samples
        assert "FINISHED" in output.getvalue(), f"{page.name}: {output.getvalue()!r}"
    # The README's word count: what its comment says is under counts/.
    counts: dict[str, int] = {}
    for part in (tmp_path / "counts").glob("*.csv"):
        with part.open() as rows:
            counts.update({row["word"]: int(row["n"]) for row in csv.DictReader(rows)})
    assert counts == {"to": 2, "be": 2, "or": 1, "not": 1, "that": 1, "is": 1, "the": 1, "question": 1}


def test_the_dag_samples_import_into_airflow(tmp_path: Path) -> None:
    """Each DAG sample is a file of a DAG folder that Airflow's DagBag loads without an
    import error or a template it cannot find, in a fresh interpreter with an AIRFLOW_HOME
    of its own. A `.json` job graph a sample names is put beside it, as its DAG folder
    would hold it."""
    assert DAG_SAMPLES
    dags = tmp_path / "dags"
    dags.mkdir()
    expected: set[str] = set()
    for number, sample in enumerate(DAG_SAMPLES):
        (dags / f"doc_sample_{number}.py").write_text(sample.code)
        expected.update(re.findall(r'DAG\(\s*"(\w+)"', sample.code))
        for job_file in re.findall(r'job_graph="([\w.-]+\.json)"', sample.code):
            (dags / job_file).write_text((ROOT / "examples" / "modulo-sum.json").read_text())
    script = (
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(dags)!r}, bundle_path={str(dags)!r})\n"
        "print('IMPORT_ERRORS', bag.import_errors)\n"
        "print('DAG_IDS', sorted(bag.dag_ids))\n"
    )
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": str(ROOT),
    }
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "IMPORT_ERRORS {}" in out, out
    assert f"DAG_IDS {sorted(expected)}" in out, out
    assert "Failed to resolve template" not in out, out
