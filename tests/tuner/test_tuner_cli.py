"""``rlmkit optimize SUITE``: a real suite, a real RLM, a scripted model behind a real HTTP server."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from rlmkit.cli import app
from rlmkit.testing import is_root_request

KEYWORD = "KEY-FIRST"
SOLVE = (
    "```repl\nimport re\nkey = re.search(r'for (.+?) mentioned', question).group(1)\n"
    "SUBMIT(answer=re.findall(r'for ' + re.escape(key) + r' is: (\\S+?)\\.', context))\n```"
)
GIVE_UP = "```repl\nSUBMIT(answer=['nothing'])\n```"


def responder(body):
    """The root solves the needle only under an instruction with KEYWORD, which the proposer offers."""
    if not is_root_request(body):
        return f"<instruction>{KEYWORD}: read the key from the question, then findall.</instruction>"
    return SOLVE if KEYWORD in body["messages"][0]["content"] else GIVE_UP


def test_optimize_prints_a_pareto_table_and_writes_the_run(serve, tmp_path):
    server, _ = serve(responder)
    out = tmp_path / "opt"
    result = CliRunner().invoke(
        app,
        [
            "optimize",
            "needle",
            "--lm",
            "openai/scripted",
            "--api-base",
            server.url,
            "--trials",
            "5",
            "--objective",
            "accuracy,cost",
            "--n-train",
            "3",
            "--length",
            "2000",
            "--max-iterations",
            "2:4",
            "--propose",
            "1",
            "--demos",
            "0",
            "--sandbox",
            "inline",
            "--out",
            str(out),
        ],
        env={"OPENAI_API_KEY": "test"},
    )
    assert result.exit_code == 0, result.output
    assert "Pareto front" in result.output and re.search(
        r"^trial\s+accuracy\s+cost \(tokens/example\)", result.output, re.MULTILINE
    )
    assert "trial 4: COMPLETE" in result.output  # one progress line per trial
    front = (out / "front.txt").read_text()
    assert re.search(r"^\d+\s+1\s+", front, re.MULTILINE), (
        front
    )  # the proposed instruction solved every example
    assert (out / "study.db").exists() and (out / "front.png").exists()
    assert (out / "best" / "program.json").exists()


def test_optimize_refuses_bad_options_before_any_model_call(serve, tmp_path):
    server, _ = serve(responder)
    runner = CliRunner()
    for args, message in [
        (["no-such-suite"], "unknown suite"),
        (["needle", "--objective", "cost"], "--objective must be"),
        (["needle", "--max-iterations", "three"], "LOW:HIGH"),
        (["needle", "--storage", "postgresql://u:pw@127.0.0.1:1/x"], "cannot open study storage"),
    ]:
        result = runner.invoke(
            app,
            [
                "optimize",
                *args,
                "--lm",
                "openai/scripted",
                "--api-base",
                server.url,
                "--out",
                str(tmp_path / "x"),
                "--length",
                "2000",
                "--n-train",
                "2",
            ],
            env={"OPENAI_API_KEY": "test"},
        )
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split()), result.output
    assert server.requests == []
