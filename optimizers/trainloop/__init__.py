"""Train-in-the-loop: job writers propose training jobs; reward = measured improvement."""

from optimizers.trainloop.executors import LocalExecutor, Outcome, RayExecutor, run_job
from optimizers.trainloop.job_proposers import LMProposer, OptunaProposer, Proposer, WriteTrainJob
from optimizers.trainloop.jobs import JobRecord, JobSpace, ProposedJob
from optimizers.trainloop.train_tuner import BuiltDataset, ModelRef, TrainLoopReport, TrainTuner

__all__ = [
    "BuiltDataset",
    "JobRecord",
    "JobSpace",
    "LMProposer",
    "LocalExecutor",
    "ModelRef",
    "OptunaProposer",
    "Outcome",
    "ProposedJob",
    "Proposer",
    "RayExecutor",
    "TrainLoopReport",
    "TrainTuner",
    "WriteTrainJob",
    "run_job",
]
