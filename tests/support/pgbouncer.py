"""A PgBouncer in transaction mode in front of the tests' embedded PostgreSQL.

Debian's `pgbouncer` package (`.ci/run` and `make test` install it; scripts/ensure-pgbouncer.sh).
PgBouncer refuses to run as root, so as root it runs as the owner of the embedded server's
socket folder (the `pgserver` user), which may reach that socket.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from testkit.waiting import wait_until

__all__ = ["pgbouncer"]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def pgbouncer(direct_url: str, *, pool_size: int = 20) -> Iterator[str]:
    """Run PgBouncer for the database of `direct_url` (a unix-socket libpq URL).

    Yields:
        The pooled URL (`postgresql://user@127.0.0.1:<port>/<database>`).

    Raises:
        RuntimeError: pgbouncer is not installed or did not start.
    """
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not Path(binary).exists():
        raise RuntimeError("pgbouncer is not installed: run scripts/ensure-pgbouncer.sh")
    params = conninfo_to_dict(direct_url)
    socket_dir, user, database = str(params["host"]), str(params["user"]), str(params["dbname"])
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="memory-pgbouncer-"))
    folder.chmod(0o755)
    run_as = pwd.getpwuid(Path(socket_dir).stat().st_uid).pw_name if os.geteuid() == 0 else None
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"{database} = host={socket_dir} dbname={database} user={user}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'users.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {pool_size}",
                "max_client_conn = 500",
                f"admin_users = {user}",
                f"logfile = {folder / 'pgbouncer.log'}",
                "",
            ]
        )
    )
    for path in folder.iterdir():
        path.chmod(0o644)
    if run_as:
        shutil.chown(folder, user=run_as)
    command = [binary, str(folder / "pgbouncer.ini")]
    if run_as:
        command = ["runuser", "-u", run_as, "--", *command]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:

        def accepting() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with {process.returncode}")
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True

        try:
            wait_until(accepting, what="pgbouncer to accept", timeout_s=30, ignoring=(OSError,))
        except (RuntimeError, TimeoutError) as exc:
            log = folder / "pgbouncer.log"
            raise RuntimeError(
                f"pgbouncer did not start ({exc}): " + (log.read_text() if log.exists() else "")
            ) from exc
        yield f"postgresql://{user}@127.0.0.1:{port}/{database}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(folder, ignore_errors=True)
