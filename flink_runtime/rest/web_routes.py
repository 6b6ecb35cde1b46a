"""REST: the web dashboard's files (flink_runtime/web/static): the page at `/` and its
scripts and styles under `/web/`.

They are static and hold no cluster data: the page reads everything through the REST
API with fetch(), sending the bearer token itself. That is why the guard
(rest/guard.py) lets GET and HEAD of exactly these paths through without a token: a
browser cannot add an Authorization header to a page load.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse

from flink_runtime.rest.errors import RestError
from flink_runtime.web import ASSET_PREFIX, STATIC_DIR

# The page loads only its own files and talks only to its own server; nothing may frame
# it. Data URLs: the empty favicon. No inline scripts or styles, no eval.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Revalidate on every load (ETag), so a JobManager upgrade is seen at once.
    "Cache-Control": "no-cache",
}
_MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".md": "text/markdown"}


def _file(relative: str) -> FileResponse:
    root = STATIC_DIR.resolve()
    try:
        path = (root / relative).resolve()
        # resolve() folds "..": anything outside the folder (or a folder) is not found.
        found = path.is_relative_to(root) and path.is_file()
    except (OSError, ValueError):  # a NUL byte, a name too long
        found = False
    if not found:
        raise RestError(404, f"Not found: {ASSET_PREFIX}{relative}")
    media_type = _MEDIA_TYPES.get(path.suffix, "text/plain")
    return FileResponse(path, media_type=media_type, headers=SECURITY_HEADERS)


def web_routes() -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.api_route("/", methods=["GET", "HEAD"])
    async def dashboard() -> FileResponse:
        return _file("index.html")

    @router.api_route(ASSET_PREFIX + "{relative:path}", methods=["GET", "HEAD"])
    async def asset(relative: str) -> FileResponse:
        return _file(relative)

    return router
