"""``final_reasoning``: what dspy.RLM's prediction says about the step that ended the run.

(The list-of-steps view itself is the trajectory's own: ``Trajectory.steps()``, ``len``, ``[i]``.)
"""

from __future__ import annotations

from rlmkit.trajectory import Trajectory


def final_reasoning(trajectory: Trajectory) -> str:
    """The reasoning of the last step (the one that submitted), or "" for a run with no turn."""
    steps = trajectory.steps()
    return steps[-1]["reasoning"] if steps else ""
