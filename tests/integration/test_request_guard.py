"""The key is checked before a body is read, and bodies have a size limit (issue 14 item 8).

Raw sockets announce a 200 MB body and send only its first 64 KiB: an answer that arrives
while the rest is still unsent proves the service did not wait for (or read) the body.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx

from testkit.live_service import LiveService

ANNOUNCED_BYTES = 200 * 1024 * 1024
SENT_BYTES = 64 * 1024
ANSWER_WAIT_S = 30  # a hung server fails the test instead of hanging it


def _announce_huge_body(live: LiveService, *, key: str | None) -> tuple[int, dict[str, str]]:
    """POST /v1/turns announcing ANNOUNCED_BYTES, send SENT_BYTES; (status, JSON answer)."""
    url = urlsplit(live.base_url)
    head = [
        "POST /v1/turns HTTP/1.1",
        f"Host: {url.hostname}:{url.port}",
        "Content-Type: application/json",
        f"Content-Length: {ANNOUNCED_BYTES}",
    ]
    if key is not None:
        head.append(f"Authorization: Bearer {key}")
    with socket.create_connection((url.hostname, url.port), timeout=ANSWER_WAIT_S) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b"[" + b"1," * (SENT_BYTES // 2))
        raw = b""
        while b"\r\n\r\n" not in raw or not _complete(raw):
            chunk = sock.recv(65536)
            if not chunk:
                break
            raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    _, _, body = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), json.loads(body)


def _complete(raw: bytes) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return False


def test_a_200_mb_body_without_the_key_gets_401_before_it_is_read(service: LiveService):
    assert _announce_huge_body(service, key=None) == (401, {"detail": "missing or wrong API key"})
    assert _announce_huge_body(service, key="wrong-key")[0] == 401


def test_an_authorized_body_over_the_limit_gets_413_with_a_sentence(service: LiveService):
    assert _announce_huge_body(service, key=service.api_key) == (
        413,
        {
            "detail": "The request body is larger than the 8388608 bytes the service accepts "
            "(MEMORY_MAX_BODY_BYTES)."
        },
    )


def test_a_streamed_body_without_a_length_is_cut_off_at_the_limit(service_factory):
    live = service_factory(MEMORY_MAX_BODY_BYTES="2000")

    def chunks() -> Iterator[bytes]:
        yield b'{"message": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    answer = live.client.post(
        "/v1/context", content=chunks(), headers={"Content-Type": "application/json"}
    )
    small = live.client.post("/v1/commands", json={"chat": {"user_id": "u-1"}, "command": "x"})

    assert (answer.status_code, answer.json()) == (
        413,
        {
            "detail": "The request body is larger than the 2000 bytes the service accepts "
            "(MEMORY_MAX_BODY_BYTES)."
        },
    )
    assert small.status_code != 413


def test_health_needs_no_key_and_v1_still_checks_it(service: LiveService):
    bare = httpx.Client(base_url=service.base_url, timeout=30)
    with bare:
        assert bare.get("/healthz").status_code == 200
        assert bare.get("/v1/status").status_code == 401
        assert (
            bare.get("/v1/status", headers={"Authorization": f"bearer {service.api_key}"})
        ).status_code == 200
