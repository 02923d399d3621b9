"""A session's checkpoint, in memory and in a directory.

The host keeps each variable the worker pickled as opaque bytes (``SavedVariable.blob``) and
never unpickles them: only a worker does (``sandbox/worker_side/snapshot.py``). A directory holds

    manifest.json              versioned JSON: inputs, variables, history, spending
    inputs/<name>.txt          a text input, stored once (UTF-8)
    variables/<name>-<digest>.pkl   one file per variable version, written when it changed

The manifest is replaced atomically (write, fsync, rename) after the variable files it names
are on disk, so a crash while saving leaves the previous checkpoint whole. Anything that does
not match (no manifest, bad JSON, another format, a newer version, a missing file, a blob
whose digest differs) raises ``SessionFileError`` naming the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlmkit.errors import ContextError, SessionFileError

FORMAT = "rlmkit-session"
VERSION = 1
MANIFEST = "manifest.json"


@dataclass
class SavedVariable:
    """One model variable as of the last checkpoint. ``blob`` is None when it could not be
    pickled (``unsaved`` says why): it lives on in the worker, and is lost if the worker is."""

    name: str
    type: str
    size: int | None
    digest: str = ""
    blob: bytes | None = None
    unsaved: str | None = None

    def describe(self) -> str:
        return self.type if self.size is None else f"{self.type}, {self.size:,} items"


# A worker's snapshot entry: (name, type, size, digest, blob, why it could not be saved).
SnapshotEntry = tuple[str, str, int | None, str, bytes | None, str | None]
SnapshotReply = tuple[str, list[SnapshotEntry], list[str]]  # ("snapshot", entries, gone)


@dataclass
class Checkpoint:
    variables: dict[str, SavedVariable] = field(default_factory=dict)

    def apply(self, reply: SnapshotReply) -> list[str]:
        """Take a worker's ``("snapshot", entries, gone)``; returns the names whose bytes changed."""
        _, entries, gone = reply
        changed: list[str] = []
        for name, type_name, size, digest, blob, unsaved in entries:
            old = self.variables.get(name)
            if blob is None and unsaved is None and old is not None and old.digest == digest:
                old.type, old.size = type_name, size
                continue
            if blob is None and unsaved is None:  # unchanged for the worker, unknown here: refuse quietly
                continue
            self.variables[name] = SavedVariable(name, type_name, size, digest, blob, unsaved)
            changed.append(name)
        for name in gone:
            self.variables.pop(name, None)
        return changed

    def blobs(self) -> list[tuple[str, str, bytes]]:
        return [(v.name, v.digest, v.blob) for v in self.variables.values() if v.blob is not None]

    def unsaved(self) -> dict[str, str]:
        """name -> "type: why" of each variable a restore cannot bring back."""
        return {v.name: f"{v.type}: {v.unsaved}" for v in self.variables.values() if v.unsaved}


def _blob_file(var: SavedVariable) -> str:
    return f"variables/{var.name}-{var.digest}.pkl"


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def input_record(directory: Path, name: str, value: Any, written: dict[str, Any]) -> dict[str, Any]:
    """An input's manifest entry; a text input's file is written once per value (``written``)."""
    if isinstance(value, str):
        rel = f"inputs/{name}.txt"
        if written.get(name) is not value or not (directory / rel).exists():
            _write_atomic(directory / rel, value.encode("utf-8", "surrogatepass"))
            written[name] = value
        return {"kind": "text", "file": rel, "chars": len(value)}
    try:
        return {"kind": "json", "value": json.loads(json.dumps(value))}
    except (TypeError, ValueError):
        raise ContextError(
            f"input {name!r} ({type(value).__name__}) cannot be saved: a session directory keeps "
            "text and JSON data as inputs"
        ) from None


def write(directory: Path, manifest: dict[str, Any], inputs: dict[str, Any], checkpoint: Checkpoint,
          written: dict[str, Any]) -> None:  # fmt: skip
    """Write what changed, then the manifest that names it, then drop files nothing names."""
    (directory / "inputs").mkdir(parents=True, exist_ok=True)
    (directory / "variables").mkdir(exist_ok=True)
    records = {name: input_record(directory, name, value, written) for name, value in inputs.items()}
    variables, unsaved = {}, {}
    for var in checkpoint.variables.values():
        if var.blob is None:
            unsaved[var.name] = {"type": var.type, "size": var.size, "reason": var.unsaved}
            continue
        rel = _blob_file(var)
        if not (directory / rel).exists():
            _write_atomic(directory / rel, var.blob)
        variables[var.name] = {"type": var.type, "size": var.size, "digest": var.digest, "file": rel}
    doc = {"format": FORMAT, "version": VERSION, **manifest, "inputs": records,
           "variables": variables, "unsaved": unsaved}  # fmt: skip
    _write_atomic(directory / MANIFEST, json.dumps(doc, indent=1, default=str).encode())
    keep = {v["file"] for v in variables.values()}
    for old in (directory / "variables").glob("*.pkl"):
        if f"variables/{old.name}" not in keep:
            old.unlink(missing_ok=True)


@dataclass
class Loaded:
    manifest: dict[str, Any]
    inputs: dict[str, Any]
    checkpoint: Checkpoint


def read(directory: str | os.PathLike[str]) -> Loaded:
    """Read a session directory; ``SessionFileError`` naming the file for anything amiss."""
    directory = Path(directory)
    path = directory / MANIFEST
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise SessionFileError("no session manifest here (not a session directory)", path=path) from None
    except (OSError, ValueError) as exc:
        raise SessionFileError(f"the manifest is not readable JSON ({exc})", path=path) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SessionFileError(f"not an {FORMAT} manifest", path=path)
    if doc.get("version") != VERSION:
        raise SessionFileError(
            f"format version {doc.get('version')!r}; this rlmkit reads {VERSION}", path=path
        )
    try:
        inputs = {name: _read_input(directory, name, rec) for name, rec in doc["inputs"].items()}
        checkpoint = Checkpoint()
        for name, rec in doc["variables"].items():
            checkpoint.variables[name] = _read_variable(directory, name, rec)
        for name, rec in doc.get("unsaved", {}).items():
            checkpoint.variables[name] = SavedVariable(
                name, rec["type"], rec.get("size"), unsaved=rec["reason"]
            )
    except (KeyError, TypeError, AttributeError) as exc:
        raise SessionFileError(f"the manifest lacks or mangles an entry ({exc!r})", path=path) from None
    return Loaded(doc, inputs, checkpoint)


def calls_saved(directory: str | os.PathLike[str]) -> int:
    """How many calls the checkpoint in ``directory`` holds (0: none readable). Cheap: replicas
    sharing a directory ask it before each call of a session they hold."""
    try:
        return int(json.loads((Path(directory) / MANIFEST).read_bytes()).get("calls", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def _inside(directory: Path, rel: str) -> Path:
    path = (directory / rel).resolve()
    if not path.is_relative_to(directory.resolve()):  # a crafted manifest names no file outside
        raise SessionFileError(
            f"names a file outside the session directory: {rel!r}", path=directory / MANIFEST
        )
    return path


def _read_input(directory: Path, name: str, rec: dict[str, Any]) -> Any:
    if rec["kind"] == "json":
        return rec["value"]
    path = _inside(directory, rec["file"])
    try:
        text = path.read_bytes().decode("utf-8", "surrogatepass")
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFileError(f"input {name!r} is not readable ({type(exc).__name__})", path=path) from None
    if len(text) != rec["chars"]:
        raise SessionFileError(
            f"input {name!r} has {len(text)} chars, the manifest says {rec['chars']}", path=path
        )
    return text


def _read_variable(directory: Path, name: str, rec: dict[str, Any]) -> SavedVariable:
    path = _inside(directory, rec["file"])
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise SessionFileError(
            f"variable {name!r} is not readable ({type(exc).__name__})", path=path
        ) from None
    if hashlib.blake2b(blob, digest_size=16).hexdigest() != rec["digest"]:
        raise SessionFileError(f"variable {name!r}: the file's digest does not match the manifest", path=path)
    return SavedVariable(name, rec["type"], rec.get("size"), rec["digest"], blob)
