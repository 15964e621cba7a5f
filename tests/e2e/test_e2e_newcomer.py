"""What a new admin and an ordinary user meet in a real Open WebUI 0.12.4 (issue 15).

The installer checks its work through Open WebUI and names what is wrong; the manual install
of docs/howto/install-into-openwebui.md is complete; first-person memories read as the user's;
small confusions of the chat are gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.cli import doctor
from testkit.llm_stub import DEFAULT_REPLY
from testkit.openwebui import free_port, system_text
from testkit.openwebui_stack import Stack

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
FILTER_ID, PIPE_ID, EVENTS_ID = "memory_filter", "memory_commands", "memory_events"
ACTION_ID = "memory_action"
EVERYONE_READS = {"principal_type": "user", "principal_id": "*", "permission": "read"}
MISCONFIGURED_ANSWER = (
    "Memory is not set up correctly, so this /memory command did not run. Trying again "
    "will not help: please tell your admin."
)
INSTALLED_BUT = "error: installed, but Open WebUI's filter cannot use the memory service: "
CHECK_LINE = (
    "check: a /memory command typed in Open WebUI (model memory_commands) reached the "
    "memory service with the filter's key"
)
ACTION_CHECK_LINE = (
    "check: the Remember button (memory_action) reached the memory service with its key"
)


@pytest.fixture
def reinstall_after(stack: Stack) -> Iterator[None]:
    """Whatever a test breaks, the stack leaves it installed as the session started."""
    yield
    restored = stack.run_installer()
    stack.be_patient_with_the_service()
    assert restored.returncode == 0, restored.stderr


def _wrong_address(stack: Stack, kind: str) -> tuple[str, str]:
    """(--service-url, the cause the installer must name) for a wrong port."""
    if kind == "nothing_listens":
        url = f"http://127.0.0.1:{free_port()}"
        return url, f"cannot reach the memory service at {url} ("
    # Open WebUI's own port: something answers, but it is not the memory service
    return stack.base_url, f"{stack.base_url} answered HTTP 405 but is not the memory service"


@pytest.mark.usefixtures("reinstall_after")
@pytest.mark.parametrize("kind", ["nothing_listens", "another_server"])
def test_install_with_a_wrong_port_fails_and_names_the_cause(stack: Stack, kind: str):
    url, cause = _wrong_address(stack, kind)

    installed = stack.run_installer("--service-url", url)
    status = stack.run_installer(command="status")

    assert installed.returncode == 1
    assert installed.stderr.startswith(INSTALLED_BUT + cause), installed.stderr
    assert status.returncode == 1
    assert status.stderr.startswith(
        "error: Open WebUI's filter cannot use the memory service: " + cause
    )


@pytest.mark.usefixtures("reinstall_after")
def test_install_with_a_wrong_key_fails_and_users_are_told_to_ask_their_admin(stack: Stack):
    installed = stack.run_installer("--api-key", "not-the-key")
    alice = stack.client("a")
    answer = alice.send(alice.new_thread(), "/memory list").reply
    verdict = doctor._check_filter_path(stack.base_url, doctor.AdminLogin(token=stack.admin.token))

    cause = (
        f"the memory service at {stack.service_url} refused the api_key valve (HTTP 401): set "
        "it to the service's key (`python -m service api-key` prints it)"
    )
    assert installed.returncode == 1
    assert installed.stderr == INSTALLED_BUT + cause + "\n"
    assert answer == MISCONFIGURED_ANSWER  # not "try again in a moment": retrying never helps
    assert (verdict.level, verdict.sentence) == (
        "FAIL",
        "Open WebUI's filter cannot use the memory service: " + cause,
    )


def test_install_and_status_check_the_path_from_open_webui(stack: Stack):
    again = stack.run_installer()
    status = stack.run_installer(command="status")
    verdict = doctor._check_filter_path(stack.base_url, doctor.AdminLogin(token=stack.admin.token))

    assert again.returncode == 0, again.stderr
    assert CHECK_LINE in again.stdout.splitlines()
    assert status.stdout.splitlines()[-2:] == [CHECK_LINE, ACTION_CHECK_LINE]
    assert (verdict.level, verdict.sentence) == ("OK", CHECK_LINE)
    action = doctor._check_action_path(stack.base_url, doctor.AdminLogin(token=stack.admin.token))
    assert (action.level, action.sentence) == ("OK", ACTION_CHECK_LINE)


def _manual_install(stack: Stack) -> None:
    """docs/howto/install-into-openwebui.md's "Install by hand" steps 1-4 as the admin's browser
    sends them to Open WebUI (each UI action is one of these REST calls); step 6, the check,
    is the test's."""
    admin = stack.client("admin")
    names = {
        FILTER_ID: "Memory Banks",
        PIPE_ID: "Memory Commands",
        EVENTS_ID: "Memory Events",
        ACTION_ID: "Remember this",
    }
    for function_id, name in names.items():  # 1. paste each file with its id, save
        content = (REPO / "filter" / f"{function_id}.py").read_text(encoding="utf-8")
        admin.call(
            "POST",
            "/api/v1/functions/create",
            json={"id": function_id, "name": name, "content": content, "meta": {}},
        )
        admin.call("POST", f"/api/v1/functions/id/{function_id}/toggle")  # 2. switch on
    admin.call("POST", f"/api/v1/functions/id/{FILTER_ID}/toggle/global")  # 2. Global
    admin.call("POST", f"/api/v1/functions/id/{ACTION_ID}/toggle/global")  # 2. Global
    admin.call("GET", "/api/models", params={"refresh": "true"})
    admin.call(  # 3. the pipe's model: accessible to all users (read), then Hide Model
        "POST",
        "/api/v1/models/create",
        json={
            "id": PIPE_ID,
            "base_model_id": None,
            "name": "Memory Commands",
            "meta": {},
            "params": {},
            "access_grants": [EVERYONE_READS],
        },
    )
    row = admin.call("GET", "/api/v1/models/model", params={"id": PIPE_ID})
    admin.call(
        "POST",
        "/api/v1/models/model/update",
        json={
            "id": PIPE_ID,
            "base_model_id": None,
            "name": row["name"],
            "meta": {**row["meta"], "hidden": True},
            "params": row["params"],
        },
    )
    for function_id in (FILTER_ID, EVENTS_ID, ACTION_ID):  # 4. the valves of the three
        admin.call(
            "POST",
            f"/api/v1/functions/id/{function_id}/valves/update",
            json={"service_url": stack.service_url, "api_key": stack.service_key},
        )
    stack.be_patient_with_the_service()


@pytest.mark.usefixtures("reinstall_after")
def test_a_manual_install_as_documented_runs_memory_list_for_an_ordinary_user(stack: Stack):
    bob = stack.users["b"]
    stack.forget_memories(bob.id)
    stack.add_memory(bob.id, "User plays the cello")
    removed = stack.run_installer(command="uninstall")
    assert removed.returncode == 0, removed.stderr

    _manual_install(stack)
    client = stack.client("b")
    thread = client.new_thread()
    mark = stack.model_log.mark()
    turn = client.send(thread, "/memory list")
    status = stack.run_installer(command="status")
    # 6. the install page's check: doctor signs in with the admin's e-mail and password
    checked = doctor._check_filter_path(
        stack.base_url, doctor.AdminLogin(email=stack.admin.email, password=stack.admin.password)
    )

    assert "User plays the cello" in turn.reply
    assert turn.reply.startswith("**Memories** (1):")
    assert stack.model_log.since(mark) == []
    assert status.returncode == 0, status.stderr
    assert "model memory_commands: active, hidden, readable by everyone" in status.stdout
    assert status.stdout.splitlines()[-2:] == [CHECK_LINE, ACTION_CHECK_LINE]
    assert (checked.level, checked.sentence) == ("OK", CHECK_LINE)


def test_a_first_person_memory_reaches_the_model_as_the_users(stack: Stack):
    a = stack.users["a"]
    stack.forget_memories(a.id)
    alice = stack.client("a")
    thread = alice.new_thread()

    added = alice.send(thread, "/memory add I am allergic to penicillin").reply
    mark = stack.model_log.mark()
    alice.send(thread, "Can I take amoxicillin for my infection?")
    seen = list(stack.model_log.iter_chat(mark))

    assert added.endswith(" · User is allergic to penicillin")
    assert len(seen) == 1
    assert "User is allergic to penicillin" in system_text(seen[0])
    assert "I am allergic to penicillin" not in system_text(seen[0])


def _turns_total(stack: Stack) -> int:
    status = stack.service.get("/v1/status").json()
    return int(status["turns_queued"] + status["turns_done"] + status["turns_failed"])


@pytest.mark.parametrize("typed", ["/memroy list", "/memorys"])
def test_a_mistyped_command_gets_a_hint_and_never_reaches_the_model_or_extraction(
    stack: Stack, typed: str
):
    alice = stack.client("a")
    turns_before = _turns_total(stack)
    mark = stack.model_log.mark()

    reply = alice.send(alice.new_thread(), typed).reply

    assert reply.startswith("Did you mean `/memory ")
    assert stack.model_log.since(mark) == []
    assert _turns_total(stack) == turns_before


def test_memories_is_a_command_word_too(stack: Stack):
    mark = stack.model_log.mark()
    reply = stack.client("a").send(stack.client("a").new_thread(), "/memories").reply
    assert reply.startswith("**Memory commands**")
    assert stack.model_log.since(mark) == []


def test_why_in_a_new_chat_is_about_that_chat_and_one_memory_is_singular(stack: Stack):
    a = stack.users["a"]
    stack.forget_memories(a.id)
    stack.add_memory(a.id, "User keeps bees")
    alice = stack.client("a")
    first = alice.new_thread()
    assert alice.send(first, "How do I look after my bees?").reply == DEFAULT_REPLY

    fresh = alice.new_thread()
    why = alice.send(fresh, "/memory why").reply
    banks = alice.send(fresh, "/memory banks").reply

    assert why == "No memories went into a reply in this chat yet."
    assert "- **Personal**: 1 memory — read, write" in banks.splitlines()


def test_the_api_key_valve_is_a_password_field_in_open_webui(stack: Stack):
    spec: dict[str, Any] = stack.client("admin").call(
        "GET", f"/api/v1/functions/id/{FILTER_ID}/valves/spec"
    )
    assert spec["properties"]["api_key"]["input"] == {"type": "password"}


def test_the_installer_switches_open_webuis_own_memory_off_when_asked(stack: Stack):
    admin = stack.client("admin")
    before = admin.call("GET", "/api/v1/auths/admin/config")
    try:
        shown = stack.run_installer(command="status")
        switched = stack.run_installer("--native-memory-off")
        after = admin.call("GET", "/api/v1/auths/admin/config")
    finally:
        admin.call("POST", "/api/v1/auths/admin/config", json=before)

    assert before["ENABLE_MEMORIES"] is True
    assert any(line.startswith("open webui memory: still on") for line in shown.stdout.splitlines())
    assert switched.returncode == 0, switched.stderr
    assert "open webui memory: switched off for everyone (Memory Banks is the only memory)" in (
        switched.stdout.splitlines()
    )
    assert after["ENABLE_MEMORIES"] is False
    assert {k: v for k, v in after.items() if k != "ENABLE_MEMORIES"} == {
        k: v for k, v in before.items() if k != "ENABLE_MEMORIES"
    }
