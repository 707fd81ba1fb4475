"""The recall peer: SQLite FTS5 (BM25) and sqlite-vec (exact KNN), fused by RRF in one query.

One SQLite file holds the same statements as our server: a plain table
(``statements``: text, subject, whether it is current), an external-content
FTS5 index of the text with the ``porter unicode61`` tokenizer (what the FTS5
documentation suggests for English text), and a ``vec0`` table with the same
384-dimension float32 MiniLM vectors our server indexed, compared by cosine
distance like our HNSW index.

:data:`HYBRID_SQL` answers a cue in a single statement, as the sqlite-vec
hybrid-search write-up does it: one CTE takes FTS5's best ``depth`` matches
ordered by ``rank`` (FTS5's ``bm25()`` unless configured otherwise), one takes
vec0's ``k = depth`` nearest vectors, a full outer join by rowid sums
``1/(rrf_k + rank)`` over the arms that found each row, superseded statements
are dropped (our RECALL hides them too) and the best ``top_k`` come back.
``depth`` is what each of our arms contributes (``max(3·top_k, 100)``) and
``rrf_k`` our fusion's 60, so both sides fuse the same number of candidates
the same way.

Set-up follows SQLite's own advice for a read-mostly database: WAL journal with
``synchronous=NORMAL``, 4 KiB pages, a page cache and a memory map large
enough to hold the whole file (so every query runs from memory, as our server's
does), the FTS5 ``optimize`` command after the bulk load (one b-tree per index
instead of many segments), then ``ANALYZE`` through ``PRAGMA optimize``.

apsw is used because this Python's ``sqlite3`` cannot load extensions.
"""

from __future__ import annotations

import importlib
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Final

import apsw
import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CACHE_KIB",
    "HYBRID_SQL",
    "MMAP_BYTES",
    "PAGE_SIZE",
    "PRAGMAS",
    "RRF_K",
    "SqliteHybrid",
    "fts_query",
]

PAGE_SIZE: Final = 4096
"""SQLite's default page size, which its documentation recommends for most uses."""

CACHE_KIB: Final = 1024 * 1024
"""Page cache ceiling (1 GiB, as a negative ``cache_size``): larger than the file at
100K statements, so no query waits on the disk, as none of our server's does."""

MMAP_BYTES: Final = 1 << 30
"""Memory-mapped I/O size: SQLite suggests it for read-heavy work; 1 GiB covers the file."""

RRF_K: Final = 60
"""Reciprocal-rank fusion's ``k``: the value of the RRF paper, and our server's default."""

DIMENSIONS: Final = 384
"""The vectors' length (all-MiniLM-L6-v2)."""

PRAGMAS: Final = (
    f"PRAGMA page_size = {PAGE_SIZE}",
    "PRAGMA journal_mode = WAL",
    "PRAGMA synchronous = NORMAL",
    f"PRAGMA cache_size = -{CACHE_KIB}",
    f"PRAGMA mmap_size = {MMAP_BYTES}",
    "PRAGMA temp_store = MEMORY",
)
"""The connection's settings, in order (``page_size`` must precede the first table)."""

SCHEMA: Final = (
    """CREATE TABLE statements (
        id INTEGER PRIMARY KEY,
        text TEXT NOT NULL,
        subject INTEGER NOT NULL,
        current INTEGER NOT NULL
    )""",
    """CREATE VIRTUAL TABLE statements_fts USING fts5(
        text, content='statements', content_rowid='id', tokenize='porter unicode61'
    )""",
    f"""CREATE VIRTUAL TABLE statements_vec USING vec0(
        embedding float[{DIMENSIONS}] distance_metric=cosine
    )""",
)
"""Tables: the statements, their FTS5 index (external content), their vectors."""

HYBRID_SQL: Final = """
WITH
fts_matches AS (
    SELECT rowid AS id, row_number() OVER (ORDER BY rank) AS rank_number
    FROM statements_fts
    WHERE statements_fts MATCH :match
    ORDER BY rank
    LIMIT :depth
),
vec_matches AS (
    SELECT rowid AS id, row_number() OVER (ORDER BY distance) AS rank_number
    FROM statements_vec
    WHERE embedding MATCH :vector AND k = :depth
),
fused AS (
    SELECT coalesce(f.id, v.id) AS id,
           coalesce(1.0 / (:rrf_k + f.rank_number), 0.0)
         + coalesce(1.0 / (:rrf_k + v.rank_number), 0.0) AS score
    FROM fts_matches AS f
    FULL OUTER JOIN vec_matches AS v ON f.id = v.id
)
SELECT fused.id, fused.score
FROM fused JOIN statements AS s ON s.id = fused.id
WHERE s.current
ORDER BY fused.score DESC, fused.id
LIMIT :top_k
"""
"""The hybrid query: BM25 and KNN candidates, RRF, current statements only, top ``k``."""

_WORD: Final = re.compile(r"\w+")


def fts_query(cue: str) -> str:
    """``cue`` as an FTS5 MATCH expression: every word quoted (so no word is read as
    an operator or a column name), any of them may match, as in BM25 retrieval."""
    words = _WORD.findall(cue)
    if not words:
        raise ValueError(f"cue {cue!r} has no word to match")
    return " OR ".join(f'"{word}"' for word in words)


def _vec_extension() -> str:
    """The path of sqlite-vec's loadable extension (its package has no type hints)."""
    module = importlib.import_module("sqlite_vec")
    return str(module.loadable_path())


class SqliteHybrid:
    """A SQLite database file in ``directory`` holding the statements, opened read-write."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "statements.sqlite"
        self.db = apsw.Connection(str(self.path))
        self.db.enable_load_extension(True)
        self.db.load_extension(_vec_extension())
        self.db.enable_load_extension(False)
        for pragma in PRAGMAS:
            self.db.execute(pragma)
        self.load_s = 0.0

    def load(
        self,
        texts: Sequence[str],
        subjects: Sequence[int],
        current: Sequence[bool],
        vectors: NDArray[np.float32],
    ) -> float:
        """Create the tables and insert every statement (rowid = world index + 1) in one
        transaction, then optimize; return the seconds it took."""
        if not len(texts) == len(subjects) == len(current) == len(vectors):
            raise ValueError("one text, subject, flag and vector per statement")
        started = time.perf_counter()
        rows = np.ascontiguousarray(vectors, dtype="<f4")
        with self.db:
            for statement in SCHEMA:
                self.db.execute(statement)
            self.db.executemany(
                "INSERT INTO statements (id, text, subject, current) VALUES (?, ?, ?, ?)",
                (
                    (i + 1, text, subject, int(now))
                    for i, (text, subject, now) in enumerate(
                        zip(texts, subjects, current, strict=True)
                    )
                ),
            )
            self.db.execute(
                "INSERT INTO statements_fts (rowid, text) SELECT id, text FROM statements"
            )
            self.db.executemany(
                "INSERT INTO statements_vec (rowid, embedding) VALUES (?, ?)",
                ((i + 1, rows[i].tobytes()) for i in range(len(rows))),
            )
            self.db.execute("INSERT INTO statements_fts (statements_fts) VALUES ('optimize')")
        self.db.execute("PRAGMA optimize")
        # Move the load out of the WAL into the main file, as a settled database has it.
        self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self.load_s = time.perf_counter() - started
        return self.load_s

    def query(self, cue: str, vector: NDArray[np.float32], *, top_k: int, depth: int) -> list[int]:
        """The hybrid query: world indexes of the best ``top_k`` current statements."""
        rows: Iterable[tuple[int, float]] = self.db.execute(
            HYBRID_SQL,
            {
                "match": fts_query(cue),
                "vector": np.ascontiguousarray(vector, dtype="<f4").tobytes(),
                "depth": depth,
                "rrf_k": RRF_K,
                "top_k": top_k,
            },
        )
        return [int(row[0]) - 1 for row in rows]

    def configuration(self) -> dict[str, object]:
        """Versions and settings as the connection reports them (for the results JSON)."""

        def pragma(name: str) -> object:
            for row in self.db.execute(f"PRAGMA {name}"):
                return row[0]
            return None

        vec_version = next(iter(self.db.execute("SELECT vec_version()")))[0]
        return {
            "sqlite": apsw.sqlite_lib_version(),
            "apsw": apsw.apsw_version(),
            "sqlite_vec": vec_version,
            "pragmas": {
                name: pragma(name)
                for name in ("page_size", "journal_mode", "synchronous", "cache_size", "mmap_size")
            },
            "fts5_tokenizer": "porter unicode61",
            "fts5_ranking": "rank (bm25() with default weights), ORDER BY rank",
            "vec0": f"float[{DIMENSIONS}] distance_metric=cosine (exact scan)",
            "fusion": f"RRF k={RRF_K} in one SQL statement (CTEs, FULL OUTER JOIN by rowid)",
            "file_bytes": self.path.stat().st_size,
            "load_s": round(self.load_s, 3),
            "sql": " ".join(HYBRID_SQL.split()),
        }

    def close(self) -> None:
        """Close the connection."""
        self.db.close()
