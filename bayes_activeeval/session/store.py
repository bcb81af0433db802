"""The session file: SQLite schema, connections, format migration and file-level safety checks.

A session is one SQLite file (WAL journal, ``BEGIN IMMEDIATE`` transactions). Format 2 stores every
annotation as a row (who, when, which batch) that triggers forbid to change or delete; corrections
are rows pointing at the annotation they supersede, and ``labels`` is a view of the label each item
counts with. Format-1 files (one ``labels`` table) are read as they are and migrated to format 2 in
one transaction on the first writable open (:func:`migrate_v1`).

Read-only opens never write a byte. They create no file beside the session either: with no
writer's journal (``-wal``) beside it they read a consistent in-memory copy of the file, refreshed
when the file changes; while a writer has it open (``-wal`` and ``-shm`` present) they read it in
place (``mode=ro``) under SQLite's locks, one read transaction per answer (:func:`connect`,
:meth:`Store.reading`). Replacing a session (``bae init --overwrite``) takes an exclusive lock and
is refused while any other connection has the file open (:func:`write_new`); a writer checks at
every transaction that its file is still the one at the path (:meth:`Store.check_unchanged`).
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

from ..io import is_sqlite

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


#: Tables whose rows are labels (format 2, format 1 and its migrated copy, development ranking
#: sessions).
_LABEL_TABLES = ("annotations", "labels", "labels_v1", "grades")
#: Seconds ``bae init --overwrite`` waits for the exclusive lock before it refuses (a reader such
#: as ``bae status`` holds the file for a moment; ``bae serve`` holds it while it runs).
LOCK_WAIT = 2.0


def _count_labels(con: sqlite3.Connection) -> int:
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    n = 0
    for table in _LABEL_TABLES:
        if table in names:
            n = max(n, con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
    return int(n)


def _is_session(con: sqlite3.Connection) -> bool:
    try:
        return (
            con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() is not None
        )
    except sqlite3.Error:
        return False


def _holds_labels_message(path: str, n: int) -> str:
    return (
        f"{path} holds {n} recorded labels; --overwrite never replaces labels: remove the "
        "file yourself or pick another name"
    )


def check_new_path(path: str, *, overwrite: bool = False) -> None:
    """Check, before the work of creating a session, that one may be written at ``path``: its
    directory exists, it is no directory, and a file is there only with ``overwrite``. Reads
    nothing: what an existing file holds is checked once, where it is replaced
    (:func:`write_new`)."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise SessionError(f"cannot create {path}: directory {parent} does not exist")
    if os.path.isdir(path):
        raise SessionError(f"{path} is a directory, not a session file")
    if os.path.lexists(path) and not overwrite:
        raise SessionError(
            f"session file {path} already exists; remove it or pick another name "
            "(--overwrite replaces a session without labels)"
        )


def _lock_for_replacement(path: str) -> sqlite3.Connection:
    """An exclusive lock on the session at ``path`` (a connection in exclusive locking mode,
    which keeps the lock until it is closed), after checking, under the lock, that it holds no
    labels. Refused while any other connection — ``bae serve``, ``bae label``, ``bae next``,
    ``bae record``, a reader — has the file open (each holds a shared lock while it is open)."""
    con = sqlite3.connect(
        sqlite_uri(path, mode="rw"), uri=True, isolation_level=None, timeout=LOCK_WAIT
    )
    try:
        con.execute("PRAGMA locking_mode=EXCLUSIVE")
        con.execute("BEGIN EXCLUSIVE")
    except sqlite3.OperationalError as exc:
        con.close()
        if "locked" in str(exc) or "busy" in str(exc):
            raise SessionError(
                f"{path} is open in another process (bae serve, bae label, bae next, bae record "
                "or a reader); --overwrite never replaces a session in use: stop that process, "
                "then run bae init again"
            ) from exc
        raise SessionError(f"{path} cannot be replaced (SQLite: {one_line(exc)})") from exc
    except sqlite3.DatabaseError as exc:
        con.close()
        raise SessionError(f"{path} cannot be replaced (SQLite: {one_line(exc)})") from exc
    try:
        if not _is_session(con):
            raise SessionError(
                f"{path} is an SQLite database but not a bae session; --overwrite replaces only "
                "a bae session: remove the file yourself or pick another name"
            )
        n = _count_labels(con)
        if n:
            raise SessionError(_holds_labels_message(path, n))
        con.execute("COMMIT")  # exclusive locking mode: the lock stays until close
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")
        con.close()
        raise
    return con


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


class SessionConnection(sqlite3.Connection):
    """A connection to a session file that remembers which file it read.

    Attributes
    ----------
    ident : tuple of int or None
        ``(st_dev, st_ino)`` of the file opened (:meth:`Store.check_unchanged`).
    signature : tuple or None
        A copy's file state (:func:`_signature`); ``None`` for a connection to the file itself.
    """

    ident: tuple[int, int] | None = None
    signature: tuple | None = None


def _stat(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _signature(path: str) -> tuple:
    """The state of a session file and its journal files: ``(main, wal, shm exists)`` with
    ``(device, inode, size, mtime)`` of the file and of its ``-wal`` (``None``: absent)."""
    return (_stat(path), _stat(f"{path}-wal"), os.path.exists(f"{path}-shm"))


def _rollback_header(data: bytes) -> bytes:
    """A database image with the WAL flags of its header (bytes 18-19) set to rollback, so an
    in-memory copy reads it (an in-memory database has no WAL)."""
    if len(data) >= 20 and data[18:20] == b"\x02\x02":
        data = data[:18] + b"\x01\x01" + data[20:]
    return data


def _image(path: str, with_wal: bool) -> bytes:
    """The database as its pages read now: the file's bytes, or — with a ``-wal`` left beside it
    by a writer that stopped — the file and that journal copied to a private temporary directory
    and read there (SQLite recovers the journal in the copy, nothing is created beside the
    session)."""
    if not with_wal:
        with open(path, "rb") as fh:
            return fh.read()
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix="bae-read-")
    try:
        copy = os.path.join(tmp, "s.bae")
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        con = sqlite3.connect(copy, isolation_level=None)
        try:
            return bytes(con.serialize())
        finally:
            con.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_connection(path: str) -> SessionConnection:
    """A read-only connection that writes nothing and creates no file beside the session.

    While a writer has the file open (its ``-wal`` and ``-shm`` beside it) the file is read in
    place (``mode=ro``, under SQLite's locks; the journal files exist already). Otherwise an
    in-memory copy is read: the file's bytes (with a ``-wal`` a crashed writer left behind,
    applied in a private copy), taken only when the file did not change while it was copied;
    :meth:`Store.rows` takes a new copy when the file changed since."""
    for _attempt in range(5):
        sig = _signature(path)
        if sig[0] is None:
            raise FileNotFoundError(path)
        if sig[1] is not None and sig[2]:  # a writer has it open: SQLite's locks keep reads whole
            break
        try:
            data = _image(path, with_wal=sig[1] is not None)
        except FileNotFoundError:  # its -wal went away meanwhile (a writer closed): again
            continue
        if _signature(path) != sig:  # changed while copied: copy again
            continue
        if data[:16] != b"SQLite format 3\x00":
            raise sqlite3.DatabaseError("file is not a database")
        con = sqlite3.connect(":memory:", isolation_level=None, factory=SessionConnection)
        con.deserialize(_rollback_header(data))
        con.execute("PRAGMA query_only=1")
        con.ident, con.signature = sig[0][:2], sig
        return con
    con = sqlite3.connect(
        sqlite_uri(path, mode="ro"),
        uri=True,
        isolation_level=None,
        timeout=30.0,
        factory=SessionConnection,
    )
    st = _stat(path)
    con.ident = None if st is None else st[:2]
    return con


def peek_meta(path: str, key: str) -> Any:
    """One value of a session file's meta table (``None``: no such key), read without writing
    a byte or creating a file, and without copying the file: with no journal beside it the file
    is the whole database and is read in place (``immutable``: no lock, no journal file), the
    answer kept only when the file did not change meanwhile; otherwise as :func:`_read_connection`
    reads it (in place under SQLite's locks while a writer has it open)."""
    if not is_sqlite(path):
        return None
    sig = _signature(path)
    row = None
    if sig[1] is None:  # no journal beside it
        try:
            con = sqlite3.connect(sqlite_uri(path, mode="ro", immutable="1"), uri=True)
            row = _meta_row(con, key)
        except sqlite3.DatabaseError:
            if _signature(path) == sig:  # not torn by a write: the file is what it is
                raise
    if sig[1] is not None or _signature(path) != sig:  # a journal, or changed while it was read
        row = _meta_row(_read_connection(path), key)
    return None if row is None else json.loads(row[0])


def _meta_row(con: sqlite3.Connection, key: str) -> tuple | None:
    """The ``meta`` row of ``key`` (``None``: none); closes ``con``."""
    with contextlib.closing(con):
        return con.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()


def connect(path: str, *, create: bool = False, readonly: bool = False) -> SessionConnection:
    """Open the SQLite file. Nothing is written here (the WAL journal is switched on only once the
    file is known to be a session). Read-only opens write nothing and create no file beside the
    session (:func:`_read_connection`), so they also work on read-only storage; the one exception
    is a writer that closes (removing its ``-wal`` and ``-shm``) between the check and the open:
    SQLite then creates them for the reader. A writable open records the file's device and inode
    (:meth:`Store.check_unchanged`), and opens again when the file was replaced meanwhile."""
    for _attempt in range(3):
        before = _stat(path)
        try:
            if readonly:
                con = _read_connection(path)
            else:
                con = sqlite3.connect(
                    sqlite_uri(path, mode="rwc" if create else "rw"),
                    uri=True,
                    isolation_level=None,
                    timeout=30.0,
                    factory=SessionConnection,
                )
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except FileNotFoundError as exc:
            raise SessionError(f"session file {path} does not exist") from exc
        except IsADirectoryError as exc:
            raise SessionError(f"{path} is a directory, not a bae session") from exc
        except OSError as exc:
            raise SessionError(f"cannot read {path}: {exc.strerror or one_line(exc)}") from exc
        except sqlite3.DatabaseError as exc:
            raise SessionError(f"{path} is not a bae session (SQLite: {exc})") from exc
        after = _stat(path)
        same = after is not None and (before is None or before[:2] == after[:2])
        if readonly or same:
            if not readonly:
                con.ident = after[:2]
            return con
        con.close()  # replaced while it was being opened: open the file there now
    raise SessionError(f"{path} keeps being replaced while it is opened; try again")


def tune(con: sqlite3.Connection) -> None:
    """The pragmas of a writable session: WAL journal, full sync, foreign keys."""
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("PRAGMA foreign_keys=ON")


def write_new(
    path: str,
    meta: dict[str, Any],
    *,
    overwrite: bool = False,
    fill: Callable[[sqlite3.Connection], Any] | None = None,
) -> None:
    """Write a complete session file (schema, ``meta`` and whatever ``fill(con)`` adds, in one
    transaction) beside ``path``, then put it in place: a crash leaves either no session or a
    whole one.

    A new file is linked into place (never over a file that appeared meanwhile). With
    ``overwrite``, an existing session is replaced only under an exclusive lock, refused while
    any other connection has it open (``bae serve``, ``bae label``, …) and when it holds labels;
    its contents are replaced in one SQLite transaction (the backup API), so its journal files
    are never deleted behind another process and the file keeps its permissions. Any other
    existing file is replaced (renamed over) only when it is no database and holds no labels
    (:func:`~bayes_activeeval.io.check_output`'s rule: a CSV whose ``label`` or ``grade`` column
    is filled in is never replaced). These are the checks of what an existing file holds, made
    here, where it is replaced; the caller checks the path first (:func:`check_new_path`).
    """
    old: sqlite3.Connection | None = None
    exists = overwrite and os.path.lexists(path)  # without overwrite the link below refuses it
    if exists and is_sqlite(path):
        old = _lock_for_replacement(path)  # checks, under the lock, that it holds no labels
    elif exists:
        from ..io import check_output

        check_output(path, overwrite=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    con = None
    try:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp + suffix)
        con = sqlite3.connect(tmp, isolation_level=None)
        if old is not None:  # the backup into a WAL file needs the same page size
            con.execute(f"PRAGMA page_size={int(old.execute('PRAGMA page_size').fetchone()[0])}")
        tune(con)
        con.execute("BEGIN IMMEDIATE")
        for stmt in statements(SCHEMA):
            con.execute(stmt)
        con.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [(k, json.dumps(v)) for k, v in meta.items()],
        )
        if fill is not None:
            fill(con)
        con.execute("COMMIT")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if old is not None:
            con.backup(old)  # one write transaction on the locked session
            old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            con.close()
            con = None
            return
        con.close()
        con = None
        if exists:  # a file that is no database and holds no labels (checked above)
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise SessionError(
                f"session file {path} already exists; remove it or pick another name"
            ) from None
        except OSError:  # no hard links here: a rename after one more check
            if os.path.lexists(path):
                raise SessionError(
                    f"session file {path} already exists; remove it or pick another name"
                ) from None
            os.replace(tmp, path)
    finally:
        if con is not None:
            with contextlib.suppress(sqlite3.Error):
                con.close()
        if old is not None:
            with contextlib.suppress(sqlite3.Error):
                old.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp + suffix)


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
        self._reading = 0
        self._origin = self._identity(con)

    @staticmethod
    def _identity(con: sqlite3.Connection) -> tuple | None:
        """What tells this session from another written at the same path: its creation time
        and pool checksum."""
        try:
            rows = con.execute(
                "SELECT key, value FROM meta WHERE key IN ('created', 'pool_sha256', 'checksum') "
                "ORDER BY key"
            ).fetchall()
        except sqlite3.Error:
            return None
        return tuple(rows)

    def _replaced(self, how: str) -> SessionError:
        return SessionError(
            f"session file {self.path} was {how} since it was opened (bae init --overwrite, or "
            "moved); nothing more is written to or read from the old file: open the session again"
        )

    def check_unchanged(self) -> None:
        """Raise :class:`SessionError` when the file at :attr:`path` is no longer the one this
        store opened (removed, or another file renamed into its place): a writer must not go on
        writing to a file nobody will read again."""
        ident = getattr(self.con, "ident", None)
        if ident is None:
            return
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise self._replaced("removed") from None
        if (st.st_dev, st.st_ino) != tuple(ident):
            raise self._replaced("replaced")

    def _refresh(self) -> None:
        """A read-only store reading an in-memory copy: take a new copy when the file changed
        since (another process wrote it)."""
        sig = getattr(self.con, "signature", None)
        if sig is None or self._reading or _signature(self.path) == sig:
            return
        self.check_unchanged()
        con = connect(self.path, readonly=True)
        if self._identity(con) != self._origin:
            con.close()
            raise self._replaced("replaced")
        self.con.close()
        self.con = con

    def rows(self, sql: str, args: Sequence = ()) -> list:
        """All rows of one query."""
        self._refresh()
        return self.con.execute(sql, args).fetchall()

    @contextlib.contextmanager
    def reading(self):
        """Answer several queries from one state of the file: one read transaction (a read-only
        copy is one state already). Nested uses join the outer one; no write inside."""
        if self._reading:
            self._reading += 1
            try:
                yield
            finally:
                self._reading -= 1
            return
        self._refresh()
        con = self.con
        begin = getattr(con, "signature", None) is None and not con.in_transaction
        if begin:
            con.execute("BEGIN")
        self._reading = 1
        try:
            yield
        finally:
            self._reading = 0
            if begin:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("COMMIT")

    def require_writable(self, what: str) -> None:
        if self.readonly:
            raise SessionError(f"{what} needs a writable session; {self.path} was opened read-only")

    def transaction(self, fn: Callable[[sqlite3.Connection], Any]) -> None:
        """Run ``fn(con)`` in one write transaction (``BEGIN IMMEDIATE``; rolled back if it
        raises)."""
        self.require_writable("writing")
        if self._reading:
            raise RuntimeError("a write inside Store.reading(): read, then write")
        con = self.con
        self.check_unchanged()
        con.execute("BEGIN IMMEDIATE")
        try:
            self.check_unchanged()  # under the write lock: still the file at the path
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
