#!/usr/bin/env bash
# Installs what the e2e suite needs, idempotently, under .e2e/ in the repository:
#   .e2e/owui  venv with CPU torch, then open-webui==0.12.4   (~3-4 min, ~2.9 GB)
#   .e2e/pw    venv with playwright (the browser is Debian's; no `playwright install`)
#   /usr/bin/chromium from apt, only when missing              (~2 min, needs root)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/.e2e"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
OWUI_VERSION="0.12.4"
TORCH_VERSION="2.13.0"
mkdir -p "$E2E"

owui_ok() {
  "$E2E/owui/bin/python" - "$OWUI_VERSION" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version("open-webui") == sys.argv[1] else 1)
PY
}

if [ -x "$E2E/owui/bin/open-webui" ] && owui_ok; then
  echo "open-webui $OWUI_VERSION: present"
else
  echo "open-webui $OWUI_VERSION: installing into .e2e/owui"
  test -x "$E2E/owui/bin/python" || "$PYTHON" -m venv "$E2E/owui"
  # torch first: resolved as a dependency of open-webui it would be the CUDA build (7 GB).
  "$E2E/owui/bin/pip" install --quiet "torch==$TORCH_VERSION"
  "$E2E/owui/bin/pip" install --quiet "open-webui==$OWUI_VERSION"
fi

if [ -x /usr/bin/chromium ]; then
  echo "chromium: present"
else
  echo "chromium: installing with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

if [ -x "$E2E/pw/bin/python" ] && "$E2E/pw/bin/python" -c "import playwright" 2>/dev/null; then
  echo "playwright: present"
else
  echo "playwright: installing into .e2e/pw"
  test -x "$E2E/pw/bin/python" || "$PYTHON" -m venv "$E2E/pw"
  "$E2E/pw/bin/pip" install --quiet playwright
fi
