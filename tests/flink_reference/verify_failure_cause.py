"""What Flink 2.3's CLI does with a failed savepoint/stop/checkpoint whose ``failure-cause``
has no, an undecodable, or a decodable ``serialized-throwable``.

Why: our server answers these operations' status; whether the CLI shows the reason
at once or polls for a minute and times out depends only on that field. This runs
the real CLI (tests/flink_tools.py) against a tiny fake REST server that answers
every operation as COMPLETED with the case's ``failure-cause``, and prints, per
case, the CLI's exit code, time, number of status requests and whether the message
appears in its output. A tool run by hand (about 5 minutes: four cases wait out the
CLI's 60 s timeout):

    /work/main/.venv/bin/python tests/flink_reference/verify_failure_cause.py
"""

from __future__ import annotations

import base64
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flink_runtime.rest.serialized_throwable import failure_cause  # noqa: E402
from tests.flink_tools import flink_cli, flink_home  # noqa: E402

JOB = "0123456789abcdef0123456789abcdef"
MESSAGE = "Savepoint refused by flink-runtime: disk full (the reason)"
# base64 of `new Exception("a plain java.lang.Exception")` serialized by the JDK (stack trace emptied).
PLAIN_EXCEPTION = (
    "rO0ABXNyABNqYXZhLmxhbmcuRXhjZXB0aW9u0P0fPho7HMQCAAB4cgATamF2YS5sYW5nLlRocm93YWJsZdXGNSc5d7jLAwAETAAF"
    "Y2F1c2V0ABVMamF2YS9sYW5nL1Rocm93YWJsZTtMAA1kZXRhaWxNZXNzYWdldAASTGphdmEvbGFuZy9TdHJpbmc7WwAKc3RhY2tU"
    "cmFjZXQAHltMamF2YS9sYW5nL1N0YWNrVHJhY2VFbGVtZW50O0wAFHN1cHByZXNzZWRFeGNlcHRpb25zdAAQTGphdmEvdXRpbC9M"
    "aXN0O3hwcQB+AAZ0ABthIHBsYWluIGphdmEubGFuZy5FeGNlcHRpb251cgAeW0xqYXZhLmxhbmcuU3RhY2tUcmFjZUVsZW1lbnQ7"
    "AkYqPDz9IjkCAAB4cAAAAABzcgAfamF2YS51dGlsLkNvbGxlY3Rpb25zJEVtcHR5TGlzdHq4F7Q8p57eAgAAeHB4"
)

CASES: dict[str, dict[str, Any]] = {
    "no serialized-throwable": {"class": "java.io.IOException", "stack-trace": f"java.io.IOException: {MESSAGE}\n"},
    "serialized-throwable not Java serialization": {
        "class": "java.io.IOException",
        "stack-trace": MESSAGE,
        "serialized-throwable": base64.b64encode(MESSAGE.encode()).decode(),
    },
    "serialized-throwable of a plain java.lang.Exception": {
        "class": "java.lang.Exception",
        "stack-trace": MESSAGE,
        "serialized-throwable": PLAIN_EXCEPTION,
    },
    "serialized-throwable from rest/serialized_throwable.py": failure_cause(MESSAGE, "java.io.IOException"),
}


class FakeFlink:
    """Answers trigger POSTs with a request id and every status GET with COMPLETED + failure."""

    def __init__(self) -> None:
        self.cause: dict[str, Any] = {}
        self.key = "failure-cause"  # the operation's field: checkpoints use "failureCause"
        self.status_requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if re.fullmatch(r"/(v1/)?jobs/[0-9a-f]{32}/(savepoints|stop|checkpoints)", self.path):
                    self._send(202, {"request-id": "f" * 32})
                else:
                    self._send(404, {"errors": ["Not found: " + self.path]})

            def do_GET(self) -> None:
                if re.fullmatch(r"/(v1/)?jobs/[0-9a-f]{32}/(savepoints|checkpoints)/f{32}", self.path):
                    fake.status_requests += 1
                    self._send(200, {"status": {"id": "COMPLETED"}, "operation": {fake.key: fake.cause}})
                else:
                    self._send(404, {"errors": ["Not found: " + self.path]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def main() -> int:
    home = flink_home()
    fake = FakeFlink()
    runs = [(name, ["savepoint", JOB, "file:///tmp/sp"], "failure-cause") for name in CASES]
    good = "serialized-throwable from rest/serialized_throwable.py"
    runs += [
        (good, ["stop", "--savepointPath", "file:///tmp/sp", JOB], "failure-cause"),
        # CheckpointInfo names the field failureCause; under failure-cause it is ignored,
        # and an operation with neither checkpointId nor failureCause does not parse.
        (good, ["checkpoint", JOB], "failure-cause"),
        (good, ["checkpoint", JOB], "failureCause"),
    ]
    results = []
    for name, args, key in runs:
        fake.cause, fake.key, fake.status_requests = CASES[name], key, 0
        began = time.monotonic()
        done = flink_cli(home, args, fake.address, timeout=180)
        output = done.stdout + done.stderr
        lines = [line for line in output.splitlines() if MESSAGE in line or "Exception" in line][:6]
        result = {
            "case": name,
            "command": "flink " + " ".join(args),
            "operation_field": key,
            "exit_code": done.returncode,
            "seconds": round(time.monotonic() - began, 1),
            "status_requests": fake.status_requests,
            "message_shown": MESSAGE in output,
            "lines": lines,
        }
        results.append(result)
        print(json.dumps(result, indent=2), flush=True)
    fake.server.shutdown()
    # The recipe must show the message wherever the field name is the one Flink reads.
    readable = [r for r in results if r["case"] == good]
    readable = [r for r in readable if r["operation_field"] == "failureCause" or "checkpoint" not in r["command"]]
    return 0 if all(r["message_shown"] for r in readable) else 1


if __name__ == "__main__":
    sys.exit(main())
