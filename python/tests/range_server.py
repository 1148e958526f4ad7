"""A static file server for the tests: ``python range_server.py ROOT PORT``
serves the files under ROOT on 127.0.0.1:PORT, honouring ``Range`` (``a-b``,
``a-`` and the suffix ``-n``) and ``HEAD``, with an ``ETag`` per file, as
object_store's HTTP client reads them. Run as its own process, so that a test
that forks (DataLoader workers) forks no server thread."""

from __future__ import annotations

import email.utils
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT = ""


class _Files(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _file(self):
        path = os.path.normpath(os.path.join(ROOT, self.path.split("?")[0].lstrip("/")))
        if not path.startswith(ROOT) or not os.path.isfile(path):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        return path

    def _headers(self, path: str, data: bytes):
        st = os.stat(path)
        etag = f'"{st.st_size:x}-{st.st_mtime_ns:x}"'
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, b = rng[len("bytes="):].split("-")
            n = len(data)
            if a == "":
                start, end = max(n - int(b), 0), n - 1
            else:
                start, end = int(a), (int(b) if b else n - 1)
            end = min(end, n - 1)
            if start >= n or start > end:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{n}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{n}")
            part = data[start : end + 1]
        else:
            self.send_response(200)
            part = data
        self.send_header("Content-Length", str(len(part)))
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(st.st_mtime, usegmt=True))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return part

    def do_HEAD(self):
        path = self._file()
        if path is not None:
            with open(path, "rb") as f:
                self._headers(path, f.read())

    def do_GET(self):
        path = self._file()
        if path is None:
            return
        with open(path, "rb") as f:
            part = self._headers(path, f.read())
        if part:
            self.wfile.write(part)


if __name__ == "__main__":
    ROOT = os.path.realpath(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), _Files)
    server.daemon_threads = True
    server.serve_forever()
