"""Fault injection between the filter and the real memory service.

`FaultProxy` listens on 127.0.0.1 and forwards each HTTP request to the real service, then
hands the client the real answer, or a damaged version of it, or nothing, as `mode` says:

| mode | what the client sees |
|---|---|
| `pass` | the service's answer, unchanged |
| `slow` | the service's answer after `delay_s` seconds |
| `hang` | the request is read and never answered (until the client gives up) |
| `reset` | the connection is reset (TCP RST) as soon as it is accepted |
| `garbage` | the service's status and headers with a body that is not JSON |
| `truncated` | the service's headers and half of its body, then the connection closes |

It never makes up an answer on its own: every byte it sends came from the service, except the
body `garbage` puts in place of the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field

GARBAGE_BODY = b'{"block": "<userMemories>\x00\xff not json at all'

MODES = ("pass", "slow", "hang", "reset", "garbage", "truncated")


@dataclass
class FaultProxy:
    """A loopback proxy in front of `upstream_port`; change `mode` at any time."""

    upstream_port: int
    mode: str = "pass"
    delay_s: float = 30.0
    requests: int = 0  #: requests received so far
    _loop: asyncio.AbstractEventLoop | None = None
    _server: asyncio.base_events.Server | None = None
    _thread: threading.Thread | None = None
    _port: int = 0
    _ready: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> FaultProxy:
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault proxy did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._server = loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self._port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        mode = self.mode
        try:
            if mode == "reset":
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            request = await _read_request(reader)
            if mode == "hang":
                await asyncio.sleep(3600)
                return
            answer = await self._forward(request)
            if mode == "slow":
                await asyncio.sleep(self.delay_s)
            writer.write(_damage(answer, mode))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _forward(self, request: bytes) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            writer.write(request)
            await writer.drain()
            return await reader.read()  # "Connection: close" was asked for: read to EOF
        finally:
            writer.close()


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    """One HTTP/1.1 request, rewritten to ask the service to close after answering."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = 0
    kept = [lines[0]]
    for line in lines[1:]:
        if not line:
            continue
        name = line.split(":", 1)[0].strip().lower()
        if name == "content-length":
            length = int(line.split(":", 1)[1])
        if name == "connection":
            continue
        kept.append(line)
    kept.append("Connection: close")
    body = await reader.readexactly(length) if length else b""
    return ("\r\n".join(kept) + "\r\n\r\n").encode("latin-1") + body


def _damage(answer: bytes, mode: str) -> bytes:
    if mode not in ("garbage", "truncated"):
        return answer
    head, _, body = answer.partition(b"\r\n\r\n")
    if mode == "truncated":
        return head + b"\r\n\r\n" + body[: len(body) // 2]
    lines = [
        line for line in head.split(b"\r\n") if not line.lower().startswith(b"content-length:")
    ]
    lines.append(b"Content-Length: " + str(len(GARBAGE_BODY)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + GARBAGE_BODY
