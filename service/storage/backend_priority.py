"""Lower the scheduling priority of a worker's own server processes on the embedded PostgreSQL.

A `worker` process (`python -m service worker`, or the one `serve` starts with
MEMORY_WORKER_PROCESS) lowers its own nice value at start (MEMORY_WORKER_NICE), but its
heavy statements (a consolidation's writes, an extraction's inserts) run in PostgreSQL's
server processes, one per connection, which the nice value of the client does not reach. On
the embedded PostgreSQL of this installation, on this machine, the worker lowers the priority
of the server processes behind its own pooled connections too, so on busy cores the API's
inlet statements run first.

Only those processes, and only when all of this holds (checked per connection):

- the database is the embedded one in MEMORY_STATE_DIR/pgdata (DATABASE_URL unset): a server
  elsewhere, or one that other applications share, is never touched;
- the process is a child of the postmaster that `pgdata/postmaster.pid` names (it serves this
  data folder), read from /proc (Linux; elsewhere nothing is changed);
- it is owned by this OS user, or, when this process runs as root, by the user owning the
  data folder: pgserver runs the server as a user of its own when root starts it.

A parallel query's helper processes are forked by the postmaster, not by the backend, and keep
the normal priority (the worker's statements rarely get any).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

log = logging.getLogger(__name__)

__all__ = ["lower_backends", "serves_data_folder"]


def _parent_of(pid: int) -> int | None:
    """The parent pid of `pid` from /proc/<pid>/stat (None where there is no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # "pid (comm) state ppid …": comm may hold spaces and parentheses, so cut at the last ")"
    fields = stat.rsplit(")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else None


def _postmaster_of(pgdata: Path) -> int | None:
    """The postmaster pid written on the first line of `pgdata/postmaster.pid`."""
    try:
        first = (pgdata / "postmaster.pid").read_text(encoding="ascii").splitlines()[0]
        return int(first.strip())
    except (OSError, ValueError, IndexError):
        return None


def serves_data_folder(pid: int, pgdata: Path) -> bool:
    """Tell whether `pid` is a server process of the PostgreSQL running on `pgdata`, owned by
    this OS user (or, for root, by the data folder's owner): see the module docstring.

    Args:
        pid: a server process id (`SELECT pg_backend_pid()`).
        pgdata: the embedded server's data folder.
    """
    postmaster = _postmaster_of(pgdata)
    if postmaster is None or _parent_of(pid) != postmaster:
        return False
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
        me = os.getuid()
        return owner == me or (me == 0 and owner == pgdata.stat().st_uid)
    except OSError:
        return False


def _lower(pid: int, by: int) -> bool:
    try:
        now = os.getpriority(os.PRIO_PROCESS, pid)
        os.setpriority(os.PRIO_PROCESS, pid, min(19, now + by))
    except (AttributeError, OSError) as exc:
        log.debug("server process %s keeps its priority: %s", pid, exc)
        return False
    return True


def lower_backends(engine: AsyncEngine, *, pgdata: Path, by: int) -> None:
    """From now on, lower by `by` (nice increment, 1-19) the priority of the server process
    behind each new connection of `engine`, when it serves `pgdata` and is ours
    (`serves_data_folder`); other connections are left as they are.

    One `SELECT pg_backend_pid()` per new connection (the pool keeps its connections, so this
    is a few statements per process lifetime).
    """
    if by <= 0:
        return
    pgdata = pgdata.resolve()

    @event.listens_for(engine.sync_engine.pool, "connect")
    def _lower_its_server_process(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("SELECT pg_backend_pid()")
            row = cursor.fetchone()
        finally:
            cursor.close()
        # the connection is in a transaction now (not autocommit): end it before the pool
        # hands it out, so a session's first statement starts a fresh one
        dbapi_connection.rollback()
        pid = int(row[0])
        if serves_data_folder(pid, pgdata) and _lower(pid, by):
            log.debug("server process %s of this worker scheduled at nice +%s", pid, by)
