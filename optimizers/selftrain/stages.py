"""Where the recipe's stages keep what they finished: a work folder, and optionally an archive.

    WORK/stages/NAME.json     the stage's record (command, counts, seconds): present = done
    WORK/NAME/                what the stage wrote (run folders, a dataset, an adapter)
    ARCHIVE/NAME.json         the same record, and ARCHIVE/NAME.tar.gz its folder, packed
    ARCHIVE/NAME.partial.tar.gz  an unfinished stage's folder as it was (``snapshot``)

The archive is small and meant to be committed (trajectories compress about 10x): a fresh
checkout with an empty WORK unpacks each archived stage instead of running it again. Files a
stage marks as not archived (a float32 peft adapter a later stage turned into its GGUF form)
stay in WORK only.
"""

from __future__ import annotations

import gzip
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlmkit.errors import UserError


class StageStore:
    def __init__(self, work: Path, archive: Path | None = None):
        self.work, self.archive = Path(work), Path(archive) if archive else None
        (self.work / "stages").mkdir(parents=True, exist_ok=True)

    def keep_recipe(
        self,
        recipe: dict[str, Any],
        may_change: tuple[str, ...] = (),
        added_later: dict[str, Any] | None = None,
    ) -> None:
        """Record the recipe the stages belong to; a folder filled by another recipe is refused
        (its finished stages would be kept and mixed with the new recipe's). Fields named in
        ``may_change`` add stages without changing any finished one, so they may differ; a field
        in ``added_later`` that a kept recipe lacks is read as the value given there."""

        def fixed(fields: dict[str, Any]) -> dict[str, Any]:
            fields = {**(added_later or {}), **fields}
            return {name: value for name, value in fields.items() if name not in may_change}

        for folder in filter(None, (self.work, self.archive)):
            path = folder / "recipe.json"
            if path.exists() and fixed(json.loads(path.read_text())) != fixed(recipe):
                raise UserError(
                    f"{folder} holds the stages of another recipe ({path}); use another folder, or "
                    "delete it to start again"
                )
            _write_whole(path, json.dumps(recipe, indent=1) + "\n")

    def recipe(self) -> dict[str, Any] | None:
        for folder in filter(None, (self.archive, self.work)):
            if (folder / "recipe.json").exists():
                return json.loads((folder / "recipe.json").read_text())
        return None

    def folder(self, name: str) -> Path:
        return self.work / name

    def lm_cache(self, name: str) -> Path:
        """The stage's own cache of model replies (``rlmkit eval --lm-cache``). Resumed, a stage
        replays the replies it cached itself; it never replays another stage's: an arm measured
        beside another with the same model and prompt would otherwise copy replies taken on
        another day, perhaps on another CPU, and its runs would measure nothing."""
        return self.work / "lm-cache" / name

    def output(self, name: str) -> Path:
        """A finished stage's folder, for a later stage to read: unpacked from the archive first
        when only the archive has it (a run of only some stages, in a fresh work folder)."""
        if self.record(name) is None:
            raise UserError(f"stage {name!r} has not finished: run it first (its output is read here)")
        return self.folder(name)

    def record(self, name: str) -> dict[str, Any] | None:
        """The finished stage's record (unpacking it from the archive first if only it has it)."""
        path = self.work / "stages" / f"{name}.json"
        if not path.exists() and self.archive and (self.archive / f"{name}.json").exists():
            self._unpack(name)
        return json.loads(path.read_text()) if path.exists() else None

    def run(self, name: str, stage: Callable[[Path], dict[str, Any]], *, skip: tuple[str, ...] = ()) -> dict:
        """The stage's record: kept if it finished before, else ``stage(folder)`` runs now.

        ``skip``: names (globs, relative to the folder) left out of the archive."""
        if (kept := self.record(name)) is not None:
            return kept
        folder = self.restore(name)  # a snapshot of the unfinished stage: its runs resume from there
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        record = stage(folder)
        record["wall_s"] = round(time.monotonic() - started, 1)
        if self.archive:
            self._pack(name, folder, skip)
            (self.archive / f"{name}.partial.tar.gz").unlink(missing_ok=True)
        path = self.work / "stages" / f"{name}.json"
        _write_whole(path, json.dumps(record, indent=1, default=str) + "\n")
        if self.archive:
            _write_whole(self.archive / f"{name}.json", path.read_text())
        return record

    def restore(self, name: str) -> Path:
        """The stage's folder; an unfinished stage's snapshot is unpacked into it first when
        the archive has one and the folder is not there yet."""
        folder = self.folder(name)
        partial = self.archive / f"{name}.partial.tar.gz" if self.archive else None
        if partial and partial.exists() and not folder.exists():
            self._extract(partial)
        return folder

    def snapshot(self, name: str) -> Path | None:
        """Pack an unfinished stage's folder as ``NAME.partial.tar.gz`` (an evaluation's finished
        runs), so a checkout with the archive resumes it run by run; None if there is nothing."""
        folder = self.folder(name)
        if not self.archive or self.record(name) is not None or not folder.is_dir():
            return None
        return self._pack(name, folder, (), suffix=".partial.tar.gz")

    def _pack(self, name: str, folder: Path, skip: tuple[str, ...], suffix: str = ".tar.gz") -> Path:
        self.archive.mkdir(parents=True, exist_ok=True)
        left_out = {p for pattern in skip for p in folder.glob(pattern)}
        out = self.archive / f"{name}{suffix}"
        tmp = out.with_name(out.name + ".writing")
        # gzip stamped with no time or name: the same files pack to the same bytes, so packing a
        # stage again that has not moved leaves the committed archive unchanged
        with (
            tmp.open("wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as packed,
            tarfile.open(fileobj=packed, mode="w") as tar,
        ):
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not (left_out & {path, *path.parents}):
                    tar.add(path, arcname=str(path.relative_to(self.work)))
        tmp.replace(out)
        return out

    def _extract(self, packed: Path) -> None:
        with tarfile.open(packed) as tar:
            _extract_inside(tar, self.work)

    def _unpack(self, name: str) -> None:
        packed = self.archive / f"{name}.tar.gz"
        if packed.exists():
            self._extract(packed)
        _write_whole(self.work / "stages" / f"{name}.json", (self.archive / f"{name}.json").read_text())


def _extract_inside(tar: tarfile.TarFile, into: Path) -> None:
    """Unpack plain files and folders whose names stay inside ``into``; anything else is refused.
    (tarfile's own ``filter="data"`` does this from Python 3.11.4; Debian 12's python3 is 3.11.2.)"""
    root = into.resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
            raise UserError(f"{tar.name}: {member.name!r} is not a plain file inside the work folder")
    if hasattr(tarfile, "data_filter"):
        tar.extractall(root, filter="data")
    else:
        tar.extractall(root)  # noqa: S202 - every member was checked above


def _write_whole(path: Path, text: str) -> None:
    """Whole or absent: a stage killed while writing its record runs again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)
