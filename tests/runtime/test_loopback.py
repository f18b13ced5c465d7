"""The loopback HTTP server of the resources' tests: what it counts, what it answers."""

from __future__ import annotations

import http.client
import socket
from typing import NoReturn

import pytest
from _runtime import loopback
from _runtime.leak_check import LeakCheck


class _Handler(loopback.Routes):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        if self.path == "/ok":
            self.reply(200, b"hello")
        else:
            self.redirect("/ok", b"go")


def _get(server: loopback.LoopbackHTTPServer, path: str) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=5)
    connection.request("GET", path)
    response = connection.getresponse()
    connection.close()  # the response keeps the socket until it is read
    return response


def test_a_server_answers_counts_and_leaves_nothing() -> None:
    with LeakCheck(), loopback.serving(_Handler) as server:
        assert server.url("/ok") == f"http://127.0.0.1:{server.server_port}/ok"
        with _get(server, "/ok") as response:
            assert (response.status, response.read()) == (200, b"hello")
        with _get(server, "/elsewhere") as response:
            assert response.status == 302
            assert response.headers["Location"] == "/ok"
            assert response.read() == b"go"
        assert server.wait_all_closed() == 0
        assert server.accepted == 2
    assert server.release.is_set()


def test_wait_all_closed_counts_a_connection_the_client_holds() -> None:
    with loopback.serving(_Handler) as server:
        client = socket.create_connection(("127.0.0.1", server.server_port))
        try:
            with server.changed:
                assert server.changed.wait_for(lambda: server.accepted == 1, timeout=5)
            assert server.wait_all_closed(timeout=0.05) == 1
        finally:
            client.close()
        assert server.wait_all_closed() == 0


def _raise(error: Exception) -> NoReturn:
    raise error


def test_a_reset_connection_is_no_error_but_others_are(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with loopback.serving(_Handler) as server, socket.socket() as request:
        for error in (ConnectionResetError(104, "reset"), ValueError("a real one")):
            try:
                _raise(error)
            except Exception:  # noqa: BLE001 - handle_error reads sys.exc_info()
                server.handle_error(request, ("127.0.0.1", 1))
    printed = capsys.readouterr().err
    assert "ValueError: a real one" in printed
    assert "ConnectionResetError" not in printed
