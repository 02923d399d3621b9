"""The worker side of the process sandbox: every file that runs inside the worker process.

The host never imports the worker's own modules; it starts them by path, as
``python -I -S worker_side/worker.py CONFIG``, and the worker imports its siblings as top-level
modules (``import wire``: with ``-I -S`` the script's folder is the only place it looks). So
everything here imports only the standard library and each other (``tests/project/test_layering.py``).

- ``worker.py``: the worker's entry and its REPL (``WorkerRepl``), one per run.
- ``fork_server.py``: the fork server, a clean interpreter that forks new workers; its host-side
  client is ``rlmkit/sandbox/fork_server_client.py``.
- ``confine.py``: the OS confinement a worker applies to itself; ``snapshot.py``: a session's
  checkpoints, pickled and unpickled only in here.
- Spoken by both sides, so the host imports them from here too (one copy):
  ``wire.py`` (the pipe's frames), ``textbuf.py`` (zero-copy str buffers, under ``wire``) and
  ``cells.py`` (how a cell runs, shared with the inline and Monty sandboxes).

This file itself is the host's way in to those three; the worker never runs it.
"""

BOTH_SIDES = ("wire", "textbuf", "cells")  # the modules here that the host may import
