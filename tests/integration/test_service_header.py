"""Every answer names the service and its version, so the filter can tell a wrong key from a
wrong address (another server) and name incompatible versions."""

import httpx

from service import __version__
from testkit.live_service import LiveService


def test_every_answer_carries_the_service_header_errors_included(service: LiveService) -> None:
    keyless = httpx.Client(base_url=service.base_url, trust_env=False, timeout=30)
    answers = {
        "ok": service.client.get("/v1/status"),
        "wrong key": keyless.post("/v1/context", headers={"Authorization": "Bearer nope"}),
        "unknown path": service.client.post("/v1/no-such-route", json={}),
        "bad body": service.client.post("/v1/commands", json={"command": 3}),
        "health": keyless.get("/healthz"),
    }
    keyless.close()

    assert {k: a.status_code for k, a in answers.items()} == {
        "ok": 200,
        "wrong key": 401,
        "unknown path": 404,
        "bad body": 422,
        "health": 200,
    }
    assert {k: a.headers.get("x-memory-service") for k, a in answers.items()} == dict.fromkeys(
        answers, __version__
    )
