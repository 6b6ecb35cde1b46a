"""The web dashboard the JobManager serves at `/` (routes.py, files under static/)."""

# Where the page's own scripts, styles and vendored libraries are served; the REST guard
# lets GET/HEAD of `/` and of this prefix through without a token (they hold no data).
ASSET_PREFIX = "/web/"
