#!/usr/bin/env bash
# Makes sure Debian's pgbouncer is installed: the test of the service behind a pooler in
# transaction mode (tests/integration/test_pooler.py) starts one. Nothing is started here.
set -euo pipefail
if [ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "pgbouncer is missing: install Debian's package (sudo apt-get install pgbouncer)" >&2
  exit 1
fi
echo "pgbouncer: installing with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends pgbouncer >/dev/null
