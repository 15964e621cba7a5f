"""The end-to-end stack: a real Open WebUI 0.12.4, our memory service, two stub LLMs.

Skipped unless `E2E_OPENWEBUI` is set; `make e2e` installs what it needs (tests/e2e/setup.sh)
and sets it. One stack serves the whole session (Open WebUI takes ~30 s to start):

- `model_stub`: the only model Open WebUI knows (`stub-model`); its request log is what the
  model received.
- `extraction_stub`: the memory service's LLM; answers every extraction with no facts, so
  memories exist only where a test adds them.
- the service: `python -m service serve` with its own embedded PostgreSQL in a temp dir.
- Open WebUI: offline, fresh data dir, channels on and folder sharing allowed, an admin from
  the environment, two ordinary users, a public read row for `stub-model`, and our filter,
  pipe and events function installed by our installer CLI.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from testkit.extraction_replies import by_message
from testkit.llm_stub import MODEL_ID, LLMStub
from testkit.openwebui import (
    ARTIFACTS,
    CHROMIUM,
    OPEN_WEBUI_BIN,
    PLAYWRIGHT_PYTHON,
    REPO,
    ManagedProcess,
    OpenWebUIClient,
    free_port,
)
from testkit.openwebui_stack import (
    ADMIN_EMAIL,
    ADMIN_PASSWORD,
    OPEN_WEBUI_START_TIMEOUT_S,
    SERVICE_START_TIMEOUT_S,
    Stack,
    add_user,
    open_webui_env,
    service_env,
    sign_in,
)
from tests.support import memory_blocks

E2E_DIR = Path(__file__).resolve().parent
#: seconds of each setup step, printed at the end of the run
TIMINGS: dict[str, float] = {}


E2E_TEST_TIMEOUT_S = 900
"""pytest-timeout per e2e test: the first one also installs and starts Open WebUI and the
service (SERVICE_START_TIMEOUT_S + OPEN_WEBUI_START_TIMEOUT_S and more)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.environ.get("E2E_OPENWEBUI"):
        for item in items:
            if E2E_DIR in item.path.parents:
                item.add_marker(pytest.mark.timeout(E2E_TEST_TIMEOUT_S))
        return
    skip = pytest.mark.skip(reason="drives a real Open WebUI: run `make e2e`")
    for item in items:
        if E2E_DIR in item.path.parents:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.write_line(
            "e2e timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in TIMINGS.items())
        )
    if BLOCKS["tests"]:
        terminalreporter.write_line(
            f"e2e memory blocks: {BLOCKS['blocks']} in {BLOCKS['requests']} model requests of "
            f"{BLOCKS['tests']} tests, {BLOCKS['problems']} with a fact twice or a second block"
        )


#: What `no_injected_block_holds_a_fact_twice` saw over the session.
BLOCKS = {"tests": 0, "requests": 0, "blocks": 0, "problems": 0, "deselected": 0}


def pytest_deselected(items: list[pytest.Item]) -> None:
    BLOCKS["deselected"] += sum(E2E_DIR in item.path.parents for item in items)


@pytest.fixture(autouse=True)
def no_injected_block_holds_a_fact_twice(request: pytest.FixtureRequest) -> Iterator[None]:
    """Issue 15 item 3 as a property of the whole e2e suite: every chat request the stand-in
    model got during a test holds at most one memory block and no fact twice in it."""
    if "stack" not in request.fixturenames:
        yield
        return
    stack: Stack = request.getfixturevalue("stack")
    mark = stack.model_log.mark()
    yield
    seen = list(stack.model_log.iter_chat(mark))
    blocks, problems = memory_blocks.check_requests(seen)
    BLOCKS["tests"] += 1
    BLOCKS["requests"] += len(seen)
    BLOCKS["blocks"] += blocks
    BLOCKS["problems"] += len(problems)
    assert problems == [], problems


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A whole e2e run that saw no memory block checked nothing: fail it."""
    files = {item.path for item in session.items if E2E_DIR in item.path.parents}
    ran_all = (
        os.environ.get("E2E_OPENWEBUI")
        and exitstatus == pytest.ExitCode.OK
        and BLOCKS["deselected"] == 0
        and files == set(E2E_DIR.glob("test_e2e_*.py"))
    )
    if ran_all and BLOCKS["blocks"] == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                "e2e memory blocks: the whole suite ran but no model request held a memory "
                "block, so `no_injected_block_holds_a_fact_twice` checked nothing",
                red=True,
            )


def _own_folder(cleanup: ExitStack, prefix: str) -> Path:
    """A fresh folder in the system temp dir, removed when `cleanup` closes."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    cleanup.callback(shutil.rmtree, folder, True)
    return folder


def _require_installed() -> None:
    missing = [str(p) for p in (OPEN_WEBUI_BIN, PLAYWRIGHT_PYTHON, CHROMIUM) if not p.exists()]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run `bash tests/e2e/setup.sh` (make e2e)")


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    _require_installed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with ExitStack() as cleanup:
        model_stub = LLMStub(log_path=ARTIFACTS / "model-requests.jsonl").start()
        cleanup.callback(model_stub.stop)
        (ARTIFACTS / "model-requests.jsonl").write_text("", encoding="utf-8")
        extraction_stub = LLMStub(by_message({})).start()
        cleanup.callback(extraction_stub.stop)

        service_port, owui_port = free_port(), free_port()
        service_key = secrets.token_urlsafe(24)
        service_url = f"http://127.0.0.1:{service_port}"
        base_url = f"http://127.0.0.1:{owui_port}"
        work_dir = tmp_path_factory.mktemp("owui-work")

        started = time.monotonic()
        service = ManagedProcess.start(
            "memory service",
            [sys.executable, "-m", "service", "serve"],
            # Not under pytest's temp root: it is private to its user (0700), and the
            # embedded PostgreSQL runs as its own user when the tests run as root.
            env=service_env(
                _own_folder(cleanup, "memory-e2e-state-"),
                service_port,
                service_key,
                extraction_stub.base_url,
            ),
            cwd=REPO,
            log_path=ARTIFACTS / "memory-service.log",
        )
        cleanup.callback(service.stop)
        owui = ManagedProcess.start(
            "open-webui",
            [str(OPEN_WEBUI_BIN), "serve", "--host", "127.0.0.1", "--port", str(owui_port)],
            env=open_webui_env(tmp_path_factory.mktemp("owui-data"), model_stub.base_url),
            cwd=work_dir,
            log_path=ARTIFACTS / "open-webui.log",
        )
        cleanup.callback(owui.stop)
        # Both start at once; each wait is bounded and fails with the process's last output.
        service.wait_http(f"{service_url}/readyz", timeout_s=SERVICE_START_TIMEOUT_S)
        TIMINGS["service ready"] = time.monotonic() - started
        owui.wait_http(f"{base_url}/health", timeout_s=OPEN_WEBUI_START_TIMEOUT_S)
        TIMINGS["open-webui ready"] = time.monotonic() - started

        admin = sign_in(base_url, ADMIN_EMAIL, ADMIN_PASSWORD)
        admin_client = OpenWebUIClient(base_url, admin)
        users = {
            "a": add_user(admin_client, "Alice", "alice@example.com"),
            "b": add_user(admin_client, "Bob", "bob@example.com"),
        }
        # Ordinary users may only use models that have a row granting them read access.
        admin_client.call("GET", "/api/models", params={"refresh": "true"})
        admin_client.call(
            "POST",
            "/api/v1/models/create",
            json={
                "id": MODEL_ID,
                "base_model_id": None,
                "name": MODEL_ID,
                "meta": {},
                "params": {},
                "is_active": True,
                "access_grants": [
                    {"principal_type": "user", "principal_id": "*", "permission": "read"}
                ],
            },
        )
        # The admin's first browser visit would open a blocking "What's New" dialog.
        admin_client.call(
            "POST", "/api/v1/users/user/settings/update", json={"ui": {"showChangelog": False}}
        )

        service_client = httpx.Client(
            base_url=service_url,
            timeout=30,
            trust_env=False,
            headers={"Authorization": f"Bearer {service_key}"},
        )
        cleanup.callback(service_client.close)
        result = Stack(
            base_url,
            admin,
            users,
            service_url,
            service_key,
            service_client,
            model_stub,
            extraction_stub,
            installer_output="",
        )
        result.clients["admin"] = admin_client

        def close_clients() -> None:
            for client in result.clients.values():
                client.close()

        cleanup.callback(close_clients)

        installing = time.monotonic()
        installed = result.run_installer()
        TIMINGS["installer"] = time.monotonic() - installing
        assert installed.returncode == 0, installed.stderr + installed.stdout
        result.installer_output = installed.stdout
        result.be_patient_with_the_service()
        TIMINGS["stack ready"] = time.monotonic() - started
        (ARTIFACTS / "timings.json").write_text(json.dumps(TIMINGS, indent=2), encoding="utf-8")
        yield result
