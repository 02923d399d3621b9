"""Serve one viewer page on 127.0.0.1 (never on other interfaces: runs hold prompts and data)."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

from rlmkit.errors import UserError


class PageServer(http.server.ThreadingHTTPServer):
    """Answers GET / (and /index.html) with the page; everything else is 404."""

    daemon_threads = True

    def __init__(self, page: Path, port: int = 0):
        self.page = Path(page)
        try:
            super().__init__(("127.0.0.1", port), _PageHandler)
        except OSError as exc:
            raise UserError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from exc

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def start_in_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, name="rlmkit-view", daemon=True)
        thread.start()
        return thread


class _PageHandler(http.server.BaseHTTPRequestHandler):
    server: PageServer

    def do_GET(self) -> None:  # http.server's naming
        if self.path.split("?", 1)[0] not in ("/", "/index.html"):
            self.send_error(404)
            return
        # read per request, so re-running `rlmkit view --no-serve` refreshes a served page
        body = self.server.page.read_bytes()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # stay quiet: the CLI prints the URL
        pass
