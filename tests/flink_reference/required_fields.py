"""Which fields of the recorded answers Flink 2.3's CLI cannot do without.

Why: Flink's client parses each answer into a typed Java class (Jackson, unknown
fields ignored, null for a primitive refused), so a field our server leaves out may
break the CLI. This replays the answers recorded in ``recorded/cli_requests.json``
from a fake REST server, each time with one field removed (or set to null), runs the
real CLI action, and writes which variants it still accepts to
``recorded/cli_required_fields.json``. A tool run by hand (about 2 minutes):

    /work/main/.venv/bin/python tests/flink_reference/required_fields.py

The CLI runs with ``rest.retry.max-attempts: 0``: an answer it cannot parse is an
IOException, which it otherwise retries 20 times, 3 s apart.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.flink_tools import flink_cli, flink_home, private_conf_dir  # noqa: E402

RECORDED = Path(__file__).resolve().parent / "recorded"
JOB = "0123456789abcdef0123456789abcdef"
TRIGGER = "f" * 32
MISSING = object()


class Fake:
    """Answers by (method, path pattern) from a table the caller swaps between runs."""

    def __init__(self) -> None:
        self.routes: list[tuple[str, str, int, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, body = 404, {"errors": [f"Not found: {self.path}"]}
                for method, pattern, route_status, route_body in fake.routes:
                    if method == self.command and re.fullmatch(pattern, self.path):
                        status, body = route_status, route_body
                        break
                data = b"" if body is MISSING else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def recorded_answer(label: str, method: str) -> Any:
    for entry in json.loads((RECORDED / "cli_requests.json").read_text()):
        if entry["label"] == label:
            return [r for r in entry["requests"] if r["method"] == method][-1]["response"]
    raise KeyError(label)


def without(document: Any, path: tuple[str, ...], null: bool) -> Any:
    """A copy of document with the field at path removed (or set to null); lists: every item."""
    document = copy.deepcopy(document)

    def visit(node: Any, rest: tuple[str, ...]) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item, rest)
            return
        if not isinstance(node, dict) or rest[0] not in node:
            return
        if len(rest) > 1:
            visit(node[rest[0]], rest[1:])
        elif null:
            node[rest[0]] = None
        else:
            del node[rest[0]]

    visit(document, path)
    return document


def leaf_paths(document: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(document, list):
        return leaf_paths(document[0], prefix) if document else []
    if not isinstance(document, dict):
        return []
    paths = []
    for key, value in document.items():
        paths.append((*prefix, key))
        paths += leaf_paths(value, (*prefix, key))
    return paths


def main() -> int:
    home = flink_home()
    fake = Fake()
    conf = private_conf_dir(home, settings={"rest.retry.max-attempts": 0, "client.timeout": "20 s"})
    overview = recorded_answer("list after all ended", "GET")
    savepoint_done = recorded_answer("savepoint", "GET")
    checkpoint_done = recorded_answer("checkpoint", "GET")
    trigger = {"request-id": TRIGGER}
    jobs_path = r"/v1/jobs/overview"
    op = rf"/v1/jobs/{JOB}/(savepoints|stop|checkpoints)"
    status = rf"/v1/jobs/{JOB}/(savepoints|checkpoints)/{TRIGGER}"

    # (action, CLI args, routes builder from a mutated answer, the answer mutated, success text)
    actions: list[tuple[str, list[str], Any, Any, str]] = [
        ("list", ["list", "-a"], lambda a: [("GET", jobs_path, 200, a)], overview, "Terminated Jobs"),
        (
            "savepoint (status answer)",
            ["savepoint", JOB, "file:///tmp/sp"],
            lambda a: [("POST", op, 202, trigger), ("GET", status, 200, a)],
            savepoint_done,
            "Savepoint completed",
        ),
        (
            "savepoint (trigger answer)",
            ["savepoint", JOB, "file:///tmp/sp"],
            lambda a: [("POST", op, 202, a), ("GET", status, 200, savepoint_done)],
            trigger,
            "Savepoint completed",
        ),
        (
            "checkpoint (status answer)",
            ["checkpoint", JOB],
            lambda a: [("POST", op, 202, trigger), ("GET", status, 200, a)],
            checkpoint_done,
            "completed",
        ),
    ]
    results: list[dict[str, Any]] = []

    def run(action: str, args: list[str], routes: list[Any], variant: str, success: str) -> None:
        fake.routes = routes
        began = time.monotonic()
        done = flink_cli(home, args, fake.address, timeout=90, conf_dir=conf)
        output = done.stdout + done.stderr
        ok = done.returncode == 0 and success in output
        reason = ""
        if not ok:
            causes = [line for line in output.splitlines() if "Exception" in line or "Caused by" in line]
            reason = causes[-1][:300] if causes else output.strip().splitlines()[-1][:300] if output.strip() else ""
        result = {"action": action, "variant": variant, "accepted": ok, "seconds": round(time.monotonic() - began, 1)}
        if reason:
            result["error"] = reason
        results.append(result)
        print(json.dumps(result), flush=True)

    for action, args, routes, answer, success in actions:
        run(action, args, routes(answer), "as recorded", success)
        for path in leaf_paths(answer):
            for null in (False, True):
                variant = f"{'null' if null else 'without'} {'.'.join(path)}"
                run(action, args, routes(without(answer, path, null)), variant, success)
    # Cancel: Flink answers 202 with {}; what else does the CLI accept?
    cancel = rf"/v1/jobs/{JOB}\?mode=cancel"
    for variant, code, body in (("202 {}", 202, {}), ("202, empty body", 202, MISSING), ("200 {}", 200, {})):
        run("cancel", ["cancel", JOB], [("PATCH", cancel, code, body)], variant, "Cancelled job")
    (RECORDED / "cli_required_fields.json").write_text(json.dumps(results, indent=2) + "\n")
    fake.server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
