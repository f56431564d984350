"""A server that answers /health and every GET but never finishes a POST: a request stays in
flight until the client gives up. Each POST it receives is marked by a file `posted-N` in the
directory named by `--marks`, so a test knows a request is in flight without timing it."""

import argparse
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--marks", type=Path, required=True)
args, _ = ap.parse_known_args()
args.marks.mkdir(parents=True, exist_ok=True)
count = 0
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"status":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        global count
        with lock:
            count += 1
            (args.marks / f"posted-{count}").write_text(self.path)
        time.sleep(3600)

    def log_message(self, *a: object) -> None:
        pass


ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()
