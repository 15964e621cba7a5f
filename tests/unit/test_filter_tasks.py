"""Background task requests (titles, tags, follow-ups, …) never carry memories (DESIGN §3).

Open WebUI 0.12.4 does not run filters on its task requests (CONTRACT §2b): it renders the
chat's transcript into a task prompt with `open_webui.utils.task.replace_messages_variable`
(and `get_last_user_message` for `{{prompt}}`). The filter wraps those two functions so that
/memory commands, their answers and the injected memory block never reach a task model. The
fake below is a module whose template function calls them as module globals, as 0.12.4 does.
"""

import sys
import types

import pytest

from service.core.ranking import DATA_NOTE, RECALL_HEADER, render_block
from testkit.filter_loader import load_filter
from tests.support.memory_stub import TEST_TIMEOUT_S, MemoryServiceStub

CHAT_ID = "7f0c2d4e-0000-4000-8000-000000000001"
ALICE = {"id": "u-123", "name": "Alice", "role": "user"}
EXPORT = "Your memories (2):\n- a1b2c3 Alice's bank PIN hint is her cat's birthday"
BLOCK = "<userMemories>\nAlice sees Dr. Ortiz on Tuesdays\n</userMemories>\n\n" + DATA_NOTE

# The shape of open_webui/utils/task.py in 0.12.4: templates look their helpers up as globals.
FAKE_TASK_SOURCE = """
def get_last_user_message(messages):
    for message in reversed(messages):
        if message["role"] == "user":
            return message["content"]
    return None


def replace_messages_variable(template, messages=None, variable_name="MESSAGES"):
    text = "\\n".join(f"{m['role'].upper()}: {m['content']}" for m in messages or [])
    return template.replace("{{" + variable_name + "}}", text)


def title_generation_template(template, messages, user=None):
    prompt = get_last_user_message(messages)
    template = template.replace("{{prompt}}", prompt)
    return replace_messages_variable(template, messages)
"""
TEMPLATE = "### Task: title\nLast: {{prompt}}\n<chat_history>\n{{MESSAGES}}\n</chat_history>"


@pytest.fixture
def open_webui_tasks(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fake `open_webui.utils.task` in sys.modules (and its parent packages)."""
    for name in ("open_webui", "open_webui.utils"):
        package = types.ModuleType(name)
        package.__path__ = []
        monkeypatch.setitem(sys.modules, name, package)
    module = types.ModuleType("open_webui.utils.task")
    exec(FAKE_TASK_SOURCE, module.__dict__)
    monkeypatch.setitem(sys.modules, "open_webui.utils.task", module)
    return module


def _chat_with_commands() -> list[dict]:
    return [
        {"role": "system", "content": "You are helpful.\n\n" + BLOCK},
        {"role": "user", "content": "Plan my week"},
        {"role": "assistant", "content": "Sure, here is a plan."},
        {"role": "user", "content": "/memory export"},
        {"role": "assistant", "content": EXPORT},
        {"role": "user", "content": "Thanks, and lunch ideas?"},
        {"role": "assistant", "content": "Try a salad."},
        {"role": "user", "content": "/memories list"},
        {"role": "assistant", "content": EXPORT},
    ]


def test_task_prompts_leave_out_memory_commands_their_answers_and_the_memory_block(
    open_webui_tasks: types.ModuleType,
):
    load_filter().Filter()

    prompt = open_webui_tasks.title_generation_template(TEMPLATE, _chat_with_commands())

    assert prompt == (
        "### Task: title\nLast: Thanks, and lunch ideas?\n<chat_history>\n"
        "SYSTEM: You are helpful.\n"
        "USER: Plan my week\n"
        "ASSISTANT: Sure, here is a plan.\n"
        "USER: Thanks, and lunch ideas?\n"
        "ASSISTANT: Try a salad.\n"
        "</chat_history>"
    )


def test_a_chat_of_only_a_command_gives_the_task_an_empty_transcript(
    open_webui_tasks: types.ModuleType,
):
    load_filter().Filter()
    messages = [
        {"role": "user", "content": "/memory add my locker code is 5521"},
        {"role": "assistant", "content": "Saved: a1b2c3"},
    ]

    prompt = open_webui_tasks.title_generation_template(TEMPLATE, messages)

    assert prompt == "### Task: title\nLast: \n<chat_history>\n\n</chat_history>"
    assert len(messages) == 2  # Open WebUI's own list is not changed


def test_the_task_guard_wraps_once_and_a_reloaded_filter_replaces_it(
    open_webui_tasks: types.ModuleType,
):
    original = open_webui_tasks.replace_messages_variable
    load_filter().Filter()
    load_filter().Filter()
    load_filter().Filter().valves  # noqa: B018 - a third load, as after a code update

    wrapper = open_webui_tasks.replace_messages_variable
    assert wrapper is not original
    assert wrapper.__memory_banks_original__ is original
    assert wrapper("[{{MESSAGES}}]", [{"role": "user", "content": "/memory list"}]) == "[]"


def test_a_system_message_that_is_only_the_memory_block_is_left_out(
    open_webui_tasks: types.ModuleType,
):
    module = load_filter()

    kept = module.task_transcript(
        [
            {"role": "system", "content": BLOCK},
            {"role": "system", "content": [{"type": "text", "text": BLOCK}]},
            {"role": "user", "content": [{"type": "text", "text": "/memory search Ortiz"}]},
            {"role": "assistant", "content": EXPORT},
            {"role": "user", "content": "hello"},
        ]
    )

    assert kept == [{"role": "user", "content": "hello"}]


def test_the_filter_recognises_every_block_the_service_renders():
    # The filter cuts the block at its first line; these are the service's two openers.
    module = load_filter()
    profile_block = render_block(profile="Alice is a nurse.", core=[], items=[])

    assert profile_block.startswith(module.MEMORY_BLOCK_OPENERS[0])
    assert module.MEMORY_BLOCK_OPENERS[1] == RECALL_HEADER


async def test_a_task_request_that_reaches_the_inlet_loses_its_commands_and_gets_no_memory():
    module = load_filter()
    body = {"model": "task-model", "messages": _chat_with_commands()}
    with MemoryServiceStub() as stub:
        memory_filter = module.Filter()
        memory_filter.valves = module.Filter.Valves(
            service_url=stub.url, inlet_timeout_s=TEST_TIMEOUT_S
        )
        returned = await memory_filter.inlet(
            body,
            __user__=ALICE,
            __metadata__={"chat_id": CHAT_ID, "task": "follow_up_generation"},
            __chat_id__=CHAT_ID,
        )

    assert stub.paths() == []
    assert [m["content"] for m in returned["messages"]] == [
        "You are helpful.",
        "Plan my week",
        "Sure, here is a plan.",
        "Thanks, and lunch ideas?",
        "Try a salad.",
    ]


def test_a_mistyped_command_and_its_hint_are_left_out_of_task_prompts_too(
    open_webui_tasks: types.ModuleType,
):
    # issue 30 item 2: the hint says "Nothing was sent to the model"; the follow-up, title and
    # tag tasks of that turn must not send it either
    module = load_filter()
    module.Filter()
    hint = module.command_typo_hint("/memroy list")
    assert hint is not None and hint.endswith("Nothing was sent to the model.")
    messages = [
        {"role": "user", "content": "Plan my week"},
        {"role": "assistant", "content": "Sure, here is a plan."},
        {"role": "user", "content": "/memroy list"},
        {"role": "assistant", "content": hint},
    ]

    prompt = open_webui_tasks.title_generation_template(TEMPLATE, messages)

    assert prompt == (
        "### Task: title\nLast: Plan my week\n<chat_history>\n"
        "USER: Plan my week\n"
        "ASSISTANT: Sure, here is a plan.\n"
        "</chat_history>"
    )
