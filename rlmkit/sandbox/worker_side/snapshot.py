"""Worker side: session checkpoints, taken and restored inside the worker process (standard
library only, plus cloudpickle from a folder the host names; the host stores the bytes and never
imports this).

A session keeps the variables the model made between calls. After each call the host asks
the worker for a ``snapshot``: every model variable is pickled here, inside the confined
worker, with cloudpickle when the host names where it lives (functions and classes the model
defined survive), else the standard pickle. Only variables whose pickle changed since the
last snapshot cross the pipe; the host stores those bytes and never unpickles them. A
``restore`` hands them back to a fresh worker, which unpickles them here: a crafted session
directory runs code only inside the sandbox.

Messages (``worker.py`` routes them): ``("snapshot", skip, pickler_dir, max_bytes)`` ->
``("snapshot", entries, gone)`` with one ``(name, type, size, digest, blob | None, unsaved)``
per variable (blob only when it changed; unsaved: why it could not be pickled, else None);
``("restore", pickler_dir, [(name, digest, blob)])`` -> ``("restored", errors)``.
"""

from __future__ import annotations

import hashlib
import pickle
import sys

# Values that cannot change in place: the same object as last time needs no new pickle.
_IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), frozenset)


def _pickler(pickler_dir: str | None):
    """cloudpickle from ``pickler_dir`` (the worker runs with -I -S: no site-packages), else pickle."""
    if not pickler_dir:
        return pickle
    if "cloudpickle" not in sys.modules:
        sys.path.insert(0, pickler_dir)
        try:
            import cloudpickle  # noqa: F401
        except ImportError:
            return pickle
        finally:
            sys.path.remove(pickler_dir)
    return sys.modules["cloudpickle"]


def describe(value) -> tuple[str, int | None]:
    """(type name, len) as ``SHOW_VARS`` prints them."""
    try:
        size = len(value) if hasattr(value, "__len__") else None
    except Exception:  # noqa: BLE001 - a model's class with a broken __len__
        size = None
    return type(value).__name__, size


def is_model_variable(name: str, value, skip: set) -> bool:
    """A module the model imported counts: cloudpickle stores it by name, so it is imported again."""
    return not (name.startswith("_") or name in skip)


class Snapshots:
    """What the last snapshot (or restore) held: name -> (object id, digest)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[int, str]] = {}
        self.kept: dict[str, object] = {}  # holds each snapshotted object, so its id stays its own

    def take(self, namespace: dict, skip, pickler_dir: str | None, max_bytes: int) -> tuple:
        pickler = None  # imported at the first value to pickle: cloudpickle costs ~20 ms to import
        skip = set(skip)
        entries, seen = [], set()
        for name, value in list(namespace.items()):
            if not is_model_variable(name, value, skip):
                continue
            seen.add(name)
            type_name, size = describe(value)
            before = self.last.get(name)
            if before is not None and before[0] == id(value) and isinstance(value, _IMMUTABLE):
                entries.append((name, type_name, size, before[1], None, None))
                continue
            pickler = pickler or _pickler(pickler_dir)
            try:
                blob = pickler.dumps(value, protocol=5)
            except BaseException as exc:  # noqa: BLE001 - pickling can fail with anything
                self.last.pop(name, None)
                entries.append((name, type_name, size, "", None, f"{type(exc).__name__}: {exc}"[:300]))
                continue
            if len(blob) > max_bytes:
                self.last.pop(name, None)
                why = f"its pickle is {len(blob):,} bytes, over the {max_bytes:,}-byte limit"
                entries.append((name, type_name, size, "", None, why))
                continue
            digest = hashlib.blake2b(blob, digest_size=16).hexdigest()
            changed = before is None or before[1] != digest
            self.last[name], self.kept[name] = (id(value), digest), value
            entries.append((name, type_name, size, digest, blob if changed else None, None))
        gone = [name for name in self.last if name not in seen]
        for name in gone:
            del self.last[name]
            self.kept.pop(name, None)
        return ("snapshot", entries, gone)

    def restore(self, namespace: dict, pickler_dir: str | None, blobs: list) -> tuple:
        pickler = _pickler(pickler_dir)
        errors = []
        for name, digest, blob in blobs:
            try:
                value = pickler.loads(blob)
            except BaseException as exc:  # noqa: BLE001 - a value whose class is gone, a corrupt blob
                errors.append((name, f"{type(exc).__name__}: {exc}"[:300]))
                continue
            namespace[name] = value
            self.last[name], self.kept[name] = (id(value), digest), value
        return ("restored", errors)
