"""Where sync code and the async core meet: the one long-lived event loop sync calls run on
(``sync_loop.py``), and reused threads for blocking work a run hands off its loop (``threads.py``).
Standard library only, so the model layer and the sandbox can stand on it."""
