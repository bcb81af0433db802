"""The session file: SQLite schema, connections, format migration and file-level safety checks.

A session is one SQLite file (WAL journal, ``BEGIN IMMEDIATE`` transactions). Format 2 stores every
annotation as a row (who, when, which batch) that triggers forbid to change or delete; corrections
are rows pointing at the annotation they supersede, and ``labels`` is a view of the label each item
counts with. Format-1 files (one ``labels`` table) are read as they are and migrated to format 2 in
one transaction on the first writable open (:func:`migrate_v1`).

Read-only opens never write a byte and create no file beside the session (``mode=ro``, or
``immutable=1`` when no writer's journal is present; :func:`connect`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

SCHEMA_VERSION = 2

SCHEMA_CORE = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE stages (
    stage INTEGER PRIMARY KEY,
    n_requested INTEGER NOT NULL,
    rng TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE draws (
    seq INTEGER PRIMARY KEY,
    stage INTEGER NOT NULL REFERENCES stages(stage),
    item INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    q REAL NOT NULL,
    weight REAL NOT NULL
);
CREATE INDEX draws_stage ON draws(stage);
CREATE INDEX draws_item ON draws(item);
CREATE TABLE snapshots (stage INTEGER PRIMARY KEY, state BLOB NOT NULL);
"""

# Format 2: every annotation is a row (who, when, which batch); corrections are rows that point at
# the annotation they supersede; ``labels`` is a view of the label each item counts with.
SCHEMA_TEAM = """
CREATE TABLE annotations (
    seq INTEGER PRIMARY KEY,
    item INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    label TEXT NOT NULL,
    annotator TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('label', 'correction')),
    root INTEGER REFERENCES annotations(seq),
    supersedes INTEGER REFERENCES annotations(seq),
    reason TEXT,
    stage INTEGER,
    batch TEXT,
    time TEXT NOT NULL,
    source TEXT NOT NULL,
    CHECK ((kind = 'label') = (root IS NULL))
);
CREATE UNIQUE INDEX annotations_first ON annotations(item, annotator) WHERE kind = 'label';
CREATE INDEX annotations_item ON annotations(item);
CREATE INDEX annotations_root ON annotations(root);
CREATE TRIGGER annotations_never_change BEFORE UPDATE ON annotations
    BEGIN SELECT RAISE(ABORT, 'annotations are never changed; add a correction'); END;
CREATE TRIGGER annotations_never_deleted BEFORE DELETE ON annotations
    BEGIN SELECT RAISE(ABORT, 'annotations are never deleted; add a correction'); END;
CREATE TABLE leases (
    seq INTEGER PRIMARY KEY,
    item INTEGER NOT NULL,
    annotator TEXT NOT NULL,
    holder TEXT NOT NULL,
    batch TEXT NOT NULL,
    granted TEXT NOT NULL,
    expires TEXT NOT NULL
);
CREATE INDEX leases_item ON leases(item, expires);
CREATE VIEW labels AS
SELECT f.seq AS seq, f.item AS item, f.item_id AS item_id,
       COALESCE((SELECT c.label FROM annotations c WHERE c.root = f.seq ORDER BY c.seq DESC LIMIT 1),
                f.label) AS label,
       f.stage AS stage, f.time AS time, f.source AS source, f.annotator AS annotator
FROM annotations f
WHERE f.kind = 'label'
  AND f.seq = (SELECT MIN(g.seq) FROM annotations g WHERE g.item = f.item AND g.kind = 'label');
"""
SCHEMA = SCHEMA_CORE + SCHEMA_TEAM
#: Who recorded the labels of a format-1 session (it did not store annotators).
LEGACY_ANNOTATOR = "(before annotators)"


def statements(script: str) -> list[str]:
    """The statements of a schema script (triggers hold ``;`` inside ``BEGIN … END``)."""
    out, buf = [], []
    for line in script.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        if text.endswith(";") and (
            not text.upper().startswith("CREATE TRIGGER") or text.endswith("END;")
        ):
            out.append(text)
            buf = []
    if "".join(buf).strip():
        out.append("\n".join(buf))
    return out


def migrate_v1(con: sqlite3.Connection) -> int:
    """Format 1 → 2 in one transaction: every stored label becomes an annotation (annotator
    :data:`LEGACY_ANNOTATOR`, same item, label, stage, time and source, in the same order); the
    old table is kept, renamed ``labels_v1``. Returns the number of labels carried over."""
    con.execute("ALTER TABLE labels RENAME TO labels_v1")
    for stmt in statements(SCHEMA_TEAM):
        con.execute(stmt)
    con.execute(
        "INSERT INTO annotations(item, item_id, label, annotator, kind, stage, batch, time, source) "
        "SELECT item, item_id, label, ?, 'label', stage, NULL, time, source FROM labels_v1 "
        "ORDER BY seq",
        (LEGACY_ANNOTATOR,),
    )
    n_old = con.execute("SELECT COUNT(*) FROM labels_v1").fetchone()[0]
    n_new = con.execute("SELECT COUNT(*) FROM labels").fetchone()[0]
    if n_old != n_new:  # pragma: no cover - a unique item per row in format 1
        raise SessionError(f"migration would keep {n_new} of {n_old} labels; nothing changed")
    con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (json.dumps(SCHEMA_VERSION),))
    con.execute(
        "INSERT OR REPLACE INTO meta(key, value) VALUES ('migrated_from', ?)",
        (json.dumps({"schema_version": 1, "time": now()}),),
    )
    return int(n_old)


def sqlite_uri(path: str, **params: str) -> str:
    """A SQLite URI for a file whose name may hold any character (``#``, ``%``, ``?``, spaces)."""
    from urllib.parse import quote, urlencode

    return f"file:{quote(str(Path(path).resolve().as_posix()), safe='/')}?{urlencode(params)}"


class SessionError(ValueError):
    """A session cannot be opened or used as asked (a :class:`ValueError`: the CLI exits 2)."""


class Raced(Exception):
    """Another process wrote the stage this one was about to write."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def later(seconds: float) -> str:
    from datetime import timedelta

    return (datetime.now(UTC) + timedelta(seconds=float(seconds))).isoformat(
        timespec="microseconds"
    )


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def refuse_same_file(path: str | os.PathLike, other: str | os.PathLike, what: str) -> None:
    if _same_file(path, other):
        raise SessionError(f"{path} is {what}; choose another file name")


def refuse_overwriting_labels(path: str) -> None:
    """An existing file about to be replaced by a new session: refuse if it holds labels."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head != b"SQLite format 3\x00":
        return
    try:
        con = sqlite3.connect(sqlite_uri(path, mode="ro"), uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            n = 0
            for table in ("annotations", "labels"):
                if table in names:
                    n = max(n, con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return
    if n:
        raise SessionError(
            f"{path} holds {n} recorded labels; --overwrite never replaces labels: remove the "
            "file yourself or pick another name"
        )


def json_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(type(o).__name__)


def first_new(idx: np.ndarray, known: set) -> np.ndarray:
    """Mask of draws that are the first draw of an item not labeled yet."""
    _, first = np.unique(idx, return_index=True)
    mask = np.zeros(idx.size, dtype=bool)
    mask[first] = True
    if known:
        mask &= ~np.isin(idx, np.fromiter(known, dtype=np.int64, count=len(known)))
    return mask


def package_version() -> str:
    from .. import __version__

    return __version__


def connect(path: str, *, create: bool = False, readonly: bool = False) -> sqlite3.Connection:
    """Open the SQLite file. Nothing is written here (the WAL journal is switched on only once the
    file is known to be a session): read-only opens use ``mode=ro``, or ``immutable=1`` when no
    writer's journal is beside the file, so they create no file either (and work on read-only
    storage)."""
    if readonly:
        wal = os.path.exists(f"{path}-wal")
        uri = sqlite_uri(path, mode="ro") if wal else sqlite_uri(path, immutable="1")
    else:
        uri = sqlite_uri(path, mode="rwc" if create else "rw")
    try:
        con = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30.0)
        con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        raise SessionError(f"{path} is not a bae session (SQLite: {exc})") from exc
    return con


def tune(con: sqlite3.Connection) -> None:
    """The pragmas of a writable session: WAL journal, full sync, foreign keys."""
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("PRAGMA foreign_keys=ON")


def write_new(path: str, meta: dict[str, Any], *, overwrite: bool = False) -> None:
    """Write a complete session file (schema and ``meta``) beside ``path``, then rename it into
    place: a crash leaves either no session or a whole one."""
    tmp = f"{path}.tmp-{os.getpid()}"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp + suffix)
    con = connect(tmp, create=True)
    try:
        tune(con)
        con.execute("BEGIN IMMEDIATE")
        for stmt in statements(SCHEMA):
            con.execute(stmt)
        con.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [(k, json.dumps(v)) for k, v in meta.items()],
        )
        con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        if overwrite:
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + suffix)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            con.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp + suffix)
        raise


def read_meta(con: sqlite3.Connection, path: str) -> dict[str, Any]:
    """The ``meta`` table of a session file, checked (closes ``con`` and raises
    :class:`SessionError` when the file is not a bae session or has an unknown format)."""
    try:
        rows = dict(con.execute("SELECT key, value FROM meta").fetchall())
        meta = {k: json.loads(v) for k, v in rows.items()}
        for key in ("schema_version", "pool_path", "pool_sha256", "pool_spec", "design"):
            if key not in meta:
                raise SessionError(f"{path} is not a bae session (no {key!r} in its meta table)")
    except (sqlite3.DatabaseError, ValueError) as exc:
        con.close()
        if isinstance(exc, SessionError):
            raise
        raise SessionError(f"{path} is not a bae session ({one_line(exc)})") from exc
    schema = meta.get("schema_version")
    if schema not in (1, SCHEMA_VERSION):
        con.close()
        raise SessionError(
            f"{path} has session format {schema!r}; this bae reads formats 1 and {SCHEMA_VERSION}"
        )
    return meta


def migrate_if_v1(con: sqlite3.Connection) -> None:
    """Migrate a format-1 file to format 2 in one transaction (:func:`migrate_v1`), unless another
    process did it meanwhile (closes ``con`` when the migration fails)."""
    con.execute("BEGIN IMMEDIATE")
    try:
        if (
            con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
        ):  # not migrated by another process meanwhile
            migrate_v1(con)
    except BaseException:
        con.execute("ROLLBACK")
        con.close()
        raise
    con.execute("COMMIT")


class Store:
    """An open session file: its connection, read queries and write transactions.

    Parameters
    ----------
    path : str
        The session file (for messages).
    con : sqlite3.Connection
        From :func:`connect` (autocommit mode: transactions are explicit).
    readonly : bool
        Refuse every write (:meth:`require_writable`).
    schema : int
        The file's format (1 is read as it is; writable opens migrate it first).
    """

    def __init__(
        self, path: str, con: sqlite3.Connection, *, readonly: bool = False, schema: int = 2
    ) -> None:
        self.path = path
        self.con: sqlite3.Connection | None = con
        self.readonly = readonly
        self.schema = schema

    def rows(self, sql: str, args: Sequence = ()) -> list:
        """All rows of one query."""
        return self.con.execute(sql, args).fetchall()

    def require_writable(self, what: str) -> None:
        if self.readonly:
            raise SessionError(f"{what} needs a writable session; {self.path} was opened read-only")

    def transaction(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        """Run ``fn(con)`` in one write transaction (``BEGIN IMMEDIATE``; rolled back if it
        raises)."""
        self.require_writable("writing")
        con = self.con
        con.execute("BEGIN IMMEDIATE")
        try:
            fn(con)
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def close(self) -> None:
        """Checkpoint the WAL into the main file (writable sessions) and close."""
        if self.con is not None and not self.readonly:
            with contextlib.suppress(sqlite3.Error):
                self.con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if self.con is not None:
            self.con.close()
            self.con = None
