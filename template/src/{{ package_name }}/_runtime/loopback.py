"""A loopback HTTP server for the resources' tests, which counts what it holds open.

``serving(handler)`` runs a ``LoopbackHTTPServer`` for a block: it answers on
127.0.0.1 with *handler*, one thread per connection, and counts each connection
from its acceptance until the server has closed its own side, which it does once
the client has closed or shut down its side: a test sees the client's close from
the server (``wait_all_closed``).  ``start_server`` starts one that runs until its
process ends.  ``Routes`` is a handler with the replies the tests share.  It needs
the standard library alone.
"""

from __future__ import annotations

import contextlib
import http.server
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket
    from collections.abc import Iterator

    Request = socket.socket | tuple[bytes, socket.socket]

__all__ = ["LoopbackHTTPServer", "Routes", "serving", "start_server"]

Handler = type[http.server.BaseHTTPRequestHandler]


class LoopbackHTTPServer(http.server.ThreadingHTTPServer):
    """An HTTP server on 127.0.0.1 that counts the connections it holds open.

    ``accepted`` counts every connection, ``open`` those whose server side is not
    yet closed; ``release`` is for a handler's slow replies to wait on, and is set
    when ``serving`` ends.
    """

    def __init__(self, handler: Handler) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.release = threading.Event()
        self.changed = threading.Condition()
        self.open = 0
        self.accepted = 0

    def url(self, path: str) -> str:
        """The URL of *path* on this server."""
        return f"http://127.0.0.1:{self.server_port}{path}"

    def process_request(self, request: Request, client_address: object) -> None:
        with self.changed:
            self.open += 1
            self.accepted += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request: Request) -> None:
        super().shutdown_request(request)
        with self.changed:
            self.open -= 1
            self.changed.notify_all()

    def handle_error(self, request: Request, client_address: object) -> None:
        """Print what failed, unless a client reset its connection.

        A client that closes a connection whose response it left unread resets
        it: the handler waiting for the next request then reads an error.
        """
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def wait_all_closed(self, timeout: float = 5.0) -> int:
        """Wait up to *timeout* seconds for the server to hold no connection.

        Returns how many it still holds.
        """
        with self.changed:
            self.changed.wait_for(lambda: self.open == 0, timeout=timeout)
            return self.open


def start_server(handler: Handler) -> tuple[LoopbackHTTPServer, threading.Thread]:
    """Start a server of *handler* in a daemon thread; it serves until stopped."""
    server = LoopbackHTTPServer(handler)
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": 0.005},  # shutdown() waits for the next poll
        name="loopback-http-server",
        daemon=True,
    )
    thread.start()
    return server, thread


@contextlib.contextmanager
def serving(handler: Handler) -> Iterator[LoopbackHTTPServer]:
    """A server of *handler* for the block: released, stopped and closed at its end."""
    server, thread = start_server(handler)
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()
        thread.join()


class Routes(http.server.BaseHTTPRequestHandler):
    """A handler's shared parts: ``reply``, ``redirect``, and nothing logged.

    A client that has gone by the time a reply is written is no error.
    """

    server: LoopbackHTTPServer
    # Headers and body go out in two writes: without this the body can wait for a
    # delayed acknowledgement.
    disable_nagle_algorithm = True

    def reply(self, status: int, body: bytes) -> None:
        """Send *body* with *status* and its ``Content-Length``."""
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def redirect(self, location: str, body: bytes = b"") -> None:
        """Send a 302 to *location*, with *body*."""
        with contextlib.suppress(OSError):
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    def log_message(self, fmt: str, *args: object) -> None:
        """Keep the test output quiet."""
