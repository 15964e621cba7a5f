"""Who is told what in a real Open WebUI 0.12.4 when memory cannot work (issue 15 items 1, 5).

A wrong key or a wrong server is the admin's to fix: an ordinary user is told once a day to
tell their admin, an admin sees the exact cause on every turn, and `doctor` names it. A
service that is not reachable is "unavailable" for everyone, on every turn (retrying helps).
Without an LLM only admins are told why nothing is learned, and `/v1/status` and `doctor`
say it. The status lines are read from the chat as Open WebUI stored them.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

import httpx
import pytest

from service.cli import doctor
from testkit.openwebui import (
    ARTIFACTS,
    REPO,
    ManagedProcess,
    OpenWebUIClient,
    free_port,
    status_lines,
)
from testkit.openwebui_stack import SERVICE_START_TIMEOUT_S, Stack, add_user, service_env
from tests.e2e.conftest import _own_folder

pytestmark = pytest.mark.e2e

UNAVAILABLE = "Memory unavailable — answering without it"
NOT_SAVED = "Memory could not save this turn"
MISCONFIGURED = (
    "Memory is not set up correctly, so I am answering without it — please tell your admin"
)
COMMAND_UNAVAILABLE = (
    "The memory service is not reachable right now, so this /memory command did not run. "
    "Please try again in a moment."
)
COMMAND_MISCONFIGURED = (
    "Memory is not set up correctly, so this /memory command did not run. Trying again "
    "will not help: please tell your admin."
)
NO_LLM_FOR_ADMINS = (
    "Memory (admins only): turns are kept, but learning waits until the memory service has "
    "an LLM (LLM_BASE_URL, LLM_MODEL); `python -m service doctor` checks it"
)
DAY = 1_767_261_600  # 2026-01-01T10:00:00Z: the browser stamps each user message
HOUR = 3600


@dataclass
class Person:
    """A user made for one test (nobody has been told anything yet today)."""

    client: OpenWebUIClient
    role: str


@pytest.fixture
def people(stack: Stack) -> Iterator[dict[str, Person]]:
    """A fresh ordinary user and the admin."""
    tag = uuid.uuid4().hex[:8]
    account = add_user(stack.client("admin"), f"User {tag}", f"user-{tag}@example.com")
    user = OpenWebUIClient(stack.base_url, account)
    yield {"user": Person(user, "user"), "admin": Person(stack.client("admin"), "admin")}
    user.close()


@pytest.fixture
def reinstall_after(stack: Stack) -> Iterator[None]:
    yield
    restored = stack.run_installer()
    stack.be_patient_with_the_service()
    assert restored.returncode == 0, restored.stderr


def _break(stack: Stack, kind: str) -> tuple[str, str]:
    """Install the filter wrongly; returns (the cause admins are shown, its address)."""
    if kind == "wrong_key":
        url = stack.service_url
        installed = stack.run_installer("--api-key", "not-the-key")
        cause = (
            f"the memory service at {url} refused the api_key valve (HTTP 401): set it to the "
            "service's key (`python -m service api-key` prints it)"
        )
    elif kind == "another_server":  # Open WebUI's own port: it answers, but is not ours
        url = stack.base_url
        installed = stack.run_installer("--service-url", url)
        cause = f"{url} answered HTTP 405 but is not the memory service"
    else:
        url = f"http://127.0.0.1:{free_port()}"
        installed = stack.run_installer("--service-url", url)
        cause = f"cannot reach the memory service at {url} ("
    stack.be_patient_with_the_service()
    assert installed.returncode == 1
    assert installed.stderr.startswith(
        "error: installed, but Open WebUI's filter cannot use the memory service: " + cause
    ), installed.stderr
    return cause, url


def _lines(person: Person, *, day_offset_h: int) -> list[str]:
    """The status lines of one turn in a new chat, sent `day_offset_h` hours after DAY."""
    thread = person.client.new_thread()
    turn = person.client.send(
        thread, "What should I cook tonight?", timestamp=DAY + day_offset_h * HOUR
    )
    return status_lines(turn.stored)


@pytest.mark.usefixtures("reinstall_after")
@pytest.mark.parametrize("kind", ["wrong_key", "another_server"])
def test_a_misconfiguration_tells_a_user_once_a_day_and_the_admin_the_cause_every_turn(
    stack: Stack, people: dict[str, Person], kind: str
):
    cause, _ = _break(stack, kind)
    user, admin = people["user"], people["admin"]

    seen = {
        "user, first turn of the day": _lines(user, day_offset_h=0),
        "user, same day": _lines(user, day_offset_h=6),
        "user, same day again": _lines(user, day_offset_h=8),
        "user, next day": _lines(user, day_offset_h=24),
        "admin, first turn": _lines(admin, day_offset_h=0),
        "admin, same day": _lines(admin, day_offset_h=6),
    }
    user_command = user.client.send(user.client.new_thread(), "/memory list").reply
    admin_command = admin.client.send(admin.client.new_thread(), "/memory list").reply
    verdict = doctor._check_filter_path(stack.base_url, doctor.AdminLogin(token=stack.admin.token))

    # one line per turn: the outlet stores nothing the inlet's line said already
    admin_line = seen["admin, first turn"][0]
    assert admin_line.startswith("Memory misconfigured — " + cause), admin_line
    assert seen == {
        "user, first turn of the day": [MISCONFIGURED],
        "user, same day": [],
        "user, same day again": [],
        "user, next day": [MISCONFIGURED],
        "admin, first turn": [admin_line],
        "admin, same day": [admin_line],
    }
    assert user_command == COMMAND_MISCONFIGURED
    assert admin_command.startswith(COMMAND_MISCONFIGURED + "\n\nFor the admin: " + cause)
    assert verdict.level == "FAIL"
    assert verdict.sentence.startswith(
        "Open WebUI's filter cannot use the memory service: " + cause
    ), verdict.sentence


@pytest.mark.usefixtures("reinstall_after")
def test_an_unreachable_service_is_unavailable_for_everyone_on_every_turn(
    stack: Stack, people: dict[str, Person]
):
    cause, _ = _break(stack, "nothing_listens")
    user, admin = people["user"], people["admin"]

    seen = {
        "user": [_lines(user, day_offset_h=0), _lines(user, day_offset_h=1)],
        "admin": [_lines(admin, day_offset_h=0), _lines(admin, day_offset_h=1)],
    }
    user_command = user.client.send(user.client.new_thread(), "/memory list").reply
    admin_command = admin.client.send(admin.client.new_thread(), "/memory list").reply
    verdict = doctor._check_filter_path(stack.base_url, doctor.AdminLogin(token=stack.admin.token))

    # both lines stay visible: the last one repeats the inlet's before the outlet's
    both = [UNAVAILABLE, f"{UNAVAILABLE} · {NOT_SAVED}"]
    assert seen == {"user": [both, both], "admin": [both, both]}
    assert user_command == COMMAND_UNAVAILABLE
    assert admin_command.startswith(COMMAND_UNAVAILABLE + "\n\nFor the admin: " + cause)
    assert verdict.level == "FAIL"
    assert verdict.sentence.startswith(
        "Open WebUI's filter cannot use the memory service: " + cause
    ), verdict.sentence


@pytest.fixture(scope="module")
def service_without_llm(stack: Stack) -> Iterator[tuple[str, str, dict[str, str]]]:
    """A second memory service with no LLM configured: (url, key, its environment)."""
    with ExitStack() as cleanup:
        port, key = free_port(), secrets.token_urlsafe(24)
        env = service_env(_own_folder(cleanup, "memory-e2e-no-llm-"), port, key, "")
        del env["LLM_BASE_URL"], env["LLM_MODEL"]
        url = f"http://127.0.0.1:{port}"
        service = ManagedProcess.start(
            "memory service without an LLM",
            [sys.executable, "-m", "service", "serve"],
            env=env,
            cwd=REPO,
            log_path=ARTIFACTS / "memory-service-no-llm.log",
        )
        cleanup.callback(service.stop)
        service.wait_http(f"{url}/readyz", timeout_s=SERVICE_START_TIMEOUT_S)
        yield url, key, env


@pytest.mark.usefixtures("reinstall_after")
def test_without_an_llm_only_admins_are_told_and_status_and_doctor_say_why(
    stack: Stack,
    people: dict[str, Person],
    service_without_llm: tuple[str, str, dict[str, str]],
):
    url, key, env = service_without_llm
    installed = stack.run_installer("--service-url", url, "--api-key", key)
    assert installed.returncode == 0, installed.stderr
    stack.be_patient_with_the_service()
    user, admin = people["user"], people["admin"]

    seen = {
        "user": [_lines(user, day_offset_h=h) for h in (0, 1, 24)],
        "admin": [_lines(admin, day_offset_h=h) for h in (0, 1)],
    }
    status = _service_status(url, key)
    checked = subprocess.run(
        [sys.executable, "-m", "service", "doctor", "--openwebui-url", stack.base_url],
        env={**env, "OPENWEBUI_TOKEN": stack.admin.token},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )

    assert seen == {"user": [[], [], []], "admin": [[NO_LLM_FOR_ADMINS], [NO_LLM_FOR_ADMINS]]}
    assert (status["llm_configured"], status["turns_queued"]) == (False, 5)
    assert status["status"] == (
        "extraction paused: no LLM configured (set LLM_BASE_URL and LLM_MODEL); 5 turns waiting"
    )
    lines = checked.stdout.splitlines()
    # doctor checks the running service (the one at MEMORY_HOST:MEMORY_PORT), not its shell
    assert lines[0] == f"checked: the service running at {url} (its /readyz and /v1/status)"
    assert (
        "WARN service llm: the running service has no LLM configured: extraction paused: no "
        "LLM configured (set LLM_BASE_URL and LLM_MODEL); 5 turns waiting"
    ) in lines, checked.stdout + checked.stderr
    assert any(line.startswith("OK   filter → service: ") for line in lines), checked.stdout
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _service_status(url: str, key: str) -> dict[str, object]:
    answer = httpx.get(
        f"{url}/v1/status", headers={"Authorization": f"Bearer {key}"}, trust_env=False, timeout=30
    )
    assert answer.status_code == 200, answer.text
    status: dict[str, object] = answer.json()
    return status
