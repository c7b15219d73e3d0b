"""The demo agent: a fixed random backward map, a linear tracking policy and a linear value.

All three are tiny on purpose (the demo is about the buffers), but the learning is real:

- :class:`BackwardMap` encodes the next ``horizon`` frames of a motion into ``z``, a random
  projection to fewer dimensions than the window has. It is fixed, like a pretrained
  BFM-Zero backward network.
- :class:`TrackingPolicy` maps ``(z, state)`` to an action (a state increment). It is fit by
  gradient steps on expert windows drawn from the expert buffer, so it decodes best the
  windows it sees most: the ones the curriculum's priorities favour.
- :class:`ValueFunction` predicts the return of tracking from the tracking error and ``z``;
  it is fit by TD on the online buffer with TD-EMA weights.

Each learner's ``state_dict`` is its weights as lists (``run.json``'s ``agent``, which the
dashboard reads); ``train_state_dict`` adds its optimizer's moments and step size schedule, as
tensors and plain data (the loop state a resumed run continues from), and
``load_train_state_dict`` takes that back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from bufcore.errors import StateError


class BackwardMap:
    """``z = window @ matrix``: a fixed random projection of ``horizon`` future frames.

    Args:
        dim: State dimension of a frame.
        horizon: Frames per window.
        z_dim: Length of ``z`` (below ``horizon * dim``, so some of the window is lost).
        generator: Draws the projection.
    """

    def __init__(self, dim: int, horizon: int, z_dim: int, generator: torch.Generator) -> None:
        self.horizon = horizon
        scale = (horizon * dim) ** -0.5
        self.matrix = torch.randn(horizon * dim, z_dim, generator=generator) * scale

    def __call__(self, windows: torch.Tensor) -> torch.Tensor:
        """``[n, horizon, dim]`` frames -> ``[n, z_dim]``."""
        return torch.mm(windows.reshape(windows.shape[0], -1), self.matrix)


def _features(z: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    return torch.cat([z, state, torch.ones_like(state[:, :1])], dim=1)


class TrackingPolicy:
    """``action = [z, state, 1] @ weight``, trained to reach the window's next frame.

    Args:
        dim: State dimension.
        z_dim: Length of ``z``.
        lr: Adam step size.
        state_noise: Standard deviation of the noise added to expert states in training, so
            the policy learns to correct deviations (it sees only perfect states otherwise).
        generator: Draws the training noise.
    """

    def __init__(
        self, dim: int, z_dim: int, *, lr: float, state_noise: float, generator: torch.Generator
    ) -> None:
        self.weight = torch.zeros(z_dim + dim + 1, dim, requires_grad=True)
        self.state_noise = state_noise
        self._generator = generator
        self._optimizer = torch.optim.Adam([self.weight], lr=lr)
        # Step size ~ 1/sqrt(step): fast at first, then settling instead of jittering.
        self._schedule = torch.optim.lr_scheduler.LambdaLR(
            self._optimizer, lambda step: (1 + step / 25) ** -0.5
        )

    @torch.no_grad()
    def act(self, z: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``[n, dim]`` actions (state increments) for ``[n, z_dim]`` z and ``[n, dim]`` states."""
        return _features(z, state) @ self.weight

    def train_step(self, z: torch.Tensor, state: torch.Tensor, target: torch.Tensor) -> float:
        """One Adam step on ``|act(z, state + noise) - (target - state - noise)|^2``.

        Returns:
            The mean squared error before the step.
        """
        noisy = state + self.state_noise * torch.randn(
            state.shape, generator=self._generator, dtype=state.dtype
        )
        error = _features(z, noisy) @ self.weight - (target - noisy)
        loss = error.pow(2).sum(dim=1).mean()
        self._optimizer.zero_grad()
        torch.autograd.backward(loss)
        self._optimizer.step()
        self._schedule.step()
        return float(loss.detach())

    def state_dict(self) -> dict[str, list[list[float]]]:
        """The weights as nested lists (for ``run.json``)."""
        return {"weight": self.weight.detach().tolist()}

    def train_state_dict(self) -> dict[str, Any]:
        """Weights, Adam's moments and the step size schedule (tensors and plain data)."""
        return {**_train_state(self.weight, self._optimizer),
                "schedule": self._schedule.state_dict()}

    def load_train_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a :meth:`train_state_dict`.

        Raises:
            StateError: a part is missing or does not fit these weights.
        """
        schedule = state.get("schedule")
        if not isinstance(schedule, Mapping) or "last_epoch" not in schedule:
            raise StateError("state", "policy: the step size schedule is missing")
        _load_train_state(self.weight, self._optimizer, state, "policy")
        self._schedule.load_state_dict(dict(schedule))


class ValueFunction:
    """``V = [error, error^2, z, 1] @ weight`` where ``error = state - target``.

    Args:
        dim: State dimension.
        z_dim: Length of ``z``.
        lr: Adam step size.
    """

    def __init__(self, dim: int, z_dim: int, *, lr: float) -> None:
        self.weight = torch.zeros(2 * dim + z_dim + 1, requires_grad=True)
        self._optimizer = torch.optim.Adam([self.weight], lr=lr)

    def __call__(self, state: torch.Tensor, target: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """``[n]`` values of ``[n, dim]`` states tracking ``[n, dim]`` targets with ``z``."""
        error = state - target
        features = torch.cat([error, error.pow(2), z, torch.ones_like(error[..., :1])], dim=-1)
        return features @ self.weight

    def step(self, loss: torch.Tensor) -> None:
        """One Adam step on ``loss`` (a scalar built from :meth:`__call__`)."""
        self._optimizer.zero_grad()
        torch.autograd.backward(loss)
        self._optimizer.step()

    def state_dict(self) -> dict[str, list[float]]:
        """The weights as a list (for ``run.json``)."""
        return {"weight": self.weight.detach().tolist()}

    def train_state_dict(self) -> dict[str, Any]:
        """Weights and Adam's moments (tensors and plain data)."""
        return _train_state(self.weight, self._optimizer)

    def load_train_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a :meth:`train_state_dict`.

        Raises:
            StateError: a part is missing or does not fit these weights.
        """
        _load_train_state(self.weight, self._optimizer, state, "value")


def _train_state(weight: torch.Tensor, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    saved = optimizer.state_dict()
    # Copies: torch's state_dict holds the live moments, which the next step changes in place.
    # JSON keys are strings; load turns them back into the parameter indices torch uses.
    moments = {str(k): {name: v.clone() if isinstance(v, torch.Tensor) else v
                        for name, v in entry.items()} for k, entry in saved["state"].items()}
    return {"weight": weight.detach().clone(),
            "optimizer": {"state": moments, "param_groups": saved["param_groups"]}}


def _load_train_state(
    weight: torch.Tensor, optimizer: torch.optim.Optimizer, state: Mapping[str, Any], name: str
) -> None:
    saved, optimizer_state = state.get("weight"), state.get("optimizer")
    if not isinstance(saved, torch.Tensor) or saved.shape != weight.shape:
        raise StateError("state", f"{name}: expected a weight of shape {tuple(weight.shape)}, "
                                  f"got {saved!r:.80}")
    if not isinstance(optimizer_state, Mapping) or not isinstance(
        optimizer_state.get("param_groups"), list
    ) or not isinstance(optimizer_state.get("state"), Mapping):
        raise StateError("state", f"{name}: the optimizer's state is missing")
    groups = [{**group, "betas": tuple(group.get("betas", ()))}
              for group in optimizer_state["param_groups"]]
    moments = {int(k): dict(v) for k, v in optimizer_state["state"].items()}
    with torch.no_grad():
        weight.copy_(saved)
    try:
        optimizer.load_state_dict({"state": moments, "param_groups": groups})
    except (ValueError, KeyError, TypeError) as err:
        raise StateError("state", f"{name}: the optimizer's state does not fit ({err})") from err
