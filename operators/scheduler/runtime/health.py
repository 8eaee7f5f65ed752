"""``/healthz`` and ``/readyz`` of ``kbatch run``: answered from the live state, never
from a cache.

Both answer ``{"leader": ..., "synced": ..., "sessions": ...}``. ``/healthz`` (liveness)
is 200 until the scheduling loop has died (a standby replica, or one still starting,
is healthy too); ``/readyz`` (readiness) is 200 only while it is alive *and* its
caches are synced, so that no webhook request is routed to a replica that would
answer "try again".
"""

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Report = Callable[[], tuple[bool, bool, dict[str, Any]]]  # (alive, ready, details)


class HealthServer:
    def __init__(self, address: str, report: Report) -> None:
        host, _, port = address.rpartition(":")

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                path = self.path.split("?")[0]
                if path not in ("/healthz", "/readyz"):
                    self.send_error(404)
                    return
                alive, ready, details = report()
                ok = alive if path == "/healthz" else alive and ready
                body = json.dumps(details).encode()
                self.send_response(200 if ok else 503)
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
