"""The embedding model's ONNX file is written once per installation and shared (issue 29
item 6: each process wrote its own copy on first start, 41-50 s under load)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from service.embeddings import onnx_backend
from service.embeddings.encoder import bundled_model_path

# One process's start: wait for the signal, load the encoder on the shared cache folder, say
# whether it wrote the file (the backend logs it) and embed one sentence.
_START = """
import logging, sys, time
from pathlib import Path
logging.basicConfig(level=logging.INFO, format="%(message)s")
from service.embeddings.encoder import Encoder
cache, go = Path(sys.argv[1]), Path(sys.argv[2])
Path(str(go) + "." + sys.argv[3]).touch()
while not go.exists():
    time.sleep(0.005)
encoder = Encoder(onnx_dir=cache)
print(encoder.encode_sync(["a cat on a mat"]).shape)
encoder.close()
"""


def _start_together(cache: Path, work: Path, count: int) -> list[tuple[int, str, str]]:
    go = work / f"go-{time.monotonic_ns()}"
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", _START, str(cache), str(go), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    while not all(Path(f"{go}.{n}").exists() for n in range(count)):
        if any(s.poll() is not None for s in starts):
            break
        time.sleep(0.01)
    go.touch()
    results = []
    for s in starts:
        out, err = s.communicate(timeout=300)
        results.append((s.returncode, out, err))
    return results


def test_processes_starting_together_write_one_file_and_a_later_start_reuses_it(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    first = _start_together(cache, tmp_path, 2)
    assert [code for code, _, _ in first] == [0, 0], [err for _, _, err in first]
    assert [out.strip() for _, out, _ in first] == ["(1, 384)", "(1, 384)"]
    writers = [err for _, _, err in first if "writing the embedding model as ONNX" in err]
    assert len(writers) == 1
    [export] = cache.glob("*.onnx")
    assert sorted(p.name for p in cache.iterdir()) == [export.name, export.name + ".lock"]
    written = export.stat()

    [(code, _, err)] = _start_together(cache, tmp_path, 1)
    assert code == 0, err
    assert "writing the embedding model as ONNX" not in err
    assert (export.stat().st_ino, export.stat().st_mtime_ns) == (
        written.st_ino,
        written.st_mtime_ns,
    )


def test_the_file_is_named_after_the_models_content_not_its_folder(tmp_path: Path) -> None:
    model = bundled_model_path()
    elsewhere = tmp_path / "same-model-elsewhere"
    elsewhere.mkdir()
    for path in model.iterdir():
        if path.is_file():
            (elsewhere / path.name).symlink_to(path)
    assert onnx_backend.model_key(elsewhere) == onnx_backend.model_key(model)
    changed = tmp_path / "changed-model"
    changed.mkdir()
    for path in model.iterdir():
        if path.is_file() and path.name != "config.json":
            (changed / path.name).symlink_to(path)
    (changed / "config.json").write_text((model / "config.json").read_text() + " ")
    assert onnx_backend.model_key(changed) != onnx_backend.model_key(model)
