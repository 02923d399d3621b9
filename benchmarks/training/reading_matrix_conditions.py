"""How the held-out matrix's runs were made, beyond the matrix's own settings: what its results
file says about each stage's load, order and code where a stage's own record cannot say it.

Rendered with the results (``reading_matrix.py --report-only``); a line is added when a pass runs
under conditions the ones before did not, never changed after its figures are published."""

# How this pass's runs were made, beyond the matrix's own settings (rendered with the results).
CONDITIONS = [
    "Runs were side by side with other work on the same two cores (tests, builds, sampling), so "
    "seconds and the 240-second budget bind harder than on a quiet machine; every arm of a suite "
    "ran under the same load.",
    "Except source-60k's `base_again` and `reading`: `reading` finished its 30 runs in about 20 "
    "minutes; `base_again`, whose runs mostly ran into the 240-second budget, ran its last 23 after "
    "that, beside a clone of the project running its test suite (both base arms' budget-bound runs "
    "score 0 either way, but a busier machine cuts more of them).",
    "Likewise source-60k's `base_round2`: `round2_sft` and `round2` finished their 30 runs in about "
    "25 minutes, 3 servers sharing the 2 cores; `base_round2` ran its last 20 after that, beside a "
    "clone of the project running its test suite.",
    "Likewise source-60k's `base_round3`: `round3_sft` finished its 30 runs in about 32 minutes, "
    "beside it; `base_round3`, whose runs mostly ran into the 240-second budget, ran its last 21 "
    "after that, beside the third round's DPO training on one thread.",
    "The third round's final adapter, `round3`, ran prose-60k and source-60k after `base_round3` "
    "had finished them, the two stages side by side (two 1-thread servers on the two cores, as "
    "`round3_sft` and `base_round3` had run): its runs and those of the base it is compared with "
    "ran at different times, under like load.",
    "`base_round3` ran codeqa-20k's first 6 runs beside `round3`'s, the other 14 later, beside "
    "other stages of the matrix. From multi_needle-20k on, the third round's two arms took the "
    "stages from one queue, suite after suite, each on its own 1-thread server: an arm that "
    "finished a suite started the next while the other was still on it, so the two cores stayed "
    "busy and the arms of a suite ran at overlapping, not identical, times.",
    "pairs-20k's third-round arms were stopped after `base_round3`'s first 7 runs and `round3`'s "
    "first 15 and resumed later on efdc5cb (no code a run executes differed from the checkout they "
    "started on). `base_round3`'s 8th run ran beside `round3`'s last 5; its 9th to about its 14th "
    "beside a measurement of the demo (one 1-thread llama.cpp server, as `round3`'s had been); its "
    "last 6 or so with the other core idle.",
    "pairs-20k's second-round arms started on 87edf35 with one uncommitted change, to a test "
    "(committed as 4a602af): no code a run executes differed.",
]
# The code of the stages that finished before stage records named it (from the history of the
# checkout they ran in): later stages record their own (``MatrixRun(code=...)``).
CODE_BEFORE_RECORDS = {
    "prose-60k": "5d1bce4",
    "source-60k": "e1a140a",
    "needle-20k": "e1a140a",
    "multi_needle-20k": "e1a140a, its last runs c2bfd42 (no change to the code a run executes)",
}
# Stages resumed in a later checkout than the one that made their first runs: a stage records the
# checkout it was (re)started in, so the earlier one is named here.
RESUMED_FROM = {"codeqa-20k": "its first 14 to 16 runs per arm on the checkout before e2dee62"}
