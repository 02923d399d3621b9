"""Suite programs and composed programs, run for real against the scripted server: the root's
code runs in the sandbox, typed sub-calls go over HTTP, DSPy steps parse real replies."""

from __future__ import annotations

import json
import re

import pytest

import rlmkit
from programs import FactsThenAnswer, TallyThenAnswer, build_program, program_for
from programs.suite_programs import SPECS
from programs.tasks import SUITES, UnknownSuiteError, generate, score
from programs.tasks.records import POOLS
from rlmkit.errors import ConfigError
from rlmkit.testing.server import ScriptedServer, is_root_request, last_user_text

LABEL_OF = {text: label for pool in POOLS.values() for label, texts in pool.items() for text in texts}

COUNT_WITH_CLASSIFY = """```repl
import re
label = re.search(r"labelled as '(\\w+)'", question).group(1)
texts = [line.split(" || Instance: ")[1] for line in context.splitlines() if " || Instance: " in line]
distinct = sorted(set(texts))
labels = classify.batched([{"text": t} for t in distinct])
of = dict(zip(distinct, labels))
SUBMIT(answer=str(sum(of[t] == label for t in texts)))
```"""

TALLY = """```repl
from collections import Counter
counts, by_user, by_month = Counter(), {}, {}
for line in context.splitlines():
    parts = line.split(" || ")
    if len(parts) < 4:
        continue
    date, user, label = parts[0][6:], parts[1][6:], parts[3][7:]
    counts[label] += 1
    by_user.setdefault(user, Counter())[label] += 1
    by_month.setdefault(date.split()[0] + " " + date.split()[-1], Counter())[label] += 1
SUBMIT(counts=dict(counts), by_user={k: dict(v) for k, v in by_user.items()},
       by_month={k: dict(v) for k, v in by_month.items()})
```"""

WALK_CHAIN = """```repl
import re
PREFIX = {"the founder of ": "founder", "the birthplace of ": "birthplace", "the employer of ": "employer",
          "the mentor of ": "mentor", "the mayor of ": "mayor", "the river that flows through ": "river"}
FACT = {"founder": "{s} was founded by (.+)", "headquarters": "{s} has its headquarters in (.+)",
        "birthplace": "{s} was born in (.+)", "employer": "{s} works for (.+)", \
"mentor": "{s} trained under (.+)",
        "mayor": "The mayor of {s} is (.+)", "river": "The (.+) flows through {s}"}
def parse(p):
    for prefix, rel in PREFIX.items():
        if p.startswith(prefix):
            return parse(p[len(prefix):]) + [rel]
    m = re.fullmatch(r"the city where (.+) has its headquarters", p)
    return parse(m.group(1)) + ["headquarters"] if m else [p]
chain = parse(question.split("What is ", 1)[1].split("?")[0])
entity, facts = chain[0], []
for rel in chain[1:]:
    m = re.search("^" + FACT[rel].format(s=re.escape(entity)) + r"\\.$", context, re.M)
    doc = int(re.findall(r"^\\[Doc (\\d+)\\]", context[: m.start()], re.M)[-1])
    facts.append({"statement": m.group(0), "doc": doc})
    entity = m.group(1)
facts.append({"statement": "The answer is " + entity + ".", "doc": facts[-1]["doc"]})
SUBMIT(facts=facts)
```"""


def unused_lm():
    """An LM that is never called: a local api_base needs no key, and construction sends nothing."""
    return rlmkit.LM("openai/unused", api_base="http://127.0.0.1:9/v1", cache=False)


def responder(body):
    system, user = body["messages"][0]["content"], last_user_text(body)
    if is_root_request(body):
        if "Collect, from the whole corpus" in system:
            return WALK_CHAIN
        if "Label every record" in system:
            return TALLY
        return COUNT_WITH_CLASSIFY
    if "[[ ## facts ## ]]" in user:  # the ChainOfThought answer step of FactsThenAnswer
        facts = json.loads(user.split("[[ ## facts ## ]]")[1].split("Respond with")[0])
        name = facts[-1]["statement"].removeprefix("The answer is ").rstrip(".")
        docs = sorted({f["doc"] for f in facts})
        return (
            f"[[ ## reasoning ## ]]\nFollow the facts.\n\n[[ ## answer ## ]]\n{name}\n\n"
            f"[[ ## citations ## ]]\n{docs}\n\n[[ ## completed ## ]]"
        )
    if "[[ ## counts ## ]]" in user:  # the ChainOfThought answer step of TallyThenAnswer
        label = re.search(r"labelled as '(\w+)'", user).group(1)
        counts = json.loads(user.split("[[ ## counts ## ]]")[1].split("[[ ##")[0])
        return (
            f"[[ ## reasoning ## ]]\nRead the tally.\n\n[[ ## answer ## ]]\n{counts.get(label, 0)}\n\n"
            "[[ ## completed ## ]]"
        )
    text = user.split("text:\n", 1)[1].strip()  # a typed classify() sub-call
    return json.dumps({"label": LABEL_OF[text]})


@pytest.fixture(scope="module")
def lm():
    with ScriptedServer(responder) as server:
        yield rlmkit.LM("openai/scripted", api_base=server.url, api_key="test", cache=False)


def test_every_suite_has_a_program_with_its_signature():
    assert set(SPECS) == set(SUITES)
    for suite, spec in SPECS.items():
        rlm = program_for(suite, lm=unused_lm(), max_iterations=5)
        assert rlm.signature is spec.signature and rlm.max_iterations == 5
        assert spec.instructions in rlm.instructions
    assert set(program_for("pairs", lm=unused_lm()).subcalls) == {"classify"}
    with pytest.raises(UnknownSuiteError):
        program_for("nope")
    with pytest.raises(ConfigError, match="answers"):
        build_program("facts_then_answer", "needle")


def test_the_plain_program_keeps_the_signature_and_drops_every_word_of_task_knowledge():
    for suite, spec in SPECS.items():
        plain = build_program("plain", suite, lm=unused_lm(), max_iterations=4)
        assert list(plain.signature.fields) == list(spec.signature.fields) and plain.max_iterations == 4
        assert plain.subcalls == {}
        assert spec.instructions not in plain.instructions
        assert spec.signature.instructions not in plain.instructions  # the docstrings carry hints too
        assert plain.instructions.startswith("Given the fields `")


def test_aggregation_rlm_labels_with_typed_sub_calls(lm):
    example = generate("aggregation", n=1, length=3_000, seed=6, question="count")[0]
    prediction = program_for("aggregation", lm=lm, max_iterations=2)(**example.inputs)
    assert score(example, prediction) == 1.0
    calls = list(prediction.trajectory.iter_subcalls())
    distinct = {
        line.split(" || Instance: ")[1] for line in example.context.splitlines() if "Instance: " in line
    }
    assert (
        len(calls) == len(distinct) and {c.kind for c in calls} == {"typed"} and calls[0].name == "classify"
    )


def test_facts_then_answer_composes_an_rlm_with_chain_of_thought(lm):
    # a dev seed: the scripted walk above parses dev's relation templates (each split has its own)
    example = generate("multihop", n=1, length=20_000, seed=1008, hops=3)[0]
    program = FactsThenAnswer(lm=lm, max_iterations=2)
    prediction = program(**example.inputs)
    assert score(example, prediction) == 1.0
    assert set(example.meta["evidence"]) <= set(prediction.citations)
    assert len(prediction.facts) == 4 and prediction.trajectory.status == "ok"
    assert [name for name, _ in program.named_predictors()] == ["gather.root", "answer_step.predict"]


def test_tally_then_answer_passes_typed_tallies_to_the_answer_step(lm):
    example = generate("aggregation", n=1, length=6_000, seed=2, labelled=True, question="count")[0]
    prediction = TallyThenAnswer(lm=lm, max_iterations=2)(**example.inputs)
    assert score(example, prediction) == 1.0
    assert sum(prediction.counts.values()) == example.meta["records"]
