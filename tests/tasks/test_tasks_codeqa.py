"""CodeQA: the right option, checked with ast over the whole rendered package; letter scoring."""

from hypothesis import given, settings
from hypothesis import strategies as st

from programs.tasks import codeqa


def answer_from_source(example):
    files = codeqa.split_files(example.context)
    graph = codeqa.call_graph(files)  # every module, filler included
    options, kind = example.meta["options"], example.meta["question_type"]
    question = example.inputs["question"].splitlines()[0]
    if kind == "config":
        key = question.split("'")[1]
        return [o for o in options if o == repr(codeqa.effective_settings(files)[key])]
    if kind == "unreachable":
        live = codeqa.reachable(graph, "cli.main")
        return [o for o in options if o not in live]
    subject = question.split()[3]  # "Which function does X ..." / "Which function calls X ..."
    if kind == "callee":
        return [o for o in options if o in graph[subject]]
    return [o for o in options if subject in graph.get(o, ())]


@settings(max_examples=15, deadline=None)
@given(
    length=st.integers(2_000, 80_000), seed=st.integers(0, 9_999), question=st.sampled_from(codeqa.QUESTIONS)
)
def test_exactly_one_option_is_right_by_ast(length, seed, question):
    example = codeqa.generate(1, length, seed, question=question)[0]
    right = answer_from_source(example)
    assert right == [example.meta["correct"]]
    assert example.gold == "ABCD"[example.meta["options"].index(example.meta["correct"])]


def test_decoy_comments_fool_grep_not_ast():
    example = next(
        e for e in codeqa.generate(8, 5_000, seed=1, question="callee") if "used to run here" in e.context
    )
    assert "# " in example.context and example.meta["correct"]


def test_letter_parsing():
    example = codeqa.generate(1, 3_000, seed=2)[0]
    gold, text = example.gold, example.meta["correct"]
    for said in (gold, f"({gold})", f"{gold}) {text}", f"The answer is {gold}.", text, gold.lower()):
        assert codeqa.score(example, said) == 1.0, said
    wrong = next(x for x in "ABCD" if x != gold)
    assert codeqa.score(example, wrong) == 0.0
    assert codeqa.score(example, "I cannot tell") == 0.0
