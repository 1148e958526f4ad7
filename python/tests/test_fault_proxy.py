"""The fault-injecting proxy the object-store tests rely on does what it says."""

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fault_proxy import SLOW_DOWN_BODY, Fault, FaultProxy, conditional, pacing_schedule, resets, slow_down


class _Store(BaseHTTPRequestHandler):
    """A tiny upstream: PUT stores a body, GET returns it."""

    protocol_version = "HTTP/1.1"
    objects: dict = {}
    gets = 0

    def log_message(self, *args):
        pass

    def do_PUT(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.objects[self.path] = self.rfile.read(n)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        type(self).gets += 1
        body = self.objects.get(self.path)
        self.send_response(200 if body is not None else 404)
        body = body or b""
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def upstream():
    _Store.objects = {}
    _Store.gets = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Store)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _request(port, method, path, body=None, headers=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_forwards_unchanged(upstream):
    with FaultProxy(upstream) as proxy:
        assert _request(proxy.port, "PUT", "/b/k", b"hello")[0] == 200
        assert _request(proxy.port, "GET", "/b/k") == (200, b"hello")
        assert proxy.log == [("PUT", "/b/k", "200"), ("GET", "/b/k", "200")]


def test_counts_the_bytes_it_sends(upstream):
    with FaultProxy(upstream) as proxy:
        _request(proxy.port, "PUT", "/b/k", b"hello world")
        _request(proxy.port, "GET", "/b/k")
        _request(proxy.port, "GET", "/b/k")
        _request(proxy.port, "GET", "/b/none")
        assert proxy.bytes_sent("GET", "/b/k") == 22
        assert proxy.bytes_sent("PUT") == 0
        assert proxy.bytes_sent() == 22


def test_drop_response_after_the_server_acted(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.add(Fault("drop_response", method="PUT"))
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            _request(proxy.port, "PUT", "/b/k", b"committed")
        assert _Store.objects["/b/k"] == b"committed"  # the server did it
        assert _request(proxy.port, "PUT", "/b/k", b"again")[0] == 200  # times=1


def test_status_is_not_forwarded_and_status_after_is(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.add(Fault("status", method="PUT", status=500))
        assert _request(proxy.port, "PUT", "/b/x", b"1")[0] == 500
        assert "/b/x" not in _Store.objects
        proxy.add(Fault("status_after", method="PUT", status=412, when=conditional))
        assert _request(proxy.port, "PUT", "/b/y", b"2", {"If-None-Match": "*"})[0] == 412
        assert _Store.objects["/b/y"] == b"2"


def test_stall_makes_the_client_time_out(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.add(Fault("stall", method="PUT", seconds=3))
        with pytest.raises(OSError):
            _request(proxy.port, "PUT", "/b/s", b"late", timeout=0.5)
        assert _Store.objects["/b/s"] == b"late"


def test_flip_and_skip(upstream):
    with FaultProxy(upstream) as proxy:
        _request(proxy.port, "PUT", "/b/f", b"\x00\x00\x00\x00")
        proxy.add(Fault("flip", method="GET", offset=2, mask=0x80, skip=1))
        assert _request(proxy.port, "GET", "/b/f")[1] == b"\x00\x00\x00\x00"  # skipped
        assert _request(proxy.port, "GET", "/b/f")[1] == b"\x00\x00\x80\x00"
        assert _request(proxy.port, "GET", "/b/f")[1] == b"\x00\x00\x00\x00"  # times=1
        assert proxy.hits("GET", "/b/f") == 3


class _Ranged(BaseHTTPRequestHandler):
    """A tiny upstream serving one object, honouring ``Range: bytes=a-b``."""

    protocol_version = "HTTP/1.1"
    body = bytes(range(100))

    def log_message(self, *args):
        pass

    def do_GET(self):
        rng = self.headers.get("Range")
        if rng:
            a, b = (int(x) for x in rng.split("=")[1].split("-"))
            part = self.body[a : b + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {a}-{a + len(part) - 1}/{len(self.body)}")
        else:
            part = self.body
            self.send_response(200)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)


def test_flip_at_an_object_offset_in_whichever_response_holds_it():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ranged)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with FaultProxy(server.server_address[1]) as proxy:
            fault = proxy.add(Fault("flip", method="GET", at=50, mask=0xFF))
            want = bytes(range(100))
            # A range without byte 50: unchanged, and not counted.
            assert _request(proxy.port, "GET", "/o", headers={"Range": "bytes=0-9"})[1] == want[:10]
            assert fault.applied == 0
            # A range holding it: byte 50 flipped, at its place in the range.
            got = _request(proxy.port, "GET", "/o", headers={"Range": "bytes=40-59"})[1]
            assert got == want[40:50] + bytes([50 ^ 0xFF]) + want[51:60]
            assert fault.applied == 1
            # times=1: the next is passed on; a whole object counts from 0.
            assert _request(proxy.port, "GET", "/o")[1] == want
            proxy.add(Fault("flip", method="GET", at=99, mask=0x01))
            got = _request(proxy.port, "GET", "/o")[1]
            assert got == want[:99] + bytes([99 ^ 0x01])
            assert "object byte 99 flipped" in proxy.log[-1][2]
    finally:
        server.shutdown()
        server.server_close()


def test_slow_down_answers_a_fraction_of_gets_503_without_forwarding(upstream):
    statuses = []
    for _ in range(2):
        with FaultProxy(upstream, seed=7) as proxy:
            _request(proxy.port, "PUT", "/b/k", b"payload")
            fault = proxy.add(slow_down(0.25))
            _Store.gets = 0
            got = [_request(proxy.port, "GET", "/b/k") for _ in range(80)]
            slow = [body for status, body in got if status == 503]
            assert len(slow) == fault.applied and 5 < fault.applied < 40
            assert all(body == SLOW_DOWN_BODY and b"<Code>SlowDown</Code>" in body for body in slow)
            assert all(body == b"payload" for status, body in got if status == 200)
            # The throttled GETs never reached the server.
            assert _Store.gets == 80 - fault.applied
            assert proxy.stats()["faults"] == fault.applied
            statuses.append([status for status, _ in got])
    # The same seed, the same requests: the same answers.
    assert statuses[0] == statuses[1]


def test_reset_is_not_forwarded(upstream):
    with FaultProxy(upstream) as proxy:
        proxy.add(resets(1.0, method="PUT"))
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            _request(proxy.port, "PUT", "/b/r", b"never")
        assert "/b/r" not in _Store.objects
        assert proxy.log == [("PUT", "/b/r", "reset (not forwarded)")]


def test_stats_count_requests_ranged_gets_and_bytes(upstream):
    with FaultProxy(upstream) as proxy:
        _request(proxy.port, "PUT", "/b/k", b"0123456789")
        _request(proxy.port, "GET", "/b/k")
        _request(proxy.port, "GET", "/b/k", headers={"Range": "bytes=0-3"})  # the store ignores it
        _request(proxy.port, "HEAD", "/b/k")
        s = proxy.stats()
        assert s["requests"] == {"PUT": 1, "GET": 2, "HEAD": 1}
        assert (s["gets"], s["ranged_gets"], s["get_bytes"], s["body_bytes"]) == (2, 1, 20, 20)
        assert s["faults"] == 0 and s["in_flight_max"] == 1
        proxy.reset_stats()
        assert proxy.stats()["gets"] == 0 and proxy.log == [] and proxy.bytes_sent() == 0


def test_a_delayed_paced_link_forwards_bodies_unchanged(upstream):
    body = bytes(range(256)) * 4096  # 1 MiB
    with FaultProxy(upstream, first_byte_delay=0.005, bytes_per_second=200e6, chunk=50_000) as proxy:
        assert _request(proxy.port, "PUT", "/b/big", body)[0] == 200
        assert _request(proxy.port, "GET", "/b/big") == (200, body)
        assert proxy.stats()["get_bytes"] == len(body)


def test_pacing_schedule():
    # 10 bytes at 4 bytes/s in chunks of 4: sent by 1 s, 2 s and 2.5 s.
    assert pacing_schedule(10, 4.0, 4) == [(4, 1.0), (4, 2.0), (2, 2.5)]
    assert pacing_schedule(0, 4.0, 4) == []
    assert pacing_schedule(5, None, 2) == [(2, 0.0), (2, 0.0), (1, 0.0)]
    with pytest.raises(ValueError):
        FaultProxy(1, bytes_per_second=0)
    with pytest.raises(ValueError):
        Fault("status", probability=1.5)
