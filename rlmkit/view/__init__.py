"""The trajectory viewer: runs in, one self-contained HTML page out (``rlmkit view``)."""

from rlmkit.view.render import build_payload, find_logs, load_runs, render_page, render_runs, write_page
from rlmkit.view.serve import PageServer

__all__ = [
    "PageServer",
    "build_payload",
    "find_logs",
    "load_runs",
    "render_page",
    "render_runs",
    "write_page",
]
