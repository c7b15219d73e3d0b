"""The arithmetic of prioritized replay, shared by the sampler and the summaries of its state.

A row of stored priority ``p`` weighs ``w = p ** alpha`` in the trees (:func:`tree_weights`);
a row drawn with weight ``w`` gets the importance weight ``(w / w_min) ** -beta``
(:func:`importance`), ``w_min`` being the smallest positive weight held.

Figures for a run's log or a checkpoint's summary
(:meth:`~bufcore.sampling.prioritized.PrioritizedSampler.stats`, :func:`priority_quantiles`,
:func:`importance_quantiles`) use the key names of the DI-engine
buffers' monitor (``beta``, ``max_priority``, ``priority_min`` ... ``priority_max``), plus
``is_weight_min``, ``is_weight_median`` and ``is_weight_max``: the importance weights the held
rows would get, each drawn on its own, at the current ``beta`` (rows of weight 0 are never drawn
and left out). Under the ``"max"`` reduction a window comes with the weight of its heaviest
row, so the weights windows get lie in that range too. The same functions serve the sampler's
``stats`` (live),
a checkpoint's summary (its saved priorities and options) and the DI-engine buffers' monitor, so
every view computes these figures one way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bufcore.checks import check_real

# The priority quantiles a replay record reports, as (key, q): DI-engine's monitor keys.
PRIORITY_QUANTILES = (("priority_min", 0.0), ("priority_q25", 0.25), ("priority_median", 0.5),
                      ("priority_q75", 0.75), ("priority_max", 1.0))
# The importance-weight quantiles a replay record reports, as (key, q).
IS_WEIGHT_QUANTILES = (("is_weight_min", 0.0), ("is_weight_median", 0.5),
                       ("is_weight_max", 1.0))


def tree_weights(priority: np.ndarray, alpha: float) -> np.ndarray:
    """The weights ``p ** alpha`` that stored priorities have in the trees (a priority of 0
    weighs 0, also at ``alpha`` 0)."""
    weights: np.ndarray = np.power(priority, alpha)
    if alpha == 0:
        weights = weights * (priority > 0)
    return weights


def importance(
    weights: np.ndarray, minimum: float, beta: float, *, dtype: type = np.float64
) -> np.ndarray:
    """Importance weights ``(w / minimum) ** -beta`` of tree weights ``w``, computed in float64
    and rounded once into ``dtype`` (as ``astype`` would)."""
    out: np.ndarray = np.empty(np.shape(weights), dtype=dtype)
    np.power(weights / minimum, -beta, out=out, casting="same_kind")
    return out


def priority_quantiles(priorities: Any) -> dict[str, float | None]:
    """The quantiles of :data:`PRIORITY_QUANTILES` of ``priorities`` (array-like, finite:
    unchecked; all None when there are none)."""
    values = np.asarray(priorities, dtype=np.float64).reshape(-1)
    if len(values) == 0:
        return {name: None for name, _ in PRIORITY_QUANTILES}
    found = np.quantile(values, [q for _, q in PRIORITY_QUANTILES])
    return {name: float(v) for (name, _), v in zip(PRIORITY_QUANTILES, found, strict=True)}


def importance_quantiles(priorities: Any, *, alpha: float, beta: float) -> dict[str, float | None]:
    """The quantiles of :data:`IS_WEIGHT_QUANTILES` of the importance weights that rows of
    these stored ``priorities`` (finite, non-negative: unchecked) get when drawn on their own:
    ``(w / w_min) ** -beta`` with ``w = p ** alpha`` and ``w_min`` the smallest positive
    weight, over the rows with a positive weight (all None when there are none). From a
    checkpoint: the sampler's saved priorities and options, and the ``beta`` its summary
    gives.

    Raises:
        TypeError: ``alpha`` or ``beta`` not a real number.
        ValueError: ``alpha`` negative or ``beta`` outside ``[0, 1]``.
    """
    alpha = check_real(alpha, "alpha", minimum=0.0)
    beta = check_real(beta, "beta", minimum=0.0, maximum=1.0)
    weights = tree_weights(np.asarray(priorities, dtype=np.float64).reshape(-1), alpha)
    weights = weights[weights > 0]
    if len(weights) == 0:
        return {name: None for name, _ in IS_WEIGHT_QUANTILES}
    found = np.quantile(importance(weights, float(weights.min()), beta),
                        [q for _, q in IS_WEIGHT_QUANTILES])
    return {name: float(v) for (name, _), v in zip(IS_WEIGHT_QUANTILES, found, strict=True)}
