"""Where a study stands across every worker: trials done, retries waiting, trials still running.

Several processes (on several machines) fit one study, so each counts the study's trials, not
its own. Optuna's heartbeats mark a dead worker's trial FAIL once it goes stale, and
RetryHeartbeatStaleTrialCallback (storage.py) enqueues its configuration as a WAITING trial.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any


@dataclass
class StudyProgress:
    done: int  # finished trials that count towards n_trials
    waiting: int  # enqueued retries of trials whose worker died
    running: int
    beating: int  # running trials that record heartbeats: each will finish or go stale


def study_progress(study: Any) -> StudyProgress:
    """Count the study's trials across every worker. A trial that went stale and was retried
    does not count (its retry does), so a crash never shortens the search."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    retried = {number for t in trials for number in t.system_attrs.get("retry_history", ())}
    finished = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return StudyProgress(
        done=sum(t.state in finished and t.number not in retried for t in trials),
        waiting=sum(t.state == TrialState.WAITING for t in trials),
        running=sum(t.state == TrialState.RUNNING for t in trials),
        beating=sum(t.state == TrialState.RUNNING and "heartbeat_s" in t.user_attrs for t in trials),
    )


def fail_stale_trials(study: Any) -> None:
    """Mark trials whose heartbeat went stale FAIL now (their retries are enqueued)."""
    import optuna

    with warnings.catch_warnings():  # 'experimental' in optuna's words
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def heartbeats_on(study: Any, heartbeat_s: int | None) -> bool:
    from optuna.storages._heartbeat import is_heartbeat_enabled

    return bool(heartbeat_s) and is_heartbeat_enabled(study._storage)
