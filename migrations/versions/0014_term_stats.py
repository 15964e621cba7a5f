"""Full-text postings and statistics per bank, kept by triggers in the writer's transaction.

Okapi BM25 needs, for the query's scope, the number of active memories N, their mean length,
and for each memory holding a query lexeme that lexeme's frequency in it (tf), its length
(dl) and how many memories hold the lexeme (df). Computed from the memories themselves they
cost a scan of every row of the scope and the unnesting of every matched row's tsvector
(about 110 ms at 10,000 memories, a second at 100,000). Here they are kept per
(owner_kind, owner_id, bank), for active memories only:

- `memory_term_cells`: changes of a bank's active memories (`docs`) and of the sum of their
  lengths (`lexemes`, a tsvector's `length`: its distinct lexemes), one row per writing
  statement, insert-only; a bank's figures are the sums of its rows. Inserts never wait for
  another writer — a counter row updated in place would be locked by each writer until it
  commits, and a writer holding it while it waits for a memory row that another writer
  locked first (which then writes to the bank) would deadlock. `term_stats.fold` sums each
  bank's rows into one, in the background;
- `memory_postings`: one row per (lexeme, memory) with tf (the lexeme's positions) and dl;
  its primary key carries tf and dl, so a query's postings are one index-only range scan
  per lexeme, and df is the count of a lexeme's postings.

Statement-level AFTER triggers with transition tables apply what a statement changed (an
INSERT, COPY, UPDATE or DELETE of any number of rows: a few statements per statement), in the
same transaction, so a read sees the memories and their statistics from one snapshot; rows
of different memories never conflict, so writers take no lock beyond their own rows.
TRUNCATE empties both tables.
`service.storage.term_stats.rebuild` recomputes them from scratch (after a bulk load with
triggers off, or to repair them).

Revision ID: 0014
Revises: 0013_remember
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013_remember"
branch_labels = None
depends_on = None

_OLD = (
    "SELECT seq, owner_kind, owner_id, bank, tsv, -1 AS sign FROM old_rows WHERE status = 'active'"
)
_NEW = (
    "SELECT seq, owner_kind, owner_id, bank, tsv, 1 AS sign FROM new_rows WHERE status = 'active'"
)
_CHANGED = """SELECT o.seq FROM old_rows o JOIN new_rows n ON n.seq = o.seq
    WHERE o.status IS DISTINCT FROM n.status OR o.tsv IS DISTINCT FROM n.tsv
      OR o.owner_kind <> n.owner_kind OR o.owner_id <> n.owner_id OR o.bank <> n.bank"""
# an UPDATE counts only its rows whose text, status or bank changed: the bookkeeping of
# every turn (last used) costs one join of its transition tables and touches nothing
_DELTAS = {
    "insert": _NEW,
    "update": f"SELECT * FROM ({_OLD} UNION ALL {_NEW}) d WHERE d.seq IN ({_CHANGED})",
    "delete": _OLD,
}

_APPLY = """
CREATE FUNCTION memory_term_stats_{event}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH delta AS ({delta})
  INSERT INTO memory_term_cells (owner_kind, owner_id, bank, docs, lexemes)
    SELECT owner_kind, owner_id, bank, sum(sign), sum(sign * coalesce(length(tsv), 0))
    FROM delta GROUP BY owner_kind, owner_id, bank
    HAVING sum(sign) <> 0 OR sum(sign * coalesce(length(tsv), 0)) <> 0;
  {remove}
  {add}
  RETURN NULL;
END $$
"""

_REMOVE = """WITH delta AS ({delta})
  DELETE FROM memory_postings p USING delta d, unnest(d.tsv) AS l
  WHERE d.sign < 0 AND p.owner_kind = d.owner_kind AND p.owner_id = d.owner_id
    AND p.bank = d.bank AND p.lexeme = l.lexeme AND p.seq = d.seq;"""

_ADD = """WITH delta AS ({delta})
  INSERT INTO memory_postings (owner_kind, owner_id, bank, lexeme, seq, tf, dl)
    SELECT d.owner_kind, d.owner_id, d.bank, l.lexeme, d.seq,
           least(coalesce(array_length(l.positions, 1), 1), 32767),
           least(length(d.tsv), 32767)
    FROM delta d, unnest(d.tsv) AS l WHERE d.sign > 0;"""


def _apply(event: str) -> str:
    delta = _DELTAS[event]
    return _APPLY.format(
        event=event,
        delta=delta,
        remove="" if event == "insert" else _REMOVE.format(delta=delta),
        add="" if event == "delete" else _ADD.format(delta=delta),
    )


_CLEAR = """
CREATE FUNCTION memory_term_stats_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM memory_postings;
  DELETE FROM memory_term_cells;
  RETURN NULL;
END $$
"""

_TRIGGERS = {
    "insert": "AFTER INSERT ON memories REFERENCING NEW TABLE AS new_rows",
    "update": "AFTER UPDATE ON memories REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "delete": "AFTER DELETE ON memories REFERENCING OLD TABLE AS old_rows",
}

# the same from scratch (as service.storage.term_stats.rebuild computes them)
_FILL = [
    """INSERT INTO memory_term_cells (owner_kind, owner_id, bank, docs, lexemes)
       SELECT owner_kind, owner_id, bank, count(*), sum(coalesce(length(tsv), 0))
       FROM memories WHERE status = 'active' GROUP BY owner_kind, owner_id, bank""",
    """INSERT INTO memory_postings (owner_kind, owner_id, bank, lexeme, seq, tf, dl)
       SELECT m.owner_kind, m.owner_id, m.bank, l.lexeme, m.seq,
              least(coalesce(array_length(l.positions, 1), 1), 32767),
              least(length(m.tsv), 32767)
       FROM memories m, unnest(m.tsv) AS l WHERE m.status = 'active'""",
]


def upgrade() -> None:
    op.create_table(
        "memory_term_cells",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("owner_kind", sa.String(16), nullable=False),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("bank", sa.String(32), nullable=False),
        sa.Column("docs", sa.BigInteger(), nullable=False),
        sa.Column("lexemes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_memory_term_cells"),
    )
    # a bank's rows summed by an index-only scan
    op.create_index(
        "ix_memory_term_cells_cell",
        "memory_term_cells",
        ["owner_kind", "owner_id", "bank"],
        postgresql_include=["docs", "lexemes"],
    )
    op.create_table(
        "memory_postings",
        sa.Column("owner_kind", sa.String(16), nullable=False),
        sa.Column("owner_id", sa.String(255), nullable=False),
        sa.Column("bank", sa.String(32), nullable=False),
        sa.Column("lexeme", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("tf", sa.SmallInteger(), nullable=False),
        sa.Column("dl", sa.SmallInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "owner_kind", "owner_id", "bank", "lexeme", "seq", name="pk_memory_postings"
        ),
    )
    # tf and dl in the primary key's index: the read is an index-only scan
    op.execute("ALTER TABLE memory_postings DROP CONSTRAINT pk_memory_postings")
    op.execute(
        "ALTER TABLE memory_postings ADD CONSTRAINT pk_memory_postings PRIMARY KEY "
        "(owner_kind, owner_id, bank, lexeme, seq) INCLUDE (tf, dl)"
    )
    op.execute(_CLEAR)
    for event, timing in _TRIGGERS.items():
        op.execute(_apply(event))
        op.execute(
            f"CREATE TRIGGER memory_term_stats_{event} {timing} FOR EACH STATEMENT "
            f"EXECUTE FUNCTION memory_term_stats_{event}()"
        )
    op.execute(
        "CREATE TRIGGER memory_term_stats_truncate AFTER TRUNCATE ON memories "
        "FOR EACH STATEMENT EXECUTE FUNCTION memory_term_stats_clear()"
    )
    for statement in _FILL:
        op.execute(statement)


def downgrade() -> None:
    for event in (*_TRIGGERS, "truncate"):
        op.execute(f"DROP TRIGGER IF EXISTS memory_term_stats_{event} ON memories")
    for event in _TRIGGERS:
        op.execute(f"DROP FUNCTION IF EXISTS memory_term_stats_{event}()")
    op.execute("DROP FUNCTION IF EXISTS memory_term_stats_clear()")
    op.drop_table("memory_postings")
    op.drop_table("memory_term_cells")
