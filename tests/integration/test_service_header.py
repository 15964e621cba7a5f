"""Every answer names the service and its version, so the filter can tell a wrong key from a
wrong address (another server) and name incompatible versions."""

import httpx

from service import __version__
from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from tests.support.emitter import EventRecorder


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


# --- a service_url with a path is not a version mismatch (issue 30 item 1) ------------------


async def _admin_line(url: str, key: str) -> str:
    """The status line an admin is shown on one turn with `service_url` = `url`."""
    module = load_filter()
    instance = module.Filter()
    instance.valves = instance.Valves(service_url=url, api_key=key, inlet_timeout_s=30)
    events = EventRecorder()
    body = {"model": "m", "messages": [{"role": "user", "content": "What should I cook?"}]}
    await instance.inlet(
        body,
        __user__={"id": "u-admin", "name": "Ada", "role": "admin"},
        __metadata__={"chat_id": "c-url", "message_id": "a1"},
        __event_emitter__=events,
        __chat_id__="c-url",
    )
    [line] = [e["data"]["description"] for e in events.events]
    return str(line)


async def test_a_service_url_ending_in_v1_is_named_as_the_wrong_address_not_a_version(
    service: LiveService,
) -> None:
    line = await _admin_line(service.base_url + "/v1", service.api_key)

    assert line == (
        f"Memory misconfigured — the memory service at {service.base_url}/v1 has no "
        "/v1/v1/context (HTTP 404): the service_url valve should not end in /v1; set it to "
        f"{service.base_url} (the service's address and port)"
    )
    assert "incompatible" not in line


async def test_any_other_path_in_the_service_url_is_named_too(service: LiveService) -> None:
    line = await _admin_line(service.base_url + "/memory/", service.api_key)

    assert line == (
        f"Memory misconfigured — the memory service at {service.base_url}/memory has no "
        "/memory/v1/context (HTTP 404): the service_url valve should have no path; set it to "
        f"{service.base_url} (the service's address and port)"
    )


def test_an_unknown_path_is_answered_with_a_sentence_that_names_it(service: LiveService) -> None:
    answer = service.client.post("/v1/v1/context", json={})

    assert answer.status_code == 404
    assert answer.json() == {
        "detail": "the memory service has no /v1/v1/context: its routes start with /v1 right "
        "after its address (http://host:port/v1/…), so a client's base URL ends in the port"
    }
