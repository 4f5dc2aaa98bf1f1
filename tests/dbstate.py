"""A database's whole content as one digest: a refused command must leave it byte-identical."""

from __future__ import annotations

import hashlib
from pathlib import Path

import sqlalchemy as sa


def fingerprint(url: str) -> str:
    """SQLite: the file's bytes (with its WAL). PostgreSQL: every row of every table, in order."""
    digest = hashlib.sha256()
    if url.startswith("sqlite"):
        path = Path(url.split("///", 1)[1])
        for part in (path, path.with_name(path.name + "-wal")):
            if part.exists():
                digest.update(part.read_bytes())
        return digest.hexdigest()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
            for name in sorted(names):
                digest.update(name.encode())
                for row in conn.execute(sa.text(f'SELECT * FROM "{name}" ORDER BY 1')):
                    digest.update(repr(tuple(row)).encode())
    finally:
        engine.dispose()
    return digest.hexdigest()
