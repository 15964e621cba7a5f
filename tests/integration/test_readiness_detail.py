"""`/readyz` needs no key, so it tells no one where the database is (issue 14 item 9).

The running service's database is swapped for one at a closed port with a named user: the
driver's real error names host, port and user. Without the key the answer is a sentence; the
detail goes to the log, and to callers with the key.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import httpx
import pytest

from service.api.routes.health import DATABASE_DOWN
from service.storage.db import Database
from testkit.live_service import LiveService

USER = "readyz_probe_user"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def unreachable_database(service: LiveService) -> Iterator[int]:
    """The service's runtime talks to a database nobody listens for; restored afterwards."""
    runtime = service.app.state.runtime
    port = _closed_port()
    real = runtime.db
    runtime.db = Database.connect(f"postgresql+psycopg://{USER}:pw@127.0.0.1:{port}/nowhere")
    yield port
    runtime.db = real


def test_readyz_without_the_key_names_no_host_port_or_user(
    service: LiveService, unreachable_database: int, caplog: pytest.LogCaptureFixture
):
    with caplog.at_level(logging.WARNING, logger="service.api.routes.health"):
        bare = httpx.get(f"{service.base_url}/readyz", timeout=30)
    keyed = service.client.get("/readyz")

    assert (bare.status_code, bare.json()) == (
        503,
        {"status": "database unavailable", "detail": DATABASE_DOWN},
    )
    assert keyed.status_code == 503
    assert str(unreachable_database) in keyed.json()["detail"]
    assert any(str(unreachable_database) in r.getMessage() for r in caplog.records)
