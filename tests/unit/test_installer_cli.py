"""The installer learns the service's address from its settings; the start banner says it."""

import pytest

from service.cli import main, openwebui, openwebui_checks
from service.cli.openwebui_client import OpenWebUIError


def test_the_installer_defaults_to_the_port_the_service_is_configured_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORY_PORT", "28765")
    monkeypatch.setenv("MEMORY_HOST", "127.0.0.1")
    assert openwebui.local_service_url() == "http://127.0.0.1:28765"


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:28765"),
        ("0.0.0.0", "http://127.0.0.1:28765"),
        ("::", "http://127.0.0.1:28765"),
        ("::1", "http://[::1]:28765"),
        ("memory.internal", "http://memory.internal:28765"),
    ],
)
def test_a_wildcard_bind_address_is_reached_on_loopback(host: str, url: str) -> None:
    assert openwebui.service_url_of(host, 28765) == url


def test_the_start_banner_prints_the_install_command_with_the_service_url() -> None:
    banner = main.FILTER_HELP.format(url="http://127.0.0.1:28765", key="k-1")
    command = " ".join(banner.replace("\\\n", " ").split())
    # Open WebUI's address is a placeholder to fill in, its default port only an example
    # (issue 30 item 8)
    assert (
        ".venv/bin/python -m service openwebui install "
        "--url <your Open WebUI URL, e.g. http://127.0.0.1:8080> "
        "--service-url http://127.0.0.1:28765 --email <admin e-mail> --password <admin password>"
    ) in command
    assert "--url http://" not in command
    assert "--token" not in command


class _Answers:
    """An Open WebUI session that answers every chat turn with one text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def ask(self, model_id: str, text: str) -> str:
        return self.text


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (
            "Memory is not set up correctly, so this /memory command did not run. Trying again "
            "will not help: please tell your admin.\n\nFor the admin: the memory service at "
            "http://127.0.0.1:8765 refused the api_key valve (HTTP 401)",
            "Open WebUI's filter cannot use the memory service: the memory service at "
            "http://127.0.0.1:8765 refused the api_key valve (HTTP 401)",
        ),
        (
            "The memory service is not reachable right now, so this /memory command did not "
            "run. Please try again in a moment.",
            "Open WebUI's filter cannot use the memory service (this filter gives no cause: "
            "install the current one)",
        ),
        (
            "This model only answers /memory commands typed in a chat.",
            "the filter did not run for model memory_commands: check that it is active and "
            "global (or attached to that model)",
        ),
    ],
)
def test_the_check_through_open_webui_fails_with_the_filters_cause(answer: str, error: str) -> None:
    with pytest.raises(OpenWebUIError) as raised:
        openwebui_checks.check_through_openwebui(_Answers(answer), "memory_commands")  # type: ignore[arg-type]
    assert str(raised.value) == error


def test_the_check_through_open_webui_passes_on_the_services_answer() -> None:
    answer = _Answers("Memory commands work in chats only.")
    assert openwebui_checks.check_through_openwebui(answer, "memory_commands") == (  # type: ignore[arg-type]
        "check: a /memory command typed in Open WebUI (model memory_commands) reached the "
        "memory service with the filter's key"
    )


def test_the_start_banner_points_to_a_readme_section_that_exists() -> None:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    headings = {line.lstrip("#").strip() for line in readme.splitlines() if line.startswith("#")}
    named = re.findall(r'README\.md, "([^"]+)"', main.FILTER_HELP.replace("\n", " "))
    assert named and all(name in headings for name in named), (named, sorted(headings))
