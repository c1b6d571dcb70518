"""The suite's own rule, checked: a test cannot reach past this machine (conftest ``_no_internet``),
while loopback servers — the fake services the tests run in the real services' shapes — still work."""

from __future__ import annotations

import socket
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest


def test_a_public_address_or_name_fails_at_once():
    with socket.socket() as s, pytest.raises(OSError, match="do not reach the internet"):
        s.connect(("192.0.2.1", 443))  # TEST-NET-1: would hang on a machine that routes it
    with pytest.raises(socket.gaierror, match="do not reach the internet"):
        socket.getaddrinfo("api.openalex.org", 443)
    with pytest.raises(OSError):
        urllib.request.urlopen("https://export.arxiv.org/api/query?search_query=x", timeout=5)


def test_loopback_still_answers():
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        for host in ("127.0.0.1", "localhost"):
            with urllib.request.urlopen(f"http://{host}:{port}/", timeout=5) as answer:
                assert answer.read() == b"hello"
    finally:
        server.shutdown()
        server.server_close()
