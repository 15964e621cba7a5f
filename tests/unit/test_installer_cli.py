"""The installer learns the service's address from its settings; the start banner says it."""

import pytest

from service.cli import main, openwebui


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
    assert (
        ".venv/bin/python -m service openwebui install --url http://127.0.0.1:8080 "
        "--service-url http://127.0.0.1:28765 --email <admin e-mail> --password <admin password>"
    ) in command
    assert "--token" not in command
