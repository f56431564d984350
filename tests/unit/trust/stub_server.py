"""A tiny HTTP server that leaks its API key every way a server can: it prints the key from its
environment and its arguments on stdout and stderr at start, answers /health, and echoes the
Authorization header of every request into its log and its answer."""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        auth = self.headers.get("Authorization", "")
        sys.stderr.write(f"request {self.path} auth={auth}\n")
        sys.stderr.flush()
        body = json.dumps({"status": "ok", "you_sent": auth}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Echo-Key", auth.removeprefix("Bearer "))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt: str, *args: object) -> None:
        sys.stderr.write("access: " + fmt % args + "\n")


def main() -> None:
    port = int(sys.argv[sys.argv.index("--port") + 1])
    key = sys.argv[sys.argv.index("--api-key") + 1]
    print(f"starting with argv {sys.argv} and key {key}", flush=True)
    # the key split over two writes, as a server writing in pieces would
    half = len(key) // 2
    sys.stdout.write(f"env key {os.environ.get('QUALIFY_STUB_KEY', '')[:half]}")
    sys.stdout.flush()
    sys.stdout.write(f"{os.environ.get('QUALIFY_STUB_KEY', '')[half:]} end\n")
    sys.stdout.flush()
    sys.stderr.write(f"stderr: api key is {os.environ.get('QUALIFY_STUB_KEY')}\n")
    sys.stderr.flush()
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
