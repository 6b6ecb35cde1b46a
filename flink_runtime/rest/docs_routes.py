"""REST: the OpenAPI page (`/docs`), served whole by this server, never from a CDN.

FastAPI's default page loads Swagger UI's script and styles from a CDN (jsDelivr) and
its favicon from fastapi.tiangolo.com: on a cluster without internet access the page
stays blank. Here the same page (FastAPI's get_swagger_ui_html) points at Swagger UI's
files from the `fastapi-offline` package (Swagger UI 5, which reads the OpenAPI 3.1 that
FastAPI writes), served under `/docs/assets/`, and turns off
Swagger UI's online validator badge (an image from validator.swagger.io), so every
request the page makes goes to this server. ReDoc (also CDN-only) is not served.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from flink_runtime.rest.errors import RestError

ASSETS = "/docs/assets/"
# The only files the page loads; nothing else of the package is served.
_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}


def swagger_ui_dir() -> Path | None:
    """Swagger UI's files from the fastapi-offline package (None when it is not installed)."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    return Path(fastapi_offline.__file__).parent / "static"


def docs_routes(title: str, openapi_url: str = "/openapi.json") -> APIRouter:
    router = APIRouter(include_in_schema=False)
    assets = swagger_ui_dir()

    @router.get("/docs")
    async def docs() -> HTMLResponse:
        if assets is None:
            raise RestError(
                404,
                "The OpenAPI page needs Swagger UI's files from the fastapi-offline package, which is not "
                f"installed (pip install fastapi-offline); the OpenAPI document itself is at {openapi_url}.",
            )
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} - Swagger UI",
            swagger_js_url=ASSETS + "swagger-ui-bundle.js",
            swagger_css_url=ASSETS + "swagger-ui.css",
            swagger_favicon_url=ASSETS + "favicon.png",
            swagger_ui_parameters={"validatorUrl": None},
        )

    @router.get(ASSETS + "{name}")
    async def asset(name: str) -> FileResponse:
        if assets is None or name not in _FILES:
            raise RestError(404, f"Not found: {ASSETS}{name}")
        return FileResponse(assets / name, media_type=_FILES[name], headers={"Cache-Control": "max-age=86400"})

    return router
