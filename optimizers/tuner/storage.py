"""Where a study lives: optuna's own storages, opened (and checked) before any LM call.

- ``None``: an SQLite file ``study.db`` in the run's directory, so a stopped run resumes.
- ``"sqlite:///..."``, ``"postgresql://..."``, any SQLAlchemy URL: optuna's RDBStorage; many
  worker processes (on many machines, for a server database) share one study.
- a path ending in ``.journal`` (or ``"journal:///path"``): optuna's JournalStorage on a
  JournalFileBackend, the file-lock based store optuna recommends when several processes on
  one machine would otherwise fight over SQLite's lock.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlmkit.errors import ConfigError

JOURNAL_PREFIX = "journal:///"
CONNECT_TIMEOUT_S = 10


def redact(url: str) -> str:
    """The URL with any password replaced, for messages."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def default_storage_url(out_dir: str | Path) -> str:
    path = Path(out_dir).resolve() / "study.db"
    return f"sqlite:///{path}"


def open_storage(storage: Any, out_dir: str | Path) -> Any:
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
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        engine_kwargs = {}
        if url.startswith("postgresql"):
            engine_kwargs = {"connect_args": {"connect_timeout": CONNECT_TIMEOUT_S}}
        # RDBStorage connects and creates its tables here: an unreachable server fails now,
        # before the tuner spends anything on a model.
        return RDBStorage(url, engine_kwargs=engine_kwargs or None, heartbeat_interval=None)
    except ImportError as exc:
        raise ConfigError(
            f"cannot open study storage {redact(url)!r}: its database driver is not installed ({exc}); "
            "for PostgreSQL install psycopg (pip install 'psycopg[binary]') or use postgresql+psycopg2://"
        ) from exc
    except Exception as exc:  # SQLAlchemy, OS and optuna errors alike: all mean 'unreachable'
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"cannot open study storage {redact(url)!r}: {first_line}") from exc
