"""The fault proxy against a tiny echo server: each mode does what it says."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from tests.faults.proxy import FaultProxy
from tests.waiting import wait_until

QUIET = 0.3  # how long "nothing arrives" is watched for: a bound, not a wait for an event


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.server.received.append(data)  # type: ignore[attr-defined]
            self.request.sendall(data)


@pytest.fixture(scope="module")
def echo() -> Iterator[socketserver.ThreadingTCPServer]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    server.received = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(echo: socketserver.ThreadingTCPServer) -> Iterator[FaultProxy]:
    with FaultProxy(upstream=echo.server_address[:2], seed=7) as proxy:
        yield proxy


def connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=5)


def roundtrip(sock: socket.socket, data: bytes = b"ping") -> bytes:
    sock.sendall(data)
    return sock.recv(65536)


def silent(sock: socket.socket) -> bool:
    """Nothing arrives on `sock` for QUIET s (and it is not closed)."""
    sock.settimeout(QUIET)
    try:
        sock.recv(65536)
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)
    return False


def test_passes_through_and_counts(proxy: FaultProxy) -> None:
    assert proxy.state == "healthy" and proxy.port != 0
    with connect(proxy) as sock:
        assert roundtrip(sock) == b"ping"
    stats = proxy.stats
    assert (stats["connections"], stats["bytes_up"], stats["bytes_down"]) == (1, 4, 4)


def test_delay_adds_latency_both_ways(proxy: FaultProxy) -> None:
    proxy.delay(0.2)
    assert proxy.state == "delay"
    with connect(proxy) as sock:
        started = time.monotonic()
        assert roundtrip(sock) == b"ping"
        assert time.monotonic() - started >= 0.4
        proxy.heal()
        started = time.monotonic()
        assert roundtrip(sock) == b"ping"
        assert time.monotonic() - started < 0.2


def test_drop_closes_new_connections_by_seeded_chance(
    proxy: FaultProxy, echo: socketserver.ThreadingTCPServer
) -> None:
    def outcomes(p: FaultProxy) -> list[bool]:
        results = []
        for _ in range(12):
            with connect(p) as sock:
                try:
                    results.append(roundtrip(sock) == b"ping")
                except ConnectionError:
                    results.append(False)
        return results

    proxy.drop(0.5)
    seen = outcomes(proxy)
    assert True in seen and False in seen
    assert proxy.stats["faults"]["drop"] == seen.count(False)
    with FaultProxy(upstream=echo.server_address[:2], seed=7) as twin:
        twin.drop(0.5)
        assert outcomes(twin) == seen  # the same seed, the same connections dropped
    proxy.drop(1)
    assert outcomes(proxy) == [False] * 12
    proxy.heal()
    assert outcomes(proxy) == [True] * 12


def test_reset_breaks_open_connections_and_lets_new_ones_pass(proxy: FaultProxy) -> None:
    with connect(proxy) as sock:
        assert roundtrip(sock) == b"ping"
        proxy.reset()
        with pytest.raises(ConnectionResetError):
            roundtrip(sock)
    assert proxy.state == "healthy" and proxy.stats["faults"] == {"reset": 1}
    with connect(proxy) as sock:
        assert roundtrip(sock) == b"ping"


def test_blackhole_stalls_old_and_new_connections_until_healed(proxy: FaultProxy) -> None:
    with connect(proxy) as old:
        assert roundtrip(old) == b"ping"
        proxy.blackhole()
        old.sendall(b"held")
        with connect(proxy) as new:  # accepted, but nothing goes through
            new.sendall(b"also")
            assert silent(old) and silent(new)
            proxy.heal()
            assert old.recv(65536) == b"held"
            assert new.recv(65536) == b"also"


def test_refuse_stops_listening_and_heal_listens_on_the_same_port(proxy: FaultProxy) -> None:
    port = proxy.port
    proxy.refuse()
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    proxy.heal()
    assert proxy.port == port
    with connect(proxy) as sock:
        assert roundtrip(sock) == b"ping"


def test_half_open_forwards_up_and_swallows_down(
    proxy: FaultProxy, echo: socketserver.ThreadingTCPServer
) -> None:
    with connect(proxy) as sock:
        proxy.half_open()
        sock.sendall(b"one-way")
        wait_until(lambda: b"one-way" in echo.received, 5)  # type: ignore[attr-defined]
        assert silent(sock)
        assert proxy.stats["swallowed"] == len(b"one-way")


def test_schedule_applies_faults_on_a_timeline(proxy: FaultProxy) -> None:
    done = proxy.schedule([(0, "refuse", 0.3, {}), (0.6, "delay", None, {"seconds": 0.1})])
    wait_until(lambda: proxy.state == "refuse", 5)
    wait_until(lambda: proxy.state == "healthy", 5)
    done.result(5)
    assert proxy.state == "delay"
    assert proxy.stats["faults"] == {"refuse": 1, "delay": 1}


def test_bad_faults_are_refused_with_a_clear_error(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="unknown fault 'partition'"):
        proxy.schedule([(0, "partition", None, {})])
    with pytest.raises(ValueError, match="between 0 and 1"):
        proxy.drop(2)
    with pytest.raises(ValueError, match="0 s or more"):
        proxy.delay(-1)
