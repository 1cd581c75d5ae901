"""Hostile input for the typesetting tests: Markdown that tries to fetch files and URLs, and a TCP listener
that counts whether anything tried."""

from __future__ import annotations

import socket
import threading


class Listener:
    """A plain TCP listener on 127.0.0.1 that counts the connections it receives."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def hostile_markdown(port: int) -> str:
    return "\n".join(
        [
            "# Hostile",
            "## Part Evil",
            "### Chapter Evil",
            "#### Section Evil",
            "<script>alert(1)</script>",
            '<img src="file:///etc/passwd">',
            "![x](file:///etc/passwd)",
            '<iframe src="http://127.0.0.1:9/"></iframe>',
            f"![y](http://127.0.0.1:{port}/x.png)",
            f'<link rel="stylesheet" href="http://127.0.0.1:{port}/evil.css">',
            f"[a link](http://127.0.0.1:{port}/page) and ![ref][pic]",
            "",
            f"[pic]: http://127.0.0.1:{port}/ref.png",
            "",
            '<object data="file:///etc/passwd"></object><embed src="file:///etc/passwd">',
        ]
    )
