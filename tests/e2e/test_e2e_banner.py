"""A newcomer starts the service on a port of its own and runs the install command its start
banner printed (issue 15 "Done when"): the install works and checks itself."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from testkit.openwebui import ARTIFACTS, REPO
from testkit.openwebui_stack import INSTALLER_TIMEOUT_S, Stack

pytestmark = pytest.mark.e2e

CHECK_LINE = (
    "check: a /memory command typed in Open WebUI (model memory_commands) reached the "
    "memory service with the filter's key"
)
ACTION_CHECK_LINE = (
    "check: the Remember button (memory_action) reached the memory service with its key"
)
_PRINTED = re.compile(r"^  (\.venv/bin/python -m service openwebui install .*?)$", re.M | re.S)


def _printed_command(log: str, fill: dict[str, str]) -> list[str]:
    """The install command of the service's start banner with each placeholder (`<admin
    e-mail>`) or example value filled in from `fill`, as a shell would split it."""
    found = _PRINTED.search(log.replace("\\\n", " "))
    assert found is not None, log[:2000]
    command = found.group(1)
    for shown, value in fill.items():
        command = command.replace(shown, shlex.quote(value))
    return shlex.split(command)


@pytest.fixture
def reinstall_after(stack: Stack) -> Iterator[None]:
    yield
    restored = stack.run_installer()
    stack.be_patient_with_the_service()
    assert restored.returncode == 0, restored.stderr


@pytest.mark.usefixtures("reinstall_after")
def test_the_install_command_printed_by_a_service_on_its_own_port_works(stack: Stack):
    port = urlsplit(stack.service_url).port
    fill = {
        # a placeholder, with Open WebUI's default port as its example (issue 30 item 8)
        "<your Open WebUI URL, e.g. http://127.0.0.1:8080>": stack.base_url,
        "<admin e-mail>": stack.admin.email,
        "<admin password>": stack.admin.password,
    }
    log = (ARTIFACTS / "memory-service.log").read_text(encoding="utf-8")
    argv = _printed_command(log, fill)
    # the shell that started the service: its key and port, nothing of the test run's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "LLM_"))}
    env.update(
        {"MEMORY_API_KEY": stack.service_key, "MEMORY_HOST": "127.0.0.1", "MEMORY_PORT": str(port)}
    )

    done = subprocess.run(
        [sys.executable, *argv[1:]],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=INSTALLER_TIMEOUT_S,
        check=False,
    )
    valves = stack.client("admin").call("GET", "/api/v1/functions/id/memory_filter/valves")

    assert port != 8765
    assert argv[argv.index("--service-url") + 1] == stack.service_url
    assert done.returncode == 0, done.stderr
    assert CHECK_LINE in done.stdout.splitlines()
    assert (valves["service_url"], valves["api_key"]) == (stack.service_url, stack.service_key)


def test_the_readme_key_instructions_match_a_default_open_webui(stack: Stack):
    """README: a default 0.12.4 offers API keys only after Admin Panel → Settings → General →
    Enable API Keys; then Settings → Account makes an `sk-…` key that `--token` takes."""
    admin = stack.client("admin")
    before = admin.call("GET", "/api/v1/auths/admin/config")
    refused = admin.http.post("/api/v1/auths/api_key")
    try:
        admin.call("POST", "/api/v1/auths/admin/config", json={**before, "ENABLE_API_KEYS": True})
        key = admin.call("POST", "/api/v1/auths/api_key")["api_key"]
        status = stack.run_installer(command="status", token=key)
    finally:
        admin.http.delete("/api/v1/auths/api_key")
        admin.call("POST", "/api/v1/auths/admin/config", json=before)

    assert before["ENABLE_API_KEYS"] is False
    assert refused.status_code == 403, refused.text
    assert key.startswith("sk-")
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[-2:] == [CHECK_LINE, ACTION_CHECK_LINE]
