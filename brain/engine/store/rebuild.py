"""A copy of an LMDB environment rebuilt from its live rows: no byte of a deleted row.

LMDB's own compacting copy (``mdb_env_copy2`` with ``MDB_CP_COMPACT``) leaves out
free pages but copies every page in use as it is, and a branch page keeps, as
the separator in front of a child page, a copy of a key that child once began
with, also after that key's row was deleted. A term hash of a forgotten word
can so outlive its posting and its version row in a branch page of
``lex_postings`` or ``lex_stats``. :func:`copy_rebuilt` writes a new
environment instead and appends every live row of every table to it in key
order, so every page, branch pages included, is built from live rows only
(``spec/06-operations.md`` §7). It costs about a second per million rows,
several times LMDB's page copy, and the copy is smaller (appended pages are
full).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import lmdb

__all__ = ["copy_rebuilt"]

_LOCK_FILE: Final = "lock.mdb"
"""The lock file a new environment gets; a copy is a data file only, as LMDB's copy is."""


def copy_rebuilt(
    env: lmdb.Environment, target: Path, txn: lmdb.Transaction, *, mode: int = 0o600
) -> None:
    """Write into the new (or empty) directory ``target`` an environment holding exactly the rows
    ``env`` holds as seen by the read transaction ``txn``: every named table, with
    its flags, filled by appending its rows in order. ``target`` holds ``data.mdb``
    only afterwards, synced."""
    names = [bytes(key) for key in txn.cursor().iternext(keys=True, values=False)]
    target.mkdir(parents=True, exist_ok=True)
    copy = lmdb.open(
        str(target),
        map_size=int(env.info()["map_size"]),
        max_dbs=len(names) + 1,
        subdir=True,
        mode=mode,
        sync=False,
        metasync=False,
    )
    try:
        with copy.begin(write=True) as out:
            for name in names:
                source = env.open_db(name, txn=txn, create=False)
                flags = source.flags()
                table = copy.open_db(
                    name,
                    txn=out,
                    reverse_key=flags["reverse_key"],
                    dupsort=flags["dupsort"],
                    integerkey=flags["integerkey"],
                    integerdup=flags["integerdup"],
                    dupfixed=flags["dupfixed"],
                )
                rows = txn.cursor(db=source).iternext(keys=True, values=True)
                out.cursor(db=table).putmulti(rows, dupdata=flags["dupsort"], append=True)
        copy.sync(True)
    finally:
        copy.close()
    (target / _LOCK_FILE).unlink(missing_ok=True)
