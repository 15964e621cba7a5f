"""testkit/llm_stub.py over real HTTP on 127.0.0.1."""

import json
from pathlib import Path

import httpx
import pytest

from testkit.llm_stub import DEFAULT_REPLY, LLMStub, StubReply


@pytest.fixture
def stub():
    with LLMStub() as running:
        yield running


def _post(url: str, **kwargs) -> httpx.Response:
    return httpx.post(url, trust_env=False, **kwargs)


def _get(url: str, **kwargs) -> httpx.Response:
    return httpx.get(url, trust_env=False, **kwargs)


def _sse_events(text: str) -> list[str]:
    """The `data:` payloads of a server-sent-events body, in order."""
    return [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]


def test_base_url_is_loopback_with_v1(stub: LLMStub) -> None:
    assert stub.base_url == f"http://127.0.0.1:{stub.port}/v1"
    assert stub.port > 0


def test_models_lists_the_stub_model(stub: LLMStub) -> None:
    response = _get(f"{stub.base_url}/models")
    assert response.status_code == 200
    assert response.json() == {
        "object": "list",
        "data": [{"id": "stub-model", "object": "model", "created": 0, "owned_by": "stub"}],
    }


def test_non_streaming_answer_is_a_chat_completion_with_usage(stub: LLMStub) -> None:
    response = _post(
        f"{stub.base_url}/chat/completions",
        json={
            "model": "stub-model",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hello there you"}]},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
            "response_format": {"type": "json_object"},
            "temperature": 0,
        },
    )
    assert response.status_code == 200
    data = response.json()
    assert data["object"] == "chat.completion"
    assert data["id"].startswith("chatcmpl-")
    assert data["model"] == "stub-model"
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": DEFAULT_REPLY},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert data["usage"] == {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def test_streaming_answer_is_chunks_then_done(stub: LLMStub) -> None:
    stub.responder = lambda request: "streamed reply for " + request["messages"][-1]["content"]
    response = _post(
        f"{stub.base_url}/chat/completions",
        json={
            "model": "stub-model",
            "stream": True,
            "messages": [{"role": "user", "content": "Ann"}],
        },
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = _sse_events(response.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop"}]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == "streamed reply for Ann"
    assert [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]] == [
        "streamed",
        " reply f",
        "or Ann",
    ]


def test_streaming_usage_chunk_when_asked(stub: LLMStub) -> None:
    response = _post(
        f"{stub.base_url}/chat/completions",
        json={
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "one two"}],
        },
    )
    chunks = [json.loads(e) for e in _sse_events(response.text)[:-1]]
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[0]["model"] == "m"


def test_every_request_body_is_logged_in_order(tmp_path: Path) -> None:
    log_path = tmp_path / "requests.jsonl"
    first = {"model": "stub-model", "messages": [{"role": "user", "content": "one"}]}
    second = {"model": "stub-model", "stream": True, "messages": [{"role": "user", "content": "2"}]}
    with LLMStub(log_path=log_path) as stub, httpx.Client(trust_env=False) as client:
        client.post(f"{stub.base_url}/chat/completions", json=first)
        client.post(f"{stub.base_url}/chat/completions", json=second)
        assert stub.requests == [first, second]
        stub.clear_requests()
        assert stub.requests == []
    lines = log_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [first, second]


def test_swapping_the_responder_changes_the_answer(stub: LLMStub) -> None:
    seen: list[dict] = []

    def echo(request: dict) -> str:
        seen.append(request)
        return "echo: " + request["messages"][0]["content"]

    body = {"model": "stub-model", "messages": [{"role": "user", "content": "ping"}]}
    stub.set_responder(echo)
    answer = _post(f"{stub.base_url}/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == "echo: ping"
    assert seen == [body]
    stub.set_responder(None)
    answer = _post(f"{stub.base_url}/chat/completions", json=body).json()
    assert answer["choices"][0]["message"]["content"] == "STUB-REPLY ok"


def test_a_failing_responder_answers_500(stub: LLMStub) -> None:
    def broken(request: dict) -> str:
        raise RuntimeError("no answer")

    stub.responder = broken
    response = _post(f"{stub.base_url}/chat/completions", json={"messages": []})
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "message": "the stub responder failed: RuntimeError('no answer')",
            "type": "stub_error",
        }
    }


def test_unknown_paths_and_bad_bodies_are_refused(stub: LLMStub) -> None:
    missing = _post(f"{stub.base_url}/completions", json={"input": "x"})
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "no route for POST /v1/completions"
    bad = _post(
        f"{stub.base_url}/chat/completions",
        content=b"not json",
        headers={"Content-Type": "application/json"},
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "the request body is not a JSON object"
    assert stub.requests == [{"input": "x"}, {"_raw": "not json"}]


def test_embeddings_are_answered_and_not_recorded_as_model_calls(stub: LLMStub) -> None:
    answer = _post(f"{stub.base_url}/embeddings", json={"input": ["a", "b"], "model": "m"})
    assert answer.status_code == 200
    data = answer.json()["data"]
    assert [(d["index"], len(d["embedding"])) for d in data] == [(0, 8), (1, 8)]
    assert data[0]["embedding"] != data[1]["embedding"]
    assert stub.requests == []


def test_stop_releases_the_port() -> None:
    stub = LLMStub().start()
    url = stub.base_url
    stub.stop()
    stub.stop()  # idempotent
    with pytest.raises(httpx.ConnectError):
        _get(f"{url}/models", timeout=2)


def test_a_reply_with_tool_calls_calls_them_streamed_or_not(stub: LLMStub) -> None:
    stub.responder = lambda _request: StubReply(tool_calls=[("memory_search", {"query": "bees"})])
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "memory_search", "arguments": '{"query": "bees"}'},
    }
    body = {"model": "m", "messages": [{"role": "user", "content": "bees?"}]}

    plain = _post(f"{stub.base_url}/chat/completions", json=body).json()
    streamed = _post(f"{stub.base_url}/chat/completions", json={**body, "stream": True})

    assert plain["choices"][0]["message"] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [call],
    }
    assert plain["choices"][0]["finish_reason"] == "tool_calls"
    chunks = [json.loads(e) for e in _sse_events(streamed.text)[:-1]]
    assert chunks[-2]["choices"][0]["delta"] == {"tool_calls": [{"index": 0, **call}]}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
