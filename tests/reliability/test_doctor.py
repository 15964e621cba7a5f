"""`python -m service doctor`: one clear verdict per check, exit 1 on any FAIL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from service.cli.main import app
from testkit.llm_stub import LLMStub
from tests.reliability.support import wide_model
from tests.support.memory_stub import closed_port_url


def _doctor(env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    """Doctor on this shell's environment (--local: a service of a neighbour on the default
    port must not be checked instead); the verdict lines after the line saying so."""
    result = CliRunner().invoke(app, ["doctor", "--timeout-s", "5", "--local", *args], env=env)
    first, *lines = result.output.splitlines()
    assert first == "checked: this shell's environment (--local)", result.output
    return result.exit_code, lines


def _doctor_of_service(env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["doctor", "--timeout-s", "5", *args], env=env)
    return result.exit_code, result.output.splitlines()


def test_doctor_reads_the_running_services_configuration_not_the_shells(
    service_factory: Any, state_dir: Path
) -> None:
    """Issue 29 item 7: in a new shell (no LLM_*, no DATABASE_URL) doctor said "no LLM
    configured" about itself while the running service had one."""
    with LLMStub(responder=lambda _: '{"ok": true}') as llm:
        live = service_factory(LLM_BASE_URL=llm.base_url, LLM_MODEL="stub-model")
        port = llm.base_url.split(":")[2].split("/")[0]
        shell = {"MEMORY_STATE_DIR": str(state_dir)}
        code, lines = _doctor_of_service(
            shell, "--service-url", live.base_url, "--api-key", live.api_key
        )
        assert code == 0, lines
        assert (
            lines[0]
            == f"checked: the service running at {live.base_url} (its /readyz and /v1/status)"
        )
        assert lines[1] == f"OK   service: {live.base_url} is ready (model all-MiniLM-L6-v2)"
        assert lines[2].startswith(f"OK   service llm: stub-model at 127.0.0.1:{port}: ")
        assert lines[3].startswith("OK   service database: local socket/test_")
        assert lines[3].endswith("0 memories, 0 turns waiting, 0 failed")
        assert lines[-1] == "all 3 checks passed"

        # by default doctor checks the service at MEMORY_HOST:MEMORY_PORT when one answers
        host_port = live.base_url.removeprefix("http://")
        code, lines = _doctor_of_service(
            {
                **shell,
                "MEMORY_HOST": host_port.split(":")[0],
                "MEMORY_PORT": host_port.split(":")[1],
                "MEMORY_API_KEY": live.api_key,
            }
        )
        assert code == 0, lines
        assert lines[0].startswith(f"checked: the service running at {live.base_url}")

        # without its key the status is not read, and doctor says what to give
        code, lines = _doctor_of_service(shell, "--service-url", live.base_url)
        assert "WARN service status: not read: give the service's API key" in lines[2]


def test_doctor_says_when_nothing_answers_at_the_service_url(state_dir: Path) -> None:
    down = closed_port_url()
    code, lines = _doctor_of_service({"MEMORY_STATE_DIR": str(state_dir)}, "--service-url", down)
    assert code == 1
    assert lines[:2] == [
        f"checked: the service at {down} (--service-url)",
        f"FAIL service: nothing answered at {down}",
    ]


def test_a_healthy_setup_passes_every_check(database_url: str, state_dir: Path) -> None:
    with LLMStub(responder=lambda _: '{"ok": true}') as llm:
        base_url = llm.base_url
        code, lines = _doctor(
            {
                "DATABASE_URL": database_url,
                "MEMORY_STATE_DIR": str(state_dir),
                "LLM_BASE_URL": base_url,
                "LLM_MODEL": "stub-model",
            }
        )
    assert code == 0, lines
    assert [line.split(":")[0] for line in lines[:-1]] == [
        "OK   listen address",
        "OK   database",
        "OK   pgvector",
        "OK   migrations",
        "OK   turns",
        "OK   embedding model",
        "OK   llm models",
        "OK   llm",
    ]
    assert lines[3].startswith("OK   migrations: at the newest revision (")
    assert lines[4] == "OK   turns: 0 waiting, none failed"
    assert lines[5].startswith(
        "OK   embedding model: all-MiniLM-L6-v2 (onnx), 384 dimensions, one sentence in "
    )
    assert lines[6] == f"OK   llm models: {base_url} lists stub-model"
    assert lines[-1] == "all 8 checks passed"


def test_unreachable_parts_fail_with_a_sentence_each(state_dir: Path) -> None:
    down = closed_port_url()
    code, lines = _doctor(
        {
            "DATABASE_URL": f"postgresql://doctor@127.0.0.1:{down.rsplit(':', 1)[1]}/memory",
            "MEMORY_STATE_DIR": str(state_dir),
            "LLM_BASE_URL": f"{down}/v1",
            "LLM_MODEL": "m",
            "MEMORY_HOST": "0.0.0.0",
        },
        "--openwebui-url",
        down,
    )
    assert code == 1
    by_check = {line.split(":")[0].split(maxsplit=1)[1]: line for line in lines[:-1]}
    assert by_check["listen address"].startswith(
        "FAIL listen address: MEMORY_HOST=0.0.0.0 is reachable from other machines"
    )
    assert by_check["database"].startswith("FAIL database: cannot connect (DATABASE_URL 127.0.0.1:")
    assert by_check["embedding model"].startswith("OK   embedding model")
    assert by_check["llm"].startswith(f"FAIL llm: {down}/v1 is unreachable")
    assert by_check["open webui"].startswith(f"FAIL open webui: {down}/health did not answer")
    assert by_check["filter → service"] == (
        "WARN filter → service: not checked: give --email and --password (or --token) of an "
        "Open WebUI admin to check that the filter reaches this service with the right key"
    )
    assert lines[-1] == "4 of 6 checks failed"
    assert "doctor@" not in "\n".join(lines)  # no user or password of the URL is printed


def test_a_model_of_another_dimension_passes_the_model_check(
    database_url: str, state_dir: Path, tmp_path: Path
) -> None:
    model = wide_model(tmp_path / "wide-768")
    code, lines = _doctor(
        {
            "DATABASE_URL": database_url,
            "MEMORY_STATE_DIR": str(state_dir),
            "EMBEDDING_MODEL_PATH": str(model),
            "EMBEDDING_BACKEND": "torch",
        }
    )
    (line,) = [line for line in lines if "embedding model" in line]
    assert line.startswith("OK   embedding model: wide-768 (torch), 768 dimensions, "), line
    assert code == 0, lines
    assert "WARN llm: no LLM configured" in "\n".join(lines)
