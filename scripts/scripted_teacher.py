"""A stand-in teacher for the README's rejection fine-tuning recipe, for machines without an API key
or the CPU time a real model needs: an OpenAI-compatible server on 127.0.0.1 whose "model" is a
script that solves needle tasks in two root turns (look with code, then SUBMIT), and answers
wrong on every other sample of a task, so the compile step has runs to reject.

    python scripts/scripted_teacher.py --port 8765 &
    rlmkit eval needle ... --lm openai/teacher --api-base http://127.0.0.1:8765/v1

It is not a model: numbers measured with it show the pipeline working, not a teacher's quality.
"""

from __future__ import annotations

import argparse
import threading
from collections import Counter

from rlmkit.testing.server import ScriptedServer, is_root_request

LOOK = """```repl
import re
key = re.search(r"for (\\S+) mentioned", question).group(1)
values = re.findall(r"special magic \\w+ for " + re.escape(key) + r" is: (\\S+?)\\.(?:\\s|$)", context)
print(values)
```"""
RIGHT = "```repl\nSUBMIT(answer=values)\n```"
WRONG = '```repl\nSUBMIT(answer=["not-found"])\n```'


class Teacher:
    def __init__(self) -> None:
        self.answers: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        if not is_root_request(body):
            return "no sub-calls in this script"
        messages = body["messages"]
        if not any(m["role"] == "assistant" for m in messages):
            return LOOK
        with self.lock:  # per task (its first user message), every other answer is wrong
            self.answers[messages[1]["content"]] += 1
            return RIGHT if self.answers[messages[1]["content"]] % 2 else WRONG


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    server = ScriptedServer(Teacher(), port=port).start()
    print(f"scripted teacher at {server.url}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
