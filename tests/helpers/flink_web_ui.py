"""Apache Flink's own web dashboard in front of our REST API, for browser tests.

Flink's dashboard is an Angular app that the JobManager serves from the `web/` folder of
flink-dist's jar; the `apache-flink` wheel ships that jar (tests/flink_tools.py installs
it), so the very files a Flink 2.3 user sees are at hand. The app reads the REST API
relative to its own address (its BASE_URL is "."), so a small HTTP server that answers
the app's files itself and passes every other request on to our REST API, unchanged,
is all it takes to run Flink's UI against our cluster.

`flink_web_dir()` unpacks the files once per machine (into the tool cache, beside the
cached Flink install); `FlinkWebUI` is the server, a context manager on a free port.
"""

from __future__ import annotations

import http.client
import http.server
import mimetypes
import shutil
import threading
import urllib.parse
import zipfile
from pathlib import Path
from types import TracebackType

from tests.flink_tools import FLINK_VERSION, _locked, cache_root, flink_home

STAMP = ".complete"
# Request headers passed on to the REST API: what a REST answer depends on.
_PASSED_ON = ("accept", "content-type", "authorization", "range")
# Answer headers passed back to the browser.
_PASSED_BACK = ("content-type", "content-range", "accept-ranges", "location", "www-authenticate", "retry-after")


def flink_web_dir(version: str = FLINK_VERSION) -> Path:
    """The folder with Flink's web dashboard (index.html, its scripts and assets),
    unpacked from the wheel's flink-dist jar on first use."""
    target = cache_root() / f"flink-web-{version}"
    if (target / STAMP).is_file():
        return target
    with _locked(target.with_name(target.name + ".lock")):
        if (target / STAMP).is_file():
            return target
        jars = sorted((flink_home(version) / "lib").glob("flink-dist*.jar"))
        if not jars:
            raise FileNotFoundError(f"no flink-dist jar under {flink_home(version) / 'lib'}")
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        with zipfile.ZipFile(jars[0]) as jar:
            for entry in jar.infolist():
                if not entry.filename.startswith("web/") or entry.is_dir():
                    continue
                destination = (target / entry.filename[len("web/") :]).resolve()
                if not destination.is_relative_to(target.resolve()):
                    continue  # a hostile entry name: never written outside the folder
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(jar.read(entry))
        if not (target / "index.html").is_file():
            raise FileNotFoundError(f"{jars[0]} has no web/index.html: is this Flink {version}'s flink-dist?")
        (target / STAMP).write_text(version + "\n")
    return target


class FlinkWebUI:
    """Serves Flink's dashboard at `url` and passes REST calls on to `rest_url`.

    `token`: sent as `Authorization: Bearer` on every call passed on (Flink's UI has no
    way to send one itself). Every REST call passed on is recorded in `calls` as
    (method, path, status), for a test to look at besides the browser's own log.
    """

    def __init__(self, rest_url: str, token: str = "", web_dir: Path | None = None) -> None:
        parsed = urllib.parse.urlsplit(rest_url)
        self.rest_host = parsed.hostname or "127.0.0.1"
        self.rest_port = parsed.port or 80
        self.token = token
        self.web_dir = (web_dir or flink_web_dir()).resolve()
        self.calls: list[tuple[str, str, int]] = []
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="flink-web-ui", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FlinkWebUI:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _static_file(self, path: str) -> Path | None:
        relative = urllib.parse.unquote(path).lstrip("/") or "index.html"
        candidate = (self.web_dir / relative).resolve()
        if candidate.is_relative_to(self.web_dir) and candidate.is_file():
            return candidate
        return None

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        ui = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                path = urllib.parse.urlsplit(self.path).path
                static = ui._static_file(path) if self.command in ("GET", "HEAD") else None
                if static is not None:
                    body = static.read_bytes()
                    media_type = mimetypes.guess_type(static.name)[0] or "application/octet-stream"
                    self._send(200, {"Content-Type": media_type}, body)
                    return
                self._pass_on()

            def _pass_on(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {name: self.headers[name] for name in _PASSED_ON if self.headers.get(name)}
                if ui.token:
                    headers["Authorization"] = f"Bearer {ui.token}"
                connection = http.client.HTTPConnection(ui.rest_host, ui.rest_port, timeout=60)
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    answer = connection.getresponse()
                    data = answer.read()
                    passed = {name: answer.headers[name] for name in _PASSED_BACK if answer.headers.get(name)}
                    status = answer.status
                except OSError as exc:
                    status, passed = 502, {"Content-Type": "application/json"}
                    data = f'{{"errors": ["the REST API did not answer: {exc}"]}}'.encode()
                finally:
                    connection.close()
                ui.calls.append((self.command, self.path, status))
                self._send(status, passed, data)

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        return Handler
