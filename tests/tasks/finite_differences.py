"""Float64 central-difference checks of an env's step gradient w.r.t. its actions, shared by the task tests.

The loss of :func:`loss_through_steps` sums the rewards and a small multiple of the observations (those returned
and the final observations of envs that reset), so one scalar covers both outputs of the step."""

from __future__ import annotations

import numpy as np
import torch


def loss_through_steps(env, state, actions) -> torch.Tensor:
    """Load ``state`` into ``env``, step it with each of ``actions`` ([N, n] each), return the summed rewards plus
    0.01 x the summed policy observations and final observations."""
    env.load_state_dict(state)
    total = 0.0
    for a in actions:
        obs, reward, dones, extras = env.step(a)
        total = (total + reward.sum() + (obs["policy"] * 0.01).sum()
                 + (extras["final_observations"]["policy"] * 0.01).sum())
    return total


def check_action_gradients(env, state, actions, grads, entries) -> int:
    """Float64 central differences (eps 1e-6) of :func:`loss_through_steps` w.r.t. the action entries ``(step, env,
    joint)`` against ``grads``; returns how many had a non-negligible derivative."""
    eps, checked = 1e-6, 0
    with torch.no_grad():
        for t, env_i, j in entries:
            a = [x.detach().clone() for x in actions]
            a[t][env_i, j] += eps
            plus = loss_through_steps(env, state, a).item()
            a[t][env_i, j] -= 2 * eps
            minus = loss_through_steps(env, state, a).item()
            fd = (plus - minus) / (2 * eps)
            g = grads[t][env_i, j].item()
            assert abs(g - fd) <= 1e-5 * max(1.0, abs(fd)), (t, env_i, j, g, fd)
            checked += abs(fd) > 1e-6
    return checked


def three_steps_through_a_reset_match_finite_differences(env, seed: int):
    """Env 0 (of at least 3, 12 actions) set to time out after the second of three policy steps from the env's state
    now; the gradient of :func:`loss_through_steps` w.r.t. six action entries against float64 central differences.
    Returns the start state and the actions."""
    env.episode_length_buf[0] = env.max_episode_length - 2
    state = env.state_dict()
    rng = np.random.default_rng(seed)
    actions = [torch.tensor(rng.uniform(-0.3, 0.3, (env.num_envs, 12))).requires_grad_(True) for _ in range(3)]
    grads = torch.autograd.grad(loss_through_steps(env, state, actions), actions)
    entries = [(0, 0, 4), (1, 0, 7), (2, 0, 1), (0, 1, 5), (2, 2, 11), (1, 2, 0)]
    assert check_action_gradients(env, state, actions, grads, entries) >= 4
    return state, actions


def only_reward_terms(env, weights: dict[str, float]) -> None:
    """Set every reward weight of a velocity env to 0 but ``weights`` (no curriculum-dependent weights)."""
    from diffloco_ext.tasks.velocity.env import REWARD_TERMS

    r = env.cfg.rewards
    for name in REWARD_TERMS:
        setattr(r, name, float(weights.get(name, 0.0)))
    r.after_curriculum, r.weights_curriculum_end, r.weights_after_curriculum = (), {}, {}


def one_step_reward_gradients(env, base: torch.Tensor, command=(0.6, 0.0, 0.0), eps: float = 1e-6):
    """From ``env``'s current state (detached, commanded ``command``): one step's per-env reward [N], its gradient
    w.r.t. the actions ``base`` [N, n] by backpropagation, and float64 central differences of it (each env's reward
    w.r.t. its own actions). Returns ``(reward, grad, fd)``."""
    env.detach_state()
    state = env.state_dict()

    def reward(actions):
        env.load_state_dict(state)
        env.commands.command[:] = torch.tensor(command)
        return env.step(actions)[1]

    a = base.clone().requires_grad_(True)
    value = reward(a)
    (grad,) = torch.autograd.grad(value.sum(), a)
    fd = torch.zeros_like(base)
    with torch.no_grad():
        for e in range(base.shape[0]):
            for j in range(base.shape[1]):
                hi, lo = base.clone(), base.clone()
                hi[e, j] += eps
                lo[e, j] -= eps
                fd[e, j] = (reward(hi)[e] - reward(lo)[e]) / (2 * eps)
    return value.detach(), grad, fd
