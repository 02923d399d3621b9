"""The release path's registry (``rounds.toml`` beside this file): the matrix's arms, the rounds
whose adapters the gate judges, and the sealed test's suites, as typed records.

A round's adapter arms exist once their stage has finished in its archive: ``ARM_sft`` after SFT
(measured while DPO trains on from it), then ``ARM``. The registry is data, so adding a round is
an edit of the TOML file, not of the code that ships it."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from optimizers.selftrain.matrix import Arm, Matrix
from optimizers.selftrain.recipe import HELD_OUT_SEEDS, Recipe, SuitePlan
from optimizers.selftrain.stages import StageStore
from rlmkit.errors import UserError

REGISTRY = Path(__file__).with_name("rounds.toml")
CHECKOUT = Path(__file__).resolve().parents[2]  # the registry's paths are relative to it
TEST_SEEDS = 5000  # the sealed test's generator seeds start here; dev (the matrix) below


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FirstAdapter(_Frozen):
    """The adapter shipped before the rounds, known by its hash (its recipe predates the rounds)."""

    arm: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    trained_families: tuple[str, ...]


class Round(_Frozen):
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="its work folder: .selftrain/NAME")
    recipe: str = Field(description="the recipe file, relative to the checkout")
    archive: str = Field(description="the folder its finished stages are packed in")
    arm: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="its final adapter's arm")
    base: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="the base arm run beside its arms")

    @property
    def arms(self) -> dict[str, str]:
        """Each adapter arm and the recipe stage that makes its adapter, in the order they are made."""
        return {f"{self.arm}_sft": "adapter-sft", self.arm: "adapter"}

    def store(self, root: Path = CHECKOUT, work: Path | None = None) -> StageStore:
        return StageStore((work or root / ".selftrain") / self.name, root / self.archive)

    def recipe_record(self, root: Path = CHECKOUT) -> Recipe:
        """The recipe as its archive recorded it when its first stage ran."""
        return Recipe.model_validate(json.loads((root / self.archive / "recipe.json").read_text()))


class MatrixPlan(_Frozen):
    seed: int = Field(HELD_OUT_SEEDS, ge=HELD_OUT_SEEDS, lt=TEST_SEEDS)
    max_seconds: float = Field(gt=0, description="the fault guard on each run's wall time")
    suites: tuple[SuitePlan, ...] = Field(min_length=1)


class SealedTestPlan(_Frozen):
    """What ``rlmkit self-train read-test`` runs: each suite on the base and the candidate,
    interleaved example by example, bounded by turns and tokens; wall time is a fault guard."""

    seed: int = Field(TEST_SEEDS, ge=TEST_SEEDS)
    iterations: int = Field(6, ge=1, description="root turns per run")
    max_tokens: int = Field(200_000, ge=1, description="tokens per run")
    max_seconds: float = Field(2400, gt=0, description="the fault guard on a run's wall time")
    suites: tuple[SuitePlan, ...] = Field(min_length=1)


class Registry(_Frozen):
    results: str = Field(description="the matrix's results file, relative to the checkout")
    matrix: MatrixPlan
    first_arms: tuple[Arm, ...] = Field(min_length=2, description="the base first, then the prompt arm")
    first_adapter: FirstAdapter
    rounds: tuple[Round, ...] = ()
    test: SealedTestPlan

    @model_validator(mode="after")
    def _arms_named_once(self) -> Registry:
        names = [arm.name for arm in self.first_arms] + [self.first_adapter.arm]
        names += [name for where in self.rounds for name in (*where.arms, where.base)]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"arms named twice in the registry: {', '.join(twice)}")
        return self

    def round_of(self, arm: str) -> Round:
        for where in self.rounds:
            if arm in where.arms:
                return where
        known = ", ".join(name for where in self.rounds for name in where.arms)
        raise UserError(f"no round makes an adapter arm {arm!r}; the rounds' arms are {known}")

    def made_arms(self, where: Round, root: Path = CHECKOUT, work: Path | None = None) -> dict[str, Path]:
        """The round's adapter arms whose stage has finished, and each one's GGUF file."""
        store = where.store(root, work)
        return {
            arm: store.output(stage) / "adapter.gguf"
            for arm, stage in where.arms.items()
            if store.record(stage)
        }

    def candidates(self, root: Path = CHECKOUT, work: Path | None = None) -> dict[str, tuple[str, ...]]:
        """Each adapter arm the gate judges, and the families it was trained on."""
        from optimizers.selftrain import earlier_round

        judged = {self.first_adapter.arm: self.first_adapter.trained_families}
        for where in self.rounds:
            made = self.made_arms(where, root, work)
            if made:
                recipe = where.recipe_record(root)
                # a recipe names its earlier rounds' archives relative to the checkout
                here = recipe.model_copy(update={"runs_from": tuple(str(root / s) for s in recipe.runs_from)})
                trained = tuple(earlier_round.trained_families(here))
                judged |= dict.fromkeys(made, trained)
        return judged

    def matrix_plan(self, shipped_gguf: Path, root: Path = CHECKOUT, work: Path | None = None) -> Matrix:
        """The matrix's arms as they grew: the first ones, the first adapter (``shipped_gguf``), then
        each round's made arms with its base run again after its first."""
        arms = [*self.first_arms, Arm(name=self.first_adapter.arm, adapter=str(shipped_gguf))]
        for where in self.rounds:
            later = [
                Arm(name=arm, adapter=str(gguf)) for arm, gguf in self.made_arms(where, root, work).items()
            ]
            if later:  # after its first adapter arm, the order the folder first met them in: arms only grow
                later.insert(1, Arm(name=where.base))
            arms += later
        return Matrix(
            suites=self.matrix.suites,
            arms=tuple(arms),
            seed=self.matrix.seed,
            max_seconds=self.matrix.max_seconds,
        )

    def first_arm(self, name: str) -> bool:
        """Whether ``name`` is one of the arms the matrix was first measured with."""
        later = {name for where in self.rounds for name in (*where.arms, where.base)}
        return name not in later


def read_registry(path: Path = REGISTRY) -> Registry:
    """The registry, or a ``UserError`` naming its first fault (before any model starts)."""
    try:
        return Registry.model_validate(tomllib.loads(path.read_text()))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"cannot read the rounds registry {path}: {exc}") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise UserError(f"{path}: {where}: {error['msg'].removeprefix('Value error, ')}") from None
