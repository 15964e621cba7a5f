"""The README's "Your first remembered fact" and docs/tutorial/first-fact.md, steps 4-7, through
the real filter, the command pipe and the service (issue 29 item 11: a newcomer gets from clone
to a remembered fact by following the README; each sentence it prints is checked here).

The chat model is not needed (commands never reach it); the extraction LLM is a stand-in that
answers the tutorial's "Remember that my sister is called Ana." as a real model would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.chat_harness import FilterHarness, load_filter_instance
from testkit.extraction_replies import by_message, new_op
from testkit.filter_loader import load_filter
from testkit.live_service import LiveService
from testkit.llm_stub import LLMStub
from tests.integration.test_commands import PIPE_PATH, Session

REPO = Path(__file__).resolve().parents[2]

QUESTION = "How do I look after my bees in winter?"
"""The README's question in a new chat (cosine 0.49 to "User keeps bees" with the bundled model)."""


@pytest.fixture
def llm() -> Iterator[LLMStub]:
    with LLMStub(
        responder=by_message({"sister is called Ana": [new_op("User's sister is called Ana")]})
    ) as stub:
        yield stub


@pytest.fixture
def live(service_factory, llm: LLMStub) -> LiveService:  # type: ignore[no-untyped-def]
    return service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")


@pytest.fixture
def harness(live: LiveService) -> FilterHarness:
    instance = load_filter_instance()
    instance.valves = instance.Valves(
        service_url=live.base_url, api_key=live.api_key, inlet_timeout_s=5, outlet_timeout_s=5
    )
    return FilterHarness(instance)


@pytest.fixture
def pipe() -> Any:
    return load_filter(PIPE_PATH).Pipe()


def _statuses(events: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("data", {}).get("description")) for e in events]


async def test_the_first_remembered_fact_as_the_readme_tells_it(
    harness: FilterHarness, pipe: Any, live: LiveService
) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tutorial = (REPO / "docs" / "tutorial" / "first-fact.md").read_text(encoding="utf-8")
    for page in (readme, tutorial):
        assert "/memory add I keep bees" in page and QUESTION in page
    user = Session(harness, pipe, "newcomer")

    # step 4: the answer comes from the service, in the shape the README prints
    added, body = await user.type("/memory add I keep bees")
    assert body["model"] == "memory_commands"
    found = re.fullmatch(
        r"Remembered in Personal:\n\n- `([0-9a-z]{6})` Personal · (\S+) · (.+)", added
    )
    assert found is not None, added
    short_id, _, content = found.groups()
    assert content == "User keeps bees"
    assert re.search(r"- \w{6} Personal · \d{4}-\d\d-\d\d · User keeps bees", readme)

    # step 5: a new chat recalls it before the model answers, and says so in its status line
    user.new_chat()
    request, metadata, message_id, reply_id = user.chat.inlet_request(QUESTION)
    seen = await harness.inlet(user.chat, request, metadata)
    assert "User keeps bees" in seen.system_text
    assert _statuses(seen.events) == ["Recalled 1 memory"]
    assert '"Recalled 1 memory"' in readme
    out = user.chat.record_turn(
        user_message_id=message_id, text=QUESTION, assistant_id=reply_id, reply="Wrap the hive."
    )
    await harness.outlet(user.chat, out, metadata)
    why, _ = await user.type("/memory why")
    assert "User keeps bees" in why

    # step 6: with an LLM, "Remember that …" is learned right after the reply
    await user.type("Remember that my sister is called Ana.")
    live.wait_for_extraction()
    listing, _ = await user.type("/memory list")
    assert "User's sister is called Ana" in listing

    # step 7: forget it by its id; the listing no longer has it
    assert "/memory forget mfca53" in readme  # the id its printed answer shows
    forgot, _ = await user.type(f"/memory forget {short_id}")
    assert forgot.startswith(f"Forgotten `{short_id}` everywhere.")
    listing, _ = await user.type("/memory list")
    assert "User keeps bees" not in listing
    assert "User's sister is called Ana" in listing
