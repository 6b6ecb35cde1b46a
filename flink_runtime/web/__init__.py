"""The web dashboard the JobManager serves at `/`: static files (static/), served by
rest/web_routes.py. This package holds no code the REST layer would have to call back."""

from pathlib import Path

# Where the page's own scripts, styles and vendored libraries are served; the REST guard
# lets GET/HEAD of `/` and of this prefix through without a token (they hold no data).
ASSET_PREFIX = "/web/"
STATIC_DIR = Path(__file__).parent / "static"
