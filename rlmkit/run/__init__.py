"""The run: one conversation between a root model and its REPL, from a frozen spec to validated
outputs, and every ``rlm_query`` child run under it.

    start.py            run_tree: a top-level call's run, or a child's, from its spec
    loop.py             run_loop: the one async loop (ask, parse, run code, feed back)
    tree.py             Tree: what a whole call tree shares (loop, spending, fan-out, clock, log)
    spec.py             RunSpec: what one run reads, frozen; .child() for an rlm_query child
    state.py            RunState: one run in progress
    hooks.py            CallHooks: what a call's caller decides (lease, spending, notes); PlainCall
    inputs.py           RunInputs: a call's inputs, checked; what each becomes in the REPL
    describe.py         what a trajectory records of each input (type, size, sha256, preview)
    subcalls.py         the REPL's functions (llm_query, rlm_query, typed sub-calls, tools, MCP tools)
    mcp_tools.py        MCP servers' tools: connected per call tree, arguments checked by schema
    typed_subcalls.py   a dspy.Signature as a REPL function
    model_call.py       the budgeted model call
    guards.py           input restore, SUBMIT checks, loop nudge, answer hold
    entry.py            how a call enters a run: its options, and the one bridge from sync code

Nothing here imports the ``RLM`` module, sessions, serving, the CLI or the viewer: they stand
above the run and speak to it through ``RunSpec``, ``CallHooks`` and ``Spending``. This package
file imports nothing, so reading one of its modules does not load the rest.
"""
