"""A fault-injecting HTTP reverse proxy for the object-store tests.

The proxy listens on 127.0.0.1 and forwards every request, unchanged (the
``Host`` header included, so request signatures stay valid), to an upstream
server on 127.0.0.1 (moto's S3 server, Azurite). A client is pointed at the
proxy instead of the server. Faults are rules: each names the requests it
matches and what it does to them::

    with FaultProxy(upstream_port) as proxy:
        proxy.add(Fault("drop_response", method="PUT", path="_manifest"))
        ...  # the first matching PUT reaches the server; its answer never comes back
        assert proxy.hits("PUT", "_manifest") == 2

Actions:

``drop_response``
    forward the request (the server acts on it), then close the connection
    without answering: a lost response after a committed write.
``stall``
    forward the request, then hold the connection open without answering for
    ``seconds`` before closing it: the client times out.
``status``
    answer ``status`` without forwarding (the server never sees the request).
``status_after``
    forward the request, then answer ``status`` instead of the server's answer
    (e.g. 412 or 500 to a request the server carried out).
``flip``
    forward the request, then flip the bits of ``mask`` in the response body's
    byte at ``offset`` (negative counts from the end); or, with ``at``, in the
    byte at offset ``at`` of the object, in whichever response holds it (by
    its ``Content-Range``): a response that does not is passed on unchanged
    and does not count as one the rule applied to.

``reset``
    do not forward the request: reset the connection (RST) instead of
    answering (the server never sees the request).

A rule applies to ``times`` matching requests (``None``: all of them) after
skipping the first ``skip``, each with ``probability`` (drawn from the
proxy's seeded generator, so a run is repeatable for one order of requests).
``status`` answers ``body`` (default ``injected fault``) with ``headers``;
``slow_down(p)`` is the rule S3 applies under load: a fraction ``p`` of GETs
answered 503 with its ``SlowDown`` XML error. ``proxy.log`` records every
request as ``(method, path, what happened)``; ``proxy.stats()`` counts
requests by method, GETs, ranged GETs, faults and response body bytes.

A link, for the benchmarks that stand in for a WAN (``python/bench/wan_proxy.py``)
and the tests through it: ``FaultProxy(port, first_byte_delay=0.030,
bytes_per_second=80e6)`` sends no response's first byte before
``first_byte_delay`` seconds after its request arrived (or before the server
answered, when that is later: the proxy reads the server's whole answer
first), then its body no faster than ``bytes_per_second`` on that connection.
"""

from __future__ import annotations

import http.client
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

# Headers that belong to one connection and are not forwarded.
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}

ACTIONS = ("drop_response", "stall", "status", "status_after", "flip", "reset")

#: The error body S3 answers a request it throttles with (status 503).
SLOW_DOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n'
    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>"
    b"<RequestId>lodt-fault-proxy</RequestId></Error>"
)


@dataclass
class Fault:
    """One fault rule (see the module docstring)."""

    action: str
    method: Optional[str] = None
    path: Optional[str] = None
    times: Optional[int] = 1
    skip: int = 0
    status: int = 500
    seconds: float = 30.0
    offset: int = 0
    at: Optional[int] = None
    mask: int = 0x01
    # The chance that a matching request (not skipped, within ``times``) takes the fault.
    probability: float = 1.0
    # What ``status`` answers: its body and headers (default: a text/plain "injected fault").
    body: Optional[bytes] = None
    headers: Optional[list] = None
    # Extra condition on (method, path, headers); all given conditions must hold.
    when: Optional[Callable[[str, str, dict], bool]] = None
    seen: int = field(default=0, init=False)
    applied: int = field(default=0, init=False)

    def __post_init__(self):
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}; expected one of {ACTIONS}")
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability is in [0, 1], found {self.probability}")

    def matches(self, method: str, path: str, headers: dict) -> bool:
        if self.method is not None and method != self.method:
            return False
        if self.path is not None and self.path not in path:
            return False
        return self.when is None or bool(self.when(method, path, headers))

    def take(self, rng: Optional[random.Random] = None) -> bool:
        """Counts one matching request; whether the fault applies to it."""
        self.seen += 1
        if self.seen <= self.skip:
            return False
        if self.times is not None and self.applied >= self.times:
            return False
        if self.probability < 1.0 and (rng or random).random() >= self.probability:
            return False
        self.applied += 1
        return True


def slow_down(probability: float, method: str = "GET", times: Optional[int] = None, **kw) -> Fault:
    """A fraction ``probability`` of the requests of ``method`` (every
    one, for ever) answered as S3 throttles: 503 with its ``SlowDown`` XML
    error, not forwarded."""
    return Fault(
        "status", method=method, status=503, times=times, probability=probability,
        body=SLOW_DOWN_BODY, headers=[("Content-Type", "application/xml")], **kw,
    )


def resets(probability: float, method: str = "GET", **kw) -> Fault:
    """A fraction ``probability`` of the requests of ``method`` answered by
    a connection reset, not forwarded."""
    return Fault("reset", method=method, times=None, probability=probability, **kw)


def pacing_schedule(nbytes: int, bytes_per_second: Optional[float], chunk: int) -> list[tuple[int, float]]:
    """How a body of ``nbytes`` goes out on a paced connection: per chunk,
    ``(chunk bytes, seconds after the first byte by which it has been sent)``:
    chunk ``k`` is sent once the connection's rate allows its last byte."""
    out, sent = [], 0
    while sent < nbytes:
        n = min(chunk, nbytes - sent)
        sent += n
        out.append((n, sent / bytes_per_second if bytes_per_second else 0.0))
    return out


def conditional(method: str, path: str, headers: dict) -> bool:
    """A ``when`` for conditional requests (``If-Match`` / ``If-None-Match``)."""
    keys = {k.lower() for k in headers}
    return "if-match" in keys or "if-none-match" in keys


class FaultProxy:
    """The proxy: ``with FaultProxy(upstream_port) as p:`` serves on ``p.port``."""

    def __init__(
        self,
        upstream_port: int,
        upstream_host: str = "127.0.0.1",
        *,
        first_byte_delay: float = 0.0,
        bytes_per_second: Optional[float] = None,
        seed: int = 0,
        chunk: int = 64 << 10,
    ):
        if first_byte_delay < 0 or (bytes_per_second is not None and bytes_per_second <= 0):
            raise ValueError("first_byte_delay is >= 0 seconds and bytes_per_second > 0 (or None: unpaced)")
        self.upstream = (upstream_host, upstream_port)
        self.first_byte_delay = first_byte_delay
        self.bytes_per_second = bytes_per_second
        self.chunk = chunk
        self.faults: list[Fault] = []
        self.log: list[tuple[str, str, str]] = []
        # (method, path, body bytes sent to the client) per response.
        self.sent: list[tuple[str, str, int]] = []
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts = _Counts()
        self._server = _Server(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self.faults.clear()

    def hits(self, method: Optional[str] = None, path: Optional[str] = None) -> int:
        """How many requests (of this method, with ``path`` in their path) arrived."""
        with self._lock:
            return sum(
                1
                for m, p, _ in self.log
                if (method is None or m == method) and (path is None or path in p)
            )

    def bytes_sent(self, method: Optional[str] = None, path: Optional[str] = None) -> int:
        """The response body bytes the proxy sent to clients (of this method,
        with ``path`` in their path): what a client fetched."""
        with self._lock:
            return sum(
                n
                for m, p, n in self.sent
                if (method is None or m == method) and (path is None or path in p)
            )

    def stats(self) -> dict:
        """What clients asked and got since the start (or :meth:`reset_stats`):
        ``{"requests": {method: n}, "gets", "ranged_gets", "faults",
        "body_bytes", "get_bytes", "in_flight_max"}`` (``body_bytes``: every
        response body sent; ``get_bytes``: those of GETs; ``in_flight_max``:
        the most requests the proxy held at once)."""
        with self._lock:
            c = self._counts
            return {
                "requests": dict(c.requests), "gets": c.gets, "ranged_gets": c.ranged_gets,
                "faults": c.faults, "body_bytes": c.body_bytes, "get_bytes": c.get_bytes,
                "in_flight_max": c.in_flight_max,
            }

    def reset_stats(self) -> None:
        """Starts :meth:`stats` (and ``log``, ``sent``) again from zero."""
        with self._lock:
            self._counts = _Counts(in_flight=self._counts.in_flight)
            self.log.clear()
            self.sent.clear()

    def _begin(self, method: str, headers: dict) -> None:
        with self._lock:
            c = self._counts
            c.requests[method] = c.requests.get(method, 0) + 1
            if method == "GET":
                c.gets += 1
                if any(k.lower() == "range" for k in headers):
                    c.ranged_gets += 1
            c.in_flight += 1
            c.in_flight_max = max(c.in_flight_max, c.in_flight)

    def _end(self) -> None:
        with self._lock:
            self._counts.in_flight -= 1

    def _choose(self, method: str, path: str, headers: dict) -> Optional[Fault]:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path, headers) and fault.take(self._rng):
                    self._counts.faults += 1
                    return fault
            return None

    def _record(self, method: str, path: str, what: str) -> None:
        with self._lock:
            self.log.append((method, path, what))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class _Counts:
    requests: dict = field(default_factory=dict)
    gets: int = 0
    ranged_gets: int = 0
    faults: int = 0
    body_bytes: int = 0
    get_bytes: int = 0
    in_flight: int = 0
    in_flight_max: int = 0


class _Server(ThreadingHTTPServer):
    # Many clients connect at once (a loader's read-ahead, several processes):
    # a deeper accept queue than socketserver's 5, so none waits for a SYN retry.
    request_queue_size = 256
    daemon_threads = True


def _content_start(status: int, headers) -> int:
    """The object offset of a response body's first byte: the start of its
    ``Content-Range`` (``bytes a-b/n``), or 0 for a whole object; -1 when the
    response holds no object bytes (an error)."""
    for k, v in headers:
        if k.lower() == "content-range":
            try:
                return int(v.split()[1].split("-")[0])
            except (IndexError, ValueError):
                return -1
    return 0 if status == 200 else -1


def _handler_for(proxy: FaultProxy):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                out = bytearray()
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return bytes(out)
                    out += self.rfile.read(size)
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _forward(self, body: bytes):
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            if "Transfer-Encoding" in self.headers:
                headers["Content-Length"] = str(len(body))
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                return resp.status, resp.reason, resp.getheaders(), data
            finally:
                conn.close()

        def _wait_first_byte(self) -> None:
            """Holds the answer until ``first_byte_delay`` after the request came."""
            if proxy.first_byte_delay > 0:
                late = self._arrived + proxy.first_byte_delay - time.perf_counter()
                if late > 0:
                    time.sleep(late)

        def _send_body(self, body: bytes) -> None:
            if not proxy.bytes_per_second:
                self.wfile.write(body)
                return
            start = time.perf_counter()
            view = memoryview(body)
            sent = 0
            for n, due in pacing_schedule(len(body), proxy.bytes_per_second, proxy.chunk):
                self.wfile.write(view[sent : sent + n])
                sent += n
                ahead = start + due - time.perf_counter()
                if ahead > 0:
                    time.sleep(ahead)

        def _reply(self, status: int, reason: str, headers, body: bytes) -> None:
            self._wait_first_byte()
            self.send_response(status, reason)
            for k, v in headers:
                if k.lower() not in _HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            if self.command == "HEAD":
                length = next((v for k, v in headers if k.lower() == "content-length"), "0")
                self.send_header("Content-Length", length)
            else:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.flush()
                # Counted before it is sent: a client that has read it sees it counted.
                with proxy._lock:
                    proxy.sent.append((self.command, self.path, len(body)))
                    proxy._counts.body_bytes += len(body)
                    if self.command == "GET":
                        proxy._counts.get_bytes += len(body)
                self._send_body(body)
            self.wfile.flush()

        def _drop(self) -> None:
            self.close_connection = True
            try:
                # RST rather than FIN: the client sees the connection die.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _handle(self) -> None:
            self._arrived = time.perf_counter()
            proxy._begin(self.command, dict(self.headers.items()))
            try:
                self._handle_counted()
            finally:
                proxy._end()

        def _handle_counted(self) -> None:
            body = self._body()
            headers = dict(self.headers.items())
            fault = proxy._choose(self.command, self.path, headers)
            if fault is not None and fault.action == "status":
                proxy._record(self.command, self.path, f"status {fault.status} (not forwarded)")
                self._reply(
                    fault.status, "Injected", fault.headers or [("Content-Type", "text/plain")],
                    b"injected fault" if fault.body is None else fault.body,
                )
                return
            if fault is not None and fault.action == "reset":
                proxy._record(self.command, self.path, "reset (not forwarded)")
                self._wait_first_byte()
                self._drop()
                return
            status, reason, resp_headers, data = self._forward(body)
            if fault is None:
                proxy._record(self.command, self.path, str(status))
                self._reply(status, reason, resp_headers, data)
            elif fault.action == "drop_response":
                proxy._record(self.command, self.path, f"{status}, response dropped")
                self._drop()
            elif fault.action == "stall":
                proxy._record(self.command, self.path, f"{status}, stalled {fault.seconds} s")
                time.sleep(fault.seconds)
                self._drop()
            elif fault.action == "status_after":
                proxy._record(self.command, self.path, f"{status}, answered {fault.status}")
                self._reply(fault.status, "Injected", [("Content-Type", "text/plain")], b"injected fault")
            else:  # flip
                flipped = bytearray(data)
                if fault.at is not None:
                    start = _content_start(status, resp_headers)
                    i = fault.at - start if start >= 0 else -1
                    if not 0 <= i < len(flipped):
                        with proxy._lock:
                            fault.applied -= 1
                        proxy._record(self.command, self.path, str(status))
                        self._reply(status, reason, resp_headers, data)
                        return
                    flipped[i] ^= fault.mask
                    what = f"object byte {fault.at} flipped"
                elif flipped:
                    i = fault.offset if fault.offset >= 0 else len(flipped) + fault.offset
                    i = min(max(i, 0), len(flipped) - 1)
                    flipped[i] ^= fault.mask
                    what = f"body byte {fault.offset} flipped"
                else:
                    what = "empty body, nothing flipped"
                proxy._record(self.command, self.path, f"{status}, {what}")
                self._reply(status, reason, resp_headers, bytes(flipped))

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = do_PATCH = _handle

    return Handler
