"""Where a study lives: optuna's own storages, opened (and checked) before any LM call.

- ``None``: an SQLite file ``study.db`` in the run's directory, so a stopped run resumes.
- ``"sqlite:///..."``, ``"postgresql://..."``, any SQLAlchemy URL: optuna's RDBStorage; many
  worker processes (on many machines, for a server database) share one study. A plain
  ``postgresql://`` URL uses psycopg (3) when psycopg2 is not installed.
- With ``heartbeat_s`` (RDB storages only), each running trial records a heartbeat that often;
  a trial whose worker died (kill -9, a lost machine) goes stale after ``2 * heartbeat_s``, the
  next worker to look marks it FAIL and optuna's RetryFailedTrialCallback enqueues its
  configuration again, so a crash never leaves a trial RUNNING forever.
- a path ending in ``.journal`` (or ``"journal:///path"``): optuna's JournalStorage on a
  JournalFileBackend, the file-lock based store optuna recommends when several processes on
  one machine would otherwise fight over SQLite's lock.
"""

from __future__ import annotations

import re
import sqlite3
import time
import warnings
from pathlib import Path
from typing import Any

from optuna.exceptions import ExperimentalWarning

from rlmkit.errors import ConfigError, install_hint

JOURNAL_PREFIX = "journal:///"
CONNECT_TIMEOUT_S = 10
MAX_RETRIES = 2  # reruns of a configuration whose worker died mid-trial


def redact(url: str) -> str:
    """The URL with any password replaced, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def default_storage_url(out_dir: str | Path) -> str:
    path = Path(out_dir).resolve() / "study.db"
    return f"sqlite:///{path}"


def _sqlite_connection(path: Path) -> sqlite3.Connection:
    """SQLite in WAL mode: readers never wait for a writer, a commit is not an fsync (a trial
    makes a dozen commits), and a worker waits up to 60 s for another's write lock."""
    connection = sqlite3.connect(str(path), timeout=60, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def _postgres_driver(url: str) -> str:
    """``postgresql://`` means psycopg2 to SQLAlchemy; use psycopg (3) when only that is installed."""
    if not url.startswith("postgresql://"):
        return url
    import importlib.util

    if importlib.util.find_spec("psycopg2") is None and importlib.util.find_spec("psycopg") is not None:
        return "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


def _heartbeat_kwargs(heartbeat_s: int | None) -> dict[str, Any]:
    """Heartbeats, and a retry of every trial whose heartbeat went stale (its worker died)."""
    from optuna import storages

    if not heartbeat_s:
        return {}
    # optuna 5 renamed the hook and its retry callback (4.x: failed_trial_callback, RetryFailedTrialCallback).
    if hasattr(storages, "RetryHeartbeatStaleTrialCallback"):
        hook, retry = "heartbeat_stale_trial_callback", storages.RetryHeartbeatStaleTrialCallback
    else:
        hook, retry = "failed_trial_callback", storages.RetryFailedTrialCallback
    with warnings.catch_warnings():  # 'experimental' in optuna's words since 2.8
        warnings.simplefilter("ignore", ExperimentalWarning)
        return {"heartbeat_interval": int(heartbeat_s), hook: retry(max_retry=MAX_RETRIES)}


def open_storage(storage: Any, out_dir: str | Path, heartbeat_s: int | None = None) -> Any:
    """An optuna storage object for ``storage``; raises ConfigError if it cannot be reached."""
    from optuna.storages import JournalStorage, RDBStorage
    from optuna.storages.journal import JournalFileBackend

    if storage is not None and not isinstance(storage, str):
        return storage  # already an optuna storage object
    url = storage or default_storage_url(out_dir)
    try:
        if url.startswith(JOURNAL_PREFIX) or url.endswith(".journal"):
            path = Path(url[len(JOURNAL_PREFIX) - 1 :] if url.startswith(JOURNAL_PREFIX) else url)
            path.parent.mkdir(parents=True, exist_ok=True)
            return JournalStorage(JournalFileBackend(str(path)))
        engine_kwargs: dict[str, Any] = {}
        if url.startswith("sqlite:///"):
            path = Path(url[len("sqlite:///") :])
            path.parent.mkdir(parents=True, exist_ok=True)
            engine_kwargs = {"creator": lambda: _sqlite_connection(path)}
        if url.startswith("postgresql"):
            engine_kwargs = {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
        # RDBStorage connects and creates its tables here: an unreachable server fails now,
        # before the tuner spends anything on a model.
        return _open_rdb(RDBStorage, _postgres_driver(url), engine_kwargs, _heartbeat_kwargs(heartbeat_s))
    except ImportError as exc:
        raise ConfigError(
            f"cannot open study storage {redact(url)!r}: its database driver is not installed ({exc}); "
            f"for PostgreSQL: {install_hint('postgres')}"
        ) from exc
    except Exception as exc:  # SQLAlchemy, OS and optuna errors alike: all mean 'unreachable'
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot open study storage {redact(url)!r}: {first_line}") from exc


def _open_rdb(
    rdb_storage: Any, url: str, engine_kwargs: dict[str, Any], heartbeat: dict[str, Any], attempts: int = 5
) -> Any:
    """RDBStorage, retried while another worker is creating the same fresh database's tables
    (two first workers race on the schema: one gets a UNIQUE or 'locked' error, then finds it made)."""
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():  # heartbeats are 'experimental' in optuna's words
                warnings.simplefilter("ignore", ExperimentalWarning)
                return rdb_storage(url, engine_kwargs=engine_kwargs or None, **heartbeat)
        except Exception as exc:
            message = str(exc)  # two processes creating one fresh study race on its tables: retry
            transient = any(
                s in message for s in ("UNIQUE constraint", "database is locked", "already exists")
            )
            if not transient or attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")
