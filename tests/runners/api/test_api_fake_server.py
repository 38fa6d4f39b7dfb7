"""The loopback fake provider as a client meets it: a connection the client drops (a stopping run resetting its
keep-alive connections) is quiet, as a real provider is, so it never shows as a traceback in an app's output."""

from __future__ import annotations

import socket
import struct
import time

from facet_probe_dev.testing.fake_providers import FakeProviderServer


def test_a_connection_reset_mid_request_prints_nothing(capfd):
    with FakeProviderServer() as server:
        host, port = server.url.removeprefix("http://").split(":")
        for _ in range(3):
            conn = socket.create_connection((host, int(port)))
            conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"mo")
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
            conn.close()
        time.sleep(0.5)  # the handler threads meet the resets
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ConnectionResetError" not in err, err
