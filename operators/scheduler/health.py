"""``/healthz`` of ``kbatch run``: answered from the live state, never from a cache.

200 with ``{"leader": ..., "synced": ..., "sessions": ...}`` while the scheduling
loop is alive (a standby replica is healthy too); 503 once it has died.
"""

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Report = Callable[[], tuple[bool, dict[str, Any]]]  # (alive, details)


class HealthServer:
    def __init__(self, address: str, report: Report) -> None:
        host, _, port = address.rpartition(":")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                if self.path.split("?")[0] not in ("/healthz", "/readyz"):
                    self.send_error(404)
                    return
                alive, details = report()
                body = json.dumps(details).encode()
                self.send_response(200 if alive else 503)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # probes every few seconds are not news

        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="kbatch-health", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
