"""The differentiable vectorised-environment protocol that the tasks implement and SHAC trains on.

:class:`DiffVecEnv` extends rsl_rl's :class:`rsl_rl.env.VecEnv`, so every differentiable environment is also a
plain rsl_rl environment (PPO can run on it unchanged, inside ``torch.inference_mode``). On top of rsl_rl's
contract a differentiable environment promises:

1. **Gradients to the actions.** When ``torch.is_grad_enabled()``, the observations and rewards returned by
   :meth:`step` are differentiable functions of the actions passed to this and all earlier :meth:`step` calls since
   the last :meth:`detach_state`. With gradients disabled (or in inference mode) :meth:`step` behaves like any
   rsl_rl env.
2. **Cutting the graph between horizons.** :meth:`detach_state` detaches the simulator state in place from the
   autograd graph (values unchanged), so the next horizon's backward pass stops there. SHAC calls it once at the
   start of every horizon; within a horizon the graph is kept.
3. **Resets cut the chain.** An environment that is reset inside :meth:`step` starts from a state that does not
   depend on earlier actions (fresh tensors), so its returned observation carries no gradient to the past.
4. **Terminations vs time-outs**, as rsl_rl expects: ``dones`` (shape ``(num_envs,)``) is 1 for every env that
   was reset in this step, ``extras["time_outs"]`` (bool, ``(num_envs,)``) marks the subset that ended because of
   the episode-length limit (they are bootstrapped); ``dones & ~time_outs`` are true terminations (value 0).
5. **The observation before the reset.** ``extras["final_observations"]`` is a TensorDict with the same groups
   and shapes as the observations; for envs with ``dones == 1`` it holds the observation of the state reached
   *before* the automatic reset (differentiable like the observations), for the other envs it may hold anything
   finite (the runner only reads the done rows). SHAC bootstraps time-outs with the critic's value of it.

Optional: ``state_dict() -> dict`` and ``load_state_dict(dict)`` capturing the full simulation state including
the env's random-number generator. When present, the SHAC runner stores the env state in its checkpoints so that
a resumed run continues exactly like an uninterrupted one. Optional too: ``load_schedule_state(dict)``, taking from
such a state, saved with another env count, only the training schedule (e.g. a curriculum's clock), for a run
resumed with more or fewer envs.

Shapes: ``N = num_envs``, ``A = num_actions``; actions ``(N, A)``, rewards ``(N,)`` (float), dones ``(N,)``.
"""

from __future__ import annotations

from abc import abstractmethod

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

#: Key of the pre-reset observations in ``extras``.
FINAL_OBS_KEY = "final_observations"
#: Key of the time-out flags in ``extras`` (rsl_rl's name).
TIME_OUTS_KEY = "time_outs"


class DiffVecEnv(VecEnv):
    """A vectorised environment whose :meth:`step` is differentiable (see the module docstring for the contract)."""

    @abstractmethod
    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Advance all envs by one control step, resetting the ones that finish.

        Args:
            actions: ``(N, A)`` actions; gradients flow back into them when grad mode is on.

        Returns:
            ``(observations, rewards (N,), dones (N,), extras)``; ``extras`` holds at least
            ``"time_outs"`` (bool ``(N,)``) and ``"final_observations"`` (TensorDict, batch ``(N,)``).
        """
        raise NotImplementedError

    @abstractmethod
    def detach_state(self) -> None:
        """Detach the simulation state from the autograd graph in place (values unchanged)."""
        raise NotImplementedError


def is_differentiable_env(env: object) -> bool:
    """Whether ``env`` implements the differentiable protocol (a :class:`DiffVecEnv` or a duck-typed equivalent)."""
    return isinstance(env, DiffVecEnv) or (
        callable(getattr(env, "step", None))
        and callable(getattr(env, "detach_state", None))
        and callable(getattr(env, "get_observations", None))
    )


def split_dones(dones: torch.Tensor, extras: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Split ``dones`` into ``(terminated, timed_out)`` boolean tensors of shape ``(N,)``.

    A missing ``extras["time_outs"]`` means every done is a termination (rsl_rl's convention).
    """
    done = dones.to(torch.bool)
    time_outs = extras.get(TIME_OUTS_KEY)
    if time_outs is None:
        timed_out = torch.zeros_like(done)
    else:
        timed_out = time_outs.to(device=done.device, dtype=torch.bool).reshape(done.shape) & done
    return done & ~timed_out, timed_out
