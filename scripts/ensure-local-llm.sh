#!/usr/bin/env bash
# Installs llama-cpp-python's OpenAI-compatible server into the virtual environment $1
# (default .venv). PyPI has only its source: llama.cpp is compiled with the machine's cmake and
# gcc once per machine — about 13 minutes on this project's 2-core machine under load — and the
# wheel is kept in $MEMORY_LLAMA_WHEELS (default ~/.cache/memory-banks-models/wheels), so later
# virtual environments and CI runs on the same machine install it in seconds.
set -euo pipefail
VENV="${1:-.venv}"
VERSION="0.3.36"
WHEELS="${MEMORY_LLAMA_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/memory-banks-models/wheels}"

if "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  echo "llama.cpp server: present in $VENV"
  exit 0
fi
mkdir -p "$WHEELS"
wheel="$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)"
if [ -z "$wheel" ]; then
  echo "llama.cpp server: compiling llama-cpp-python $VERSION (once per machine; ~13 min on 2 cores)"
  start=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" wheel --quiet --no-deps -w "$WHEELS" \
    "llama-cpp-python==$VERSION"
  echo "llama.cpp server: compiled in $(( $(date +%s) - start )) s"
  wheel="$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl | head -n 1)"
fi
"$VENV/bin/pip" install --quiet "${wheel}[server]"
echo "llama.cpp server: installed from $wheel"
