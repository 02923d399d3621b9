"""Start and stop the embedded model's OpenAI-compatible server (xllamacpp in a child process).

One server per Python process, started on first use and stopped at exit. Its llama.cpp
logs go to ``<models dir>/../logs/local-server-<pid>.log``, never to the user's terminal;
a failed start quotes that log's tail in the error.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from rlmkit.errors import LocalModelError

MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"  # what the server calls its model, instead of a file path
# Draftless speculative decoding (llama.cpp's n-gram lookup): "none", or how the server guesses the
# next tokens from text already in the slot's context; the model checks a guess in one batch.
SPECULATIVE = ("none", "ngram-simple", "ngram-map-k")


@dataclass(frozen=True)
class LocalServerConfig:
    """How the embedded model is served. ``ctx`` is the total KV budget shared by all slots."""

    ctx: int = 16384
    parallel: int = 4
    threads: int = os.cpu_count() or 2
    port: int = 0  # 0: a free port
    start_timeout_s: float = 180.0
    speculative: str = "none"  # one of SPECULATIVE; see server_process.speculate

    def __post_init__(self) -> None:
        if self.ctx < 512 or self.parallel < 1 or self.threads < 1:
            raise LocalModelError(
                f"invalid local server config {self}: need ctx >= 512, parallel >= 1, threads >= 1"
            )
        if self.speculative not in SPECULATIVE:
            raise LocalModelError(
                f"unknown speculative decoding {self.speculative!r}: one of {', '.join(SPECULATIVE)}"
            )

    def server_args(self) -> list[str]:
        """The server process's flags for these settings (``rlmkit.local.server_process``)."""
        return [
            "--port", str(self.port), "--ctx", str(self.ctx), "--parallel", str(self.parallel),
            "--threads", str(self.threads), "--speculative", self.speculative,
        ]  # fmt: skip


class LocalServer:
    """A running xllamacpp server child. ``url`` is an OpenAI ``api_base`` (ends in /v1)."""

    def __init__(
        self,
        model_path: Path,
        config: LocalServerConfig | None = None,
        log_path: Path | None = None,
        *,
        alias: str = MODEL_ALIAS,
        lora: Path | None = None,
    ):
        self.model_path = Path(model_path)
        self.alias = alias  # what the server calls its model
        self.lora = Path(lora) if lora else None  # a GGUF LoRA adapter applied on top (a trained student)
        self.config = config or LocalServerConfig()
        self.log_path = log_path or self.model_path.parent.parent / "logs" / f"local-server-{os.getpid()}.log"
        self.url: str | None = None
        self._proc: subprocess.Popen[str] | None = None
        self.startup_s: float | None = None  # seconds from spawn to ready, for reports

    def start(self) -> Self:
        started = time.perf_counter()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        cfg = self.config
        cmd = [
            sys.executable, "-m", "rlmkit.local.server_process",
            "--model", str(self.model_path), "--log", str(self.log_path),
            *cfg.server_args(), "--alias", self.alias,
        ]  # fmt: skip
        if self.lora:
            cmd += ["--lora", str(self.lora)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        line = self._read_ready_line(cfg.start_timeout_s)
        try:
            message = json.loads(line) if line else {}
        except ValueError:
            message = {}
        if "url" not in message:
            self.stop()
            detail = message.get("error") or "it exited before it was ready"
            raise LocalModelError(
                f"the embedded model server did not start ({detail}). Last log lines from "
                f"{self.log_path}:\n{self._log_tail()}"
            )
        self.url = message["url"]
        self.startup_s = time.perf_counter() - started
        return self

    def _read_ready_line(self, timeout_s: float) -> str:
        """The child's first stdout line, or '' if it does not come in time."""
        result: list[str] = []
        stdout = self._proc.stdout if self._proc is not None else None
        if stdout is None:
            return ""
        reader = threading.Thread(target=lambda: result.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        return result[0] if result else ""

    def _log_tail(self, lines: int = 8) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Close the child's stdin (it exits at EOF); terminate it if it does not."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        if self.url is not None:  # a clean run: its log holds nothing anyone needs (one file per process)
            self.log_path.unlink(missing_ok=True)
        self.url = None

    def __enter__(self) -> Self:
        return self.start() if not self.running else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_shared: dict[tuple[Path, Path | None], LocalServer] = {}
_shared_lock = threading.Lock()


def shared_server(
    model_path: Path,
    config: LocalServerConfig | None = None,
    lora: Path | None = None,
    alias: str = MODEL_ALIAS,
) -> LocalServer:
    """This process's own server for the model (and LoRA adapter), started on first call and
    stopped at interpreter exit."""
    key = (Path(model_path), Path(lora) if lora else None)
    with _shared_lock:
        server = _shared.get(key)
        if server is None or not server.running:
            server = _shared[key] = LocalServer(model_path, config, alias=alias, lora=lora).start()
            atexit.register(server.stop)
        return server
