"""Every knob of a self-training run, in one frozen record that the results file repeats.

Seeds: training examples come from seeds below 1000 (``sample_seed``), held-out ones from 1000
up (``test_seed``), so nothing the model trained on is ever scored."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

HELD_OUT_SEEDS = 1000  # seeds from here up are never sampled for training
# Recipe fields that only add measurements (each suite's evaluation is a stage of its own): a
# finished recipe may gain held-out suites without redoing or mixing any finished stage.
MEASURED_ONLY = ("held_out", "confirm_seeds")
# Fields a recipe written before them lacks: read as their defaults, so its folder still resumes.
ADDED_LATER = (
    "hint",
    "per_turn",
    "dpo",
    "dpo_beta",
    "max_seconds",
    "min_score",
    "sample_threads",
    "save_every",
    "sample_adapter",
    "runs_from",
    "branch_samples",
)
# Fields that only change what the dataset stage reads (and stages that run before it, reading
# finished ones): until it has run they may change.
DATASET_ONLY = ("runs_from", "branch_samples")


class SuitePlan(BaseModel):
    """One task suite at one context length: ``n`` examples from ``seed`` on."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    suite: str
    length: int = Field(20_000, ge=1_000, description="characters of context per example")
    n: int = Field(16, ge=1, description="examples")
    hint: bool | None = Field(
        None, description="sample this suite hinted or not (None: the recipe's `hint`); sampling only"
    )

    @model_serializer(mode="wrap")
    def _unset_hint_left_out(self, handler: Any) -> dict[str, Any]:
        # a plan that does not choose is written as plans were before they could, so the record
        # of a recipe made then still matches (StageStore.keep_recipe compares the records)
        data = handler(self)
        if data.get("hint", False) is None:
            del data["hint"]
        return data

    @property
    def label(self) -> str:
        return f"{self.suite}-{self.length // 1000}k"


class Recipe(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    lm: str = Field("local", description="the model sampled and trained: 'local' is the embedded one")
    train: tuple[SuitePlan, ...] = Field(min_length=1, description="suites sampled and trained on")
    held_out: tuple[SuitePlan, ...] = Field((), description="suites measured but not trained on")
    program: str = Field("plain", description="the program run: the suite's signature, generic prompt")
    # sampling (training seeds)
    samples: int = Field(4, ge=1, description="distinct runs per training example")
    branch_samples: int = Field(
        0,
        ge=0,
        lt=100,
        description="continue each sampled run that scored below `min_score` (else 1.0) after two "
        "turns or more from its last turn, this many times (rlmkit eval --branch-from): DPO pairs at "
        "the turn that decided the answer, and SFT rows from the continuations that end right "
        "(0: none); may change until the dataset stage runs",
    )
    hint: bool = Field(
        False,
        description="sample with the gold answer in each training question (rlmkit eval --hint); a "
        "run trains only if its code brought the gold out of the input, and without the hint; a "
        "suite's own `hint` overrides this",
    )
    per_turn: bool = Field(
        False,
        description="compile with the per-turn filter (rlmkit compile sft --per-turn): drop single "
        "turns whose code failed, that made up output, had an answer rejected, or repeat a turn",
    )
    min_score: float | None = Field(
        None,
        gt=0,
        le=1,
        description="SFT rows only from runs scoring at least this (None: any score above 0); suites "
        "with partial credit score a count that is off by one, or a near miss, above 0",
    )
    temperature: float = Field(0.8, gt=0, description="sampling temperature (distinct runs)")
    max_seconds: float | None = Field(
        None,
        gt=0,
        description="wall-time budget of each run, sampled or measured (a run past it stops and scores 0): "
        "one llm_query over a whole long input can hold a CPU server for many minutes",
    )
    sample_threads: int | None = Field(
        None,
        ge=1,
        description="llama.cpp threads of the sampling server (None: every core); 1 where other "
        "model jobs share the cores: a thread that waits on a descheduled sibling stalls every step",
    )
    sample_adapter: str | None = Field(
        None,
        description="a GGUF LoRA the sampling server applies: a .gguf file, or the archive folder of an "
        "earlier recipe (its adapter stage is unpacked from there). STaR's next round samples the "
        "model the last round made, which is right more often, so more runs train; training still "
        "starts from the base (None: sample the base)",
    )
    runs_from: tuple[str, ...] = Field(
        (),
        description="archive folders of earlier recipes whose sampled runs the dataset compiles beside "
        "this recipe's own (their families count as trained on); 'ARCHIVE:prose,needle' takes only "
        "those families' runs; may change until the dataset stage runs",
    )
    sample_seed: int = Field(0, ge=0)
    max_iterations: int = Field(8, ge=1, description="root turns per run (sampling and measuring)")
    workers: int = Field(4, ge=1, description="runs at once (the server's parallel slots)")
    eval_iterations: int = Field(6, ge=1, description="root turns per held-out run, both arms")
    eval_threads: int | None = Field(
        1,
        ge=1,
        description="llama.cpp threads of each arm's own server, the two arms measured side by side "
        "(None: one after the other on the machine's server)",
    )
    # training
    backend: str = Field("trl-sft", description="rlmkit train --backend")
    epochs: float = Field(1.0, gt=0, description="passes over the compiled training rows")
    max_steps: int = Field(64, ge=1, description="cap on optimizer steps (CPU time)")
    lr: float = Field(1e-4, gt=0)
    lora_rank: int = Field(8, ge=1)
    max_seq_len: int = Field(4096, ge=256)
    precision: str = Field("auto", description="auto | bf16 | fp32 (auto: bf16 where the hardware has it)")
    save_every: int = Field(
        10,
        ge=0,
        description="optimizer steps between checkpoints of a train stage (0: none): stopped, the "
        "stage goes on from its latest checkpoint to the adapter an unbroken run makes",
    )
    dpo: bool = Field(
        False,
        description="after SFT, go on training the SFT adapter with DPO (trl-dpo) on the compiled "
        "pairs (a right ending against a wrong one after the same turns); the DPO adapter is measured",
    )
    dpo_beta: float = Field(0.1, gt=0, description="DPO's beta: how far it may move from the SFT adapter")
    # measuring (held-out seeds, greedy, both arms alike)
    test_seed: int = Field(HELD_OUT_SEEDS, ge=HELD_OUT_SEEDS)
    test_n: int = Field(30, ge=1, description="held-out examples per trained suite")
    confirm_seeds: tuple[int, ...] = Field(
        (),
        description="further held-out draws of the trained suites (generator seeds >= 1000, test_n "
        "examples each), measured like test_seed's: fresh examples for a change decided after "
        "test_seed's runs were read",
    )

    @model_validator(mode="after")
    def _seeds_apart(self) -> Recipe:
        for plan in self.train:
            if self.sample_seed + plan.n > HELD_OUT_SEEDS:
                raise ValueError(
                    f"{plan.label}: training seeds {self.sample_seed}..{self.sample_seed + plan.n - 1} "
                    f"reach the held-out seeds (>= {HELD_OUT_SEEDS})"
                )
        for seed in self.confirm_seeds:
            if seed < HELD_OUT_SEEDS or seed == self.test_seed:
                raise ValueError(
                    f"confirmation seed {seed}: a held-out seed (>= {HELD_OUT_SEEDS}) other than "
                    f"test_seed {self.test_seed} is needed"
                )
        return self

    @model_validator(mode="after")
    def _one_stage_per_plan(self) -> Recipe:
        # a plan's stage is named by its label: two plans of one label would share a folder, the
        # second resuming the first's runs as its own
        labels = [plan.label for plan in self.train]
        if twice := sorted({label for label in labels if labels.count(label) > 1}):
            raise ValueError(
                f"train: {', '.join(twice)} planned twice (a suite at one length, in thousands "
                "of characters, is one stage: plan more examples in it, or another length)"
            )
        return self

    @classmethod
    def added_later(cls) -> dict:
        """``ADDED_LATER`` fields at their defaults: what a recipe written before them meant."""
        return {name: cls.model_fields[name].default for name in ADDED_LATER}

    def measured(self) -> list[SuitePlan]:
        """Every suite both arms are measured on: the trained ones at ``test_n``, then the rest."""
        return self._trained() + list(self.held_out)

    def measurements(self) -> list[Measurement]:
        """Every paired measurement, in the order they run: each suite of ``measured()`` on
        ``test_seed``, then each trained suite again on each confirmation seed."""
        first = [Measurement(plan=plan, seed=self.test_seed, label=plan.label) for plan in self.measured()]
        again = [
            Measurement(plan=plan, seed=seed, label=f"{plan.label}-s{seed}")
            for seed in self.confirm_seeds
            for plan in self._trained()
        ]
        return first + again

    def hinted(self, plan: SuitePlan) -> bool:
        """Whether ``plan`` is sampled with the hint: its own choice, else the recipe's."""
        return self.hint if plan.hint is None else plan.hint

    def trains_on(self, plan: SuitePlan) -> bool:
        """Whether ``plan`` is a suite (at its length) this recipe trains on."""
        return any(p.suite == plan.suite and p.length == plan.length for p in self.train)

    def _trained(self) -> list[SuitePlan]:
        """The trained suites as measured: ``test_n`` held-out examples each."""
        return [plan.model_copy(update={"n": self.test_n}) for plan in self.train]


class Measurement(BaseModel):
    """One suite measured on both arms: its held-out examples come from generator seed ``seed``;
    ``label`` names its stages (``eval-ARM-LABEL``)."""

    model_config = ConfigDict(frozen=True)

    plan: SuitePlan
    seed: int
    label: str
