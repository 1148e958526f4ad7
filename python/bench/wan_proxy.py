"""A stand-in for a WAN link to an object store: a reverse proxy on
127.0.0.1 in front of an S3 server on 127.0.0.1 (the tests' moto server)
that holds each answer's first byte ``--delay-ms`` after its request came
(default 30 ms) and paces each connection to ``--mbps`` MB/s (default 80),
the rule of thumb for S3; optionally it answers a fraction of GETs 503
``SlowDown`` (S3's throttling error) or resets their connections.

    python python/bench/wan_proxy.py --upstream-port 5000 [--port 0] [--delay-ms 30] [--mbps 80] \\
        [--slowdown 0.1] [--resets 0.01] [--seed 0]

prints the proxy's endpoint (point ``aws_endpoint`` / ``S3_ENDPOINT_URL`` at
it) and, on Ctrl-C, what it counted: requests by method, GETs, ranged GETs,
faults, response body bytes and the most requests it held at once.

It is the fault proxy of the object-store tests (``python/tests/fault_proxy.py``:
``FaultProxy(port, first_byte_delay=, bytes_per_second=)``, the rules
``slow_down`` and ``resets``), so the tests and ``bench_wan.py`` run through
the same code; :func:`wan_proxy` makes one from Python.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from fault_proxy import FaultProxy, resets, slow_down  # noqa: E402

#: Seconds to an answer's first byte (S3's rule of thumb).
DELAY = 0.030
#: Bytes per second per connection (S3's rule of thumb).
RATE = 80e6


def wan_proxy(
    upstream_port: int,
    *,
    delay: float = DELAY,
    rate: float | None = RATE,
    slowdown: float = 0.0,
    reset: float = 0.0,
    seed: int = 0,
) -> FaultProxy:
    """A proxy on 127.0.0.1 in front of ``127.0.0.1:upstream_port``: first
    byte after ``delay`` seconds, ``rate`` bytes/s per connection (None:
    unpaced), a fraction ``slowdown`` of GETs answered 503 SlowDown and a
    fraction ``reset`` of them reset (neither forwarded)."""
    proxy = FaultProxy(upstream_port, first_byte_delay=delay, bytes_per_second=rate, seed=seed)
    if slowdown:
        proxy.add(slow_down(slowdown))
    if reset:
        proxy.add(resets(reset))
    return proxy


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--upstream-port", type=int, required=True, help="the S3 server's port on 127.0.0.1")
    ap.add_argument("--delay-ms", type=float, default=DELAY * 1e3)
    ap.add_argument("--mbps", type=float, default=RATE / 1e6, help="MB/s per connection (0: unpaced)")
    ap.add_argument("--slowdown", type=float, default=0.0, help="fraction of GETs answered 503 SlowDown")
    ap.add_argument("--resets", type=float, default=0.0, help="fraction of GETs whose connection is reset")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    proxy = wan_proxy(
        args.upstream_port, delay=args.delay_ms / 1e3, rate=args.mbps * 1e6 or None,
        slowdown=args.slowdown, reset=args.resets, seed=args.seed,
    )
    print(proxy.endpoint, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        print(json.dumps(proxy.stats()), flush=True)
        proxy.close()


if __name__ == "__main__":
    main()
