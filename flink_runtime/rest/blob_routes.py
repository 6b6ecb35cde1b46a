"""REST: job libraries, uploaded and kept by content hash (flink_runtime.blob)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, JSONResponse

from flink_runtime.blob import MAX_BLOB_BYTES, InvalidBlob, name_problem, parse_blob_key
from flink_runtime.blob.store import BlobStoreFull
from flink_runtime.rest.errors import RestError

if TYPE_CHECKING:
    from flink_runtime.jobmanager.restful_gateway import RestfulGateway


def blob_routes(gateway: RestfulGateway, rest_url: str) -> APIRouter:
    router = APIRouter()
    blob_store = gateway.blob_store

    @router.post(
        "/blobs",
        status_code=201,
        summary="Upload a job library (.py, .zip, .whl, .egg); answers its blob key",
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            }
        },
    )
    async def upload_blob(request: Request, name: str = Query(..., description="The file name.")) -> JSONResponse:
        problem = name_problem(name)
        if problem:
            raise RestError(400, f"Cannot store the library: {problem}.")
        limit = MAX_BLOB_BYTES
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise RestError(413, f"{name} is {declared} bytes; a library may have at most {limit} bytes.")
        # Streamed to a file as it arrives (hashed on the way): four concurrent 250 MiB
        # uploads once held a gigabyte in the JobManager's memory.
        upload = await asyncio.to_thread(blob_store.upload, name)
        try:
            async for chunk in request.stream():
                if upload.size + len(chunk) > limit:
                    raise RestError(413, f"{name} is larger than the {limit} bytes a library may have.")
                upload.write(chunk)
            key = await asyncio.to_thread(upload.commit)
        except BlobStoreFull as exc:
            raise RestError(413, f"Cannot store the library: {exc}.") from None
        except InvalidBlob as exc:
            raise RestError(400, f"Cannot store the library: {exc}.") from None
        finally:
            upload.abort()  # a no-op once committed
        return JSONResponse({"key": str(key)}, status_code=201, headers={"Location": f"{rest_url}{key.url_path}"})

    @router.get("/blobs/{sha256}/{name}", summary="Download a job library by its blob key")
    async def download_blob(sha256: str, name: str) -> FileResponse:
        try:
            key = parse_blob_key(f"blob:{sha256}/{name}")
        except ValueError:
            key = None
        path = blob_store.get(key) if key is not None else None
        if path is None:
            raise RestError(404, f"No library blob:{sha256}/{name} on this JobManager; upload it with POST /blobs.")
        return FileResponse(path, media_type="application/octet-stream", filename=name)

    return router
