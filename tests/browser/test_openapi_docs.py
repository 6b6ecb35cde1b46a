"""The OpenAPI page (`/docs`) renders with the network cut off from every other host.

Chromium resolves no host name but the server's own address (--host-resolver-rules), as
on a cluster without internet access; the page must still list the operations, and
every request it made must have gone to the server itself (Swagger UI's files come from
the swagger-ui-bundle package: rest/docs_routes.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flink_runtime.minicluster import MiniCluster
from tests.browser.conftest import chromium, network_responses, wait_until

pytestmark = pytest.mark.integration

# Every name resolves to nothing except the loopback address the MiniCluster serves on.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"


def test_docs_render_the_operations_offline(minicluster: MiniCluster, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver = chromium(performance_log=True, arguments=[OFFLINE])
    try:
        driver.get(f"{minicluster.rest_url}/docs")

        def operations() -> list[Any]:
            return driver.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")

        wait_until("the operations listed on /docs", lambda: len(operations()) > 20, timeout=30)
        paths = {element.text.replace("\u200b", "") for element in operations()}
        assert "/jobs/overview" in paths and "/jobs/{job_id}" in paths, sorted(paths)
        driver.save_screenshot(str(tmp_path / "docs.png"))
        # Inline images of Swagger UI's styles (data: URLs) are not requests to anyone.
        requests = [(url, status) for url, status in network_responses(driver) if not url.startswith("data:")]
        assert requests, "the page made no request at all"
        elsewhere = [(url, status) for url, status in requests if not url.startswith(minicluster.rest_url)]
        assert elsewhere == [], elsewhere
        failed = [(url, status) for url, status in requests if status == 0 or status >= 400]
        assert failed == [], failed
    finally:
        driver.quit()
