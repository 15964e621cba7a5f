"""Chat Memory: facts about one conversation, read only in that chat, gone with the chat."""

from __future__ import annotations

from testkit.extraction_replies import by_message, new_op
from testkit.filter_loader import FILTER_PATH, load_filter
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub

SPEECH = "In this chat we are drafting a wedding speech for Sam and Ari"


def _chat(chat_id: str, **extra: object) -> dict[str, object]:
    return {"user_id": "uma", "chat_id": chat_id, "kind": "saved", **extra}


def _context(live: LiveService, chat: dict[str, object]) -> str:
    return live.client.post(
        "/v1/context", json={"chat": chat, "message": "What are we writing?"}
    ).json()["block"]


def test_chat_memory_is_read_only_in_its_chat_and_forgotten_with_it(service_factory) -> None:  # type: ignore[no-untyped-def]
    with LLMStub(
        responder=by_message(
            {
                "wedding speech": [
                    new_op(SPEECH, bank="chat"),
                    new_op("User's sister is Ari", bank="personal"),
                ]
            }
        )
    ) as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="m")
        live.client.post(
            "/v1/turns",
            json={
                "chat": _chat("speech-chat"),
                "user_message_id": "m1",
                "user_message": "Help me with a wedding speech for my sister Ari and Sam.",
            },
        )
        live.wait_for_extraction()
        prompt = llm.requests[-1]["messages"][-1]["content"]
    assert "Banks you may use: personal, interaction_patterns, chat" in prompt
    assert SPEECH in _context(live, _chat("speech-chat"))
    assert SPEECH not in _context(live, _chat("another-chat"))
    assert SPEECH in _context(
        live, _chat("speech-chat", collaborative=True, collaborative_reason="sender_not_owner")
    )
    listing = live.client.post(
        "/v1/commands", json={"chat": _chat("another-chat"), "command": "/memory list"}
    ).json()["text"]
    assert "wedding" not in listing and "Ari" in listing
    added = live.client.post(
        "/v1/commands",
        json={"chat": _chat("speech-chat"), "command": "/memory add chat: The toast is on June 6"},
    )
    assert added.json()["text"].startswith("Remembered in Chat Memory:")
    gone = live.client.delete("/v1/chats/speech-chat/memories")
    assert gone.json() == {"forgotten": 2}
    block = _context(live, _chat("speech-chat"))
    assert SPEECH not in block and "toast" not in block
    assert "User's sister is Ari" in block


async def test_the_events_function_forgets_chat_memory_when_open_webui_deletes_a_chat(
    service: LiveService,
) -> None:
    service.client.post(
        "/v1/commands",
        json={"chat": _chat("doomed"), "command": "/memory add chat: Draft two is final"},
    )
    service.client.post(
        "/v1/turns", json={"chat": _chat("doomed"), "user_message_id": "x", "user_message": "hello"}
    )
    events = load_filter(FILTER_PATH.parent / "memory_events.py").Event()
    events.valves = events.Valves(service_url=service.base_url, api_key=service.api_key)
    # The payloads as Open WebUI 0.12.4 builds them (events.py, build_event).
    await events.event(_event("chat.finished", "chat", "doomed"), __event_name__="chat.finished")
    assert "Draft two" in _context(service, _chat("doomed"))
    await events.event(_event("chat.deleted", "chat", "doomed"), __event_name__="chat.deleted")
    assert "Draft two" not in _context(service, _chat("doomed"))
    service.client.post(
        "/v1/commands", json={"chat": _chat("doomed"), "command": "/memory add chat: Draft three"}
    )
    await events.event(_event("chat.deleted_all", "user", "uma"), __event_name__="chat.deleted_all")
    assert "Draft three" not in _context(service, _chat("doomed"))
    events.valves = events.Valves(service_url="http://127.0.0.1:9", timeout_s=0.5)
    await events.event(_event("chat.deleted", "chat", "x"))  # never raises


def test_forgetting_all_chats_of_a_user_covers_chats_with_only_added_chat_memory(
    service: LiveService,
) -> None:
    # No turn was ever handed over from "notes-only": only `/memory add chat: …`.
    service.client.post(
        "/v1/commands",
        json={"chat": _chat("notes-only"), "command": "/memory add chat: Venue is the barn"},
    )
    other = {"user_id": "olga", "chat_id": "olga-chat", "kind": "saved"}
    service.client.post(
        "/v1/commands", json={"chat": other, "command": "/memory add chat: Olga's outline"}
    )
    gone = service.client.delete("/v1/users/uma/chat-memories")
    assert gone.json() == {"forgotten": 1}
    assert "barn" not in _context(service, _chat("notes-only"))
    assert "Olga's outline" in _context(service, other)


def _event(name: str, subject_type: str, subject_id: str) -> dict[str, object]:
    return {
        "event": name,
        "resource": name.rsplit(".", 1)[0],
        "subject": {"type": subject_type, "id": subject_id},
        "data": {"owner_id": "uma"},
    }
