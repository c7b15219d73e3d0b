"""The demo loop's own state: what its run checkpoint saves beyond buffers and ``run.json``,
and how a resumed loop takes everything back.

``run.json`` already holds the step, options, curriculum, TD-EMA, the z sources and the agent's
weights (the dashboard reads them). To continue exactly, a loop also needs what only it holds;
:func:`loop_state` gives that as one state (plain data and tensors) for ``loop/rank_0.hdf5``:

- ``generators``: the run's own (``motions``, ``backward``, ``policy``, ``envs``; the buffers
  keep theirs in their own checkpoints);
- ``envs``: every env's episode as it stands (motion, frame, state, exploring, held ``z``);
- ``sampling_prob``: the motion bank's weights (the curriculum's hook set them);
- ``policy``, ``value``: weights, Adam's moments, the policy's step size schedule;
- ``episodes``: episodes finished so far (the ``buffer`` records count them);
- ``replay_tally`` (``--prioritized``): the draws counted for the next ``replay`` record.

:func:`restore` pours a :class:`~bufcore.runs.resume.ResumedRun` into a loop built afresh, each
piece through its own ``load_state_dict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from bufcore.errors import MissingStateError, StateError
from bufcore.runs.resume import ResumedRun, generators_state

if TYPE_CHECKING:
    from bufcore.runs.demo.loop import _Loop

# The buffers a demo checkpoint holds and the run.json entries resuming reads.
BUFFER_NAMES = ("train", "expert", "z")
RUN_ENTRIES = ("options", "curriculum", "td_ema", "z_source")
# The loop state's entries (replay_tally only with --prioritized).
LOOP_ENTRIES = ("envs", "sampling_prob", "policy", "value", "episodes")


def loop_state(loop: _Loop) -> dict[str, Any]:
    """The loop's own state for its run checkpoint (see the module docstring)."""
    state: dict[str, Any] = {
        "generators": generators_state(loop.generators),
        "envs": loop.envs.state_dict(),
        "sampling_prob": loop.bank.sampling_prob.clone(),
        "policy": loop.policy.train_state_dict(),
        "value": loop.value.train_state_dict(),
        "episodes": loop.episodes,
    }
    if loop.tally is not None:
        state["replay_tally"] = loop.tally.state_dict()
    return state


def check_complete(resumed: ResumedRun, *, prioritized: bool, generators: tuple[str, ...]) -> None:
    """Refuse a checkpoint that lacks a piece the demo needs to continue.

    Raises:
        MissingStateError: a buffer, ``run.json`` entry, generator or loop-state entry is
            missing (all of them are named).
    """
    missing = [f"buffers/{name}" for name in BUFFER_NAMES if name not in resumed.buffers]
    missing += [f"run.json['{name}']" for name in RUN_ENTRIES if name not in resumed.state]
    missing += [f"loop generator {name!r}" for name in generators
                if name not in resumed.generators]
    entries = LOOP_ENTRIES + (("replay_tally",) if prioritized else ())
    missing += [f"loop[{name!r}]" for name in entries if name not in resumed.loop]
    if missing:
        raise MissingStateError(
            missing, f"{resumed.checkpoint}: lacks {', '.join(missing)}, which resuming the "
            "demo needs; it cannot continue exactly, so start a new run instead",
        )


def restore(loop: _Loop, resumed: ResumedRun) -> None:
    """Make a loop built afresh (around the resumed buffers) the one the checkpoint saved.

    Raises:
        StateError: a piece does not fit the loop (names it).
    """
    saved = resumed.loop
    curriculum = resumed.state["curriculum"]
    loop.curriculum.load_state_dict(curriculum)
    if resumed.td_ema is not None:
        loop.weighting.ema.load_state_dict(resumed.td_ema.state_dict())
    loop.z_sources.load_state(resumed.state["z_source"])
    for name, generator in loop.generators.items():
        generator.set_state(resumed.generators[name].get_state())
    loop.envs.load_state_dict(saved["envs"])
    prob = saved["sampling_prob"]
    if not isinstance(prob, torch.Tensor) or prob.shape != loop.bank.sampling_prob.shape:
        raise StateError("state", f"loop['sampling_prob']: expected {len(loop.bank.sampling_prob)} "
                                  f"motion weights, got {prob!r:.80}")
    loop.bank.sampling_prob = prob.to(loop.bank.sampling_prob.dtype)
    loop.policy.load_train_state_dict(saved["policy"])
    loop.value.load_train_state_dict(saved["value"])
    loop.episodes = int(saved["episodes"])
    if loop.tally is not None:
        loop.tally.load_state_dict(saved["replay_tally"])
    loop.saved_step = resumed.step
