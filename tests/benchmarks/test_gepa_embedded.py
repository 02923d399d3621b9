"""benchmarks/quality/gepa_embedded.py with scripted models in place of the embedded one: GEPA's reflection
reaches the instructions, both programs answer the held-out examples, the optimised program is
the one loaded back from disk, and a rerun resumes from its cache without asking the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dspy

from rlmkit.testing import is_root_request

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path[:0] = [str(BENCH / "quality"), str(BENCH)]

import gepa_embedded  # noqa: E402
import render_docs  # noqa: E402

KEYWORD = "KEY-FROM-QUESTION"
SOLVE = (
    "```repl\nimport re\nkey = re.search(r'for (\\S+) mentioned', question).group(1)\n"
    "SUBMIT(answer=re.search(r'for ' + re.escape(key) + r' is: (\\d+)', context).group(1))\n```"
)
GIVE_UP = "```repl\nSUBMIT(answer='unknown')\n```"


def responder(body):
    """The root solves the needle only when its instructions carry the keyword; anything else is
    GEPA's reflection, which proposes an instruction with the keyword."""
    if is_root_request(body):
        return SOLVE if KEYWORD in str(body["messages"][0]["content"]) else GIVE_UP
    proposal = f"{KEYWORD}: read the key in the question, then search the context for its sentence."
    if "Outputs will be a JSON object" in str(body["messages"][0]["content"]):  # dspy's JSONAdapter
        return json.dumps({"new_instruction": proposal})
    return f"[[ ## new_instruction ## ]]\n{proposal}\n\n[[ ## completed ## ]]"


def test_gepa_study_writes_before_and_after_and_resumes_from_its_cache(serve, tmp_path, monkeypatch):
    server, root = serve(responder)
    reflection = dspy.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)
    monkeypatch.setattr(gepa_embedded, "embedded_models", lambda args: (root, reflection))
    out = tmp_path / "gepa.json"
    argv = ["--train", "2", "--heldout", "2", "--length", "2000", "--max-metric-calls", "6"]
    argv += ["--max-iterations", "2", "--work", str(tmp_path / "work"), "--out", str(out)]

    gepa_embedded.main(argv)
    doc = json.loads(out.read_text())
    assert doc["partial"] is False
    assert KEYWORD in doc["gepa"]["instructions_after"] and KEYWORD not in doc["gepa"]["instructions_before"]
    assert doc["gepa"]["round_trip"] is True
    assert doc["programs"]["plain"]["mean"] == 0.0 and doc["programs"]["gepa"]["mean"] == 1.0
    assert {r["id"] for r in doc["rows"]} == set(doc["heldout_ids"]) and len(doc["rows"]) == 4
    assert all(doc["heldout_ids"][i].startswith("needle-s1000") for i in range(2))
    assert {"command", "date", "commit", "machine", "load"} <= doc.keys()

    monkeypatch.setattr(render_docs, "RESULTS", tmp_path)
    out.rename(tmp_path / "gepa_embedded.json")  # what render_docs reads from benchmarks/results/
    table = render_docs.gepa()
    assert (
        "| plain | 2 | 0.00 (0.00-0.00) | 0 | 0 |" in table
        and "| gepa | 2 | 1.00 (1.00-1.00) | 2 | 0 |" in table
    )
    assert KEYWORD in table and "Partial" not in table
    assert "python benchmarks/quality/gepa_embedded.py" in table

    asked = len(server.requests)
    gepa_embedded.main(argv)  # everything is cached: the model is not asked again
    assert len(server.requests) == asked
    assert json.loads(out.read_text())["rows"] == doc["rows"]


def test_the_metric_tells_gepa_what_was_wrong():
    from programs.tasks import generate

    example = generate("needle", n=1, length=2_000, seed=0)[0]
    metric = gepa_embedded.feedback_metric([example])
    gold = gepa_embedded.as_dspy(example)
    right = metric(gold, dspy.Prediction(answer=example.gold[0]))
    wrong = metric(gold, dspy.Prediction(answer="42"))
    assert (right.score, wrong.score) == (1.0, 0.0)
    assert "'42'" in wrong.feedback and example.gold[0] in wrong.feedback
