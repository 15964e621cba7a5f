"""Logs and the start banner keep secrets out and still render (issue 14 item 9).

The access-log records are made the way uvicorn makes them (`uvicorn.protocols.utils`
arguments, five of them) and rendered by uvicorn's own AccessFormatter and by the service's
JsonFormatter, through a real handler, so a formatter error shows up as the traceback that
`logging.Handler.handleError` writes to stderr.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from uvicorn.logging import AccessFormatter

from service.cli.main import start_banner
from service.config import Settings
from service.observability import JsonFormatter, ScrubFilter

KEY = "sk-test-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
SEARCH = "/v1/users/u-1/memories?q=lawyer+appointment+on+tuesday&api_key=" + KEY


@pytest.fixture
def access_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """`uvicorn.access` with one handler (uvicorn's formatter, the scrub filter) on a buffer."""
    logger = logging.getLogger("uvicorn.access")
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s'))
    handler.addFilter(ScrubFilter())
    saved = (logger.handlers, logger.propagate, logger.level)
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.INFO)
    yield logger, buffer
    logger.handlers, logger.propagate, logger.level = saved[0], saved[1], saved[2]


def _access(logger: logging.Logger, path: str, status: int = 200) -> None:
    # The call uvicorn's h11/httptools protocols make for each answered request.
    logger.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:50312", "GET", path, "1.1", status)


def test_access_log_lines_with_a_secret_render_without_a_traceback(access_log, capsys):
    logger, buffer = access_log

    _access(logger, f"/v1/status?token=Bearer%20{KEY}")
    _access(logger, "/readyz", 503)

    assert buffer.getvalue().splitlines() == [
        '127.0.0.1:50312 - "GET /v1/status?[redacted] HTTP/1.1" 200 OK',
        '127.0.0.1:50312 - "GET /readyz HTTP/1.1" 503 Service Unavailable',
    ]
    assert "Traceback" not in capsys.readouterr().err


def test_query_strings_are_left_out_of_the_access_log(access_log):
    logger, buffer = access_log

    _access(logger, SEARCH)

    assert (
        buffer.getvalue()
        == '127.0.0.1:50312 - "GET /v1/users/u-1/memories?[redacted] HTTP/1.1" 200 OK\n'
    )


def test_json_access_lines_leave_out_the_query_too():
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:50312", "GET", SEARCH, "1.1", 200),
        None,
    )

    assert ScrubFilter().filter(record) is True
    line = json.loads(JsonFormatter().format(record))

    assert (
        line["message"] == '127.0.0.1:50312 - "GET /v1/users/u-1/memories?[redacted] HTTP/1.1" 200'
    )


def test_other_records_with_a_secret_are_scrubbed_and_still_format():
    record = logging.LogRecord(
        "service.x",
        logging.WARNING,
        __file__,
        1,
        "calling with %s at 100%%",
        (f"Bearer {KEY}",),
        None,
    )

    ScrubFilter().filter(record)

    assert record.getMessage() == "calling with Bearer [redacted] at 100%"
    assert logging.Formatter("%(levelname)s %(message)s").format(record) == (
        "WARNING calling with Bearer [redacted] at 100%"
    )


def test_the_start_banner_shows_a_key_only_on_the_start_that_generated_it(tmp_path: Path):
    generated = start_banner(Settings(MEMORY_STATE_DIR=str(tmp_path)))
    key = (tmp_path / "api_key").read_text(encoding="utf-8").strip()
    again = start_banner(Settings(MEMORY_STATE_DIR=str(tmp_path)))
    from_env = start_banner(Settings(MEMORY_STATE_DIR=str(tmp_path), MEMORY_API_KEY=KEY))

    assert f"API key: {key}\n" in generated
    assert key not in again
    assert f"API key: in {tmp_path / 'api_key'} (not shown;" in again
    assert KEY not in from_env
    assert "API key: from MEMORY_API_KEY (not shown)\n" in from_env
