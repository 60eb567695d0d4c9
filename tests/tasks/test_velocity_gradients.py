"""The velocity task's gradients against float64 central differences: w.r.t. the actions through a reset and with the
tracking reference, w.r.t. the randomised quantities (the adversary's direction); the relative gradient clip."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .finite_differences import (
    one_step_reward_gradients,
    only_reward_terms,
    three_steps_through_a_reset_match_finite_differences,
)
from .velocity_envs import adversarial_env, exact_env, make_env, return_through


def test_env_step_gradients_match_finite_differences_through_a_reset():
    """Float64 central differences of rewards and observations over 3 policy steps w.r.t. the actions, with env 0
    timing out (and resetting) after the second step. Heading control is off: the command is exogenous (no
    gradient flows through the heading feedback, on purpose: the policy must not learn to move its command), so
    a heading-controlled command would make the finite differences see a dependence the gradient rightly lacks."""
    env = make_env(num_envs=3, heading=False)
    env.cfg.grad_clip_relative = None  # the exact gradient
    r = env.cfg.rewards  # the gait terms on (0 by default), the joint-speed hinge active at these speeds
    r.foot_slip, r.excess_joint_vel, r.excess_joint_vel_ratio = -1.0, -0.1, 0.05
    r.swing_contact_force = -4.0  # the gait-clock tasks' term: through the contact forces and the reference
    state, actions = three_steps_through_a_reset_match_finite_differences(env, seed=0)
    # env 0 reset after step 1: its last step's observations do not depend on its first actions
    env.load_state_dict(state)
    a0 = actions[0].detach().clone().requires_grad_(True)
    env.step(a0)
    env.step(actions[1].detach())
    obs, _, dones, _ = env.step(actions[2].detach())
    (g,) = torch.autograd.grad(obs["policy"][0].sum(), a0, allow_unused=True)
    assert g is None or g[0].abs().max() == 0


def test_env_step_gradients_match_finite_differences_with_the_tracking_reference():
    """As above with ``tracking_reference_accel`` on (no curriculum: from the start): the tracking rewards follow a
    reference that moves during the three steps and restarts at the reset env's velocity, both exogenous (no
    gradient), so the finite differences and the gradient agree through them."""
    env = exact_env(3)
    env.cfg.commands.tracking_reference_accel = (1.0, 1.0)  # the command generator's own cfg (the same object)
    env.commands.reference = env.commands.command + torch.tensor([[0.6, -0.4, 0.5]])  # 0.6 s from the command
    three_steps_through_a_reset_match_finite_differences(env, seed=1)
    moved = env.commands.reference - env.commands.command
    assert float(moved[1:].abs().max()) > 0.1  # the reference still on its way (not the command) for envs 1 and 2


def test_return_gradients_wrt_the_randomised_quantities_match_finite_differences():
    """The adversary's direction: float64 central differences of the return of 3 policy steps (robots on the
    ground, random actions) w.r.t. friction, base mass scale, centre-of-mass offset and PD-gain scales, against
    the gradient the leaves of ``detach_state`` receive."""
    env = adversarial_env(2)
    state = env.state_dict()
    draws = {k: v.clone() for k, v in env._draws.items()}
    rng = np.random.default_rng(2)
    actions = [torch.tensor(rng.uniform(-0.5, 0.5, (2, 12))) for _ in range(3)]

    def total(values):
        env.load_state_dict(state)
        env.params = env._params_of(values)
        return return_through(env, actions)

    # the quantities the adversary moves (the ground's kind, the soft grounds, takes no gradient)
    leaves = {k: v.clone().requires_grad_(True) for k, v in draws.items() if k != "soft_ground_stiffness"}
    grads = dict(zip(leaves, torch.autograd.grad(total({**draws, **leaves}), list(leaves.values()))))
    eps, checked = 1e-6, 0
    with torch.no_grad():
        for name, index in [("friction", (0,)), ("base_mass_scale", (1,)), ("base_com", (0, 0)), ("base_com", (1, 2)),
                            ("stiffness_scale", (0, 0)), ("damping_scale", (1, 0)), ("friction", (1,))]:
            plus = {k: v.clone() for k, v in draws.items()}
            plus[name][index] += eps
            minus = {k: v.clone() for k, v in draws.items()}
            minus[name][index] -= eps
            fd = (total(plus).item() - total(minus).item()) / (2 * eps)
            g = grads[name][index].item()
            assert abs(g - fd) <= 1e-5 * max(1.0, abs(fd)), (name, index, g, fd)
            checked += abs(fd) > 1e-6
    assert checked >= 5


def test_relative_gradient_clip_bounds_outlier_envs_only():
    """The relative clip scales a row above ``k`` times the batch's median row norm down to that bound, leaves the
    rows below it (and zero rows, which do not count towards the median) untouched."""
    from diffloco_ext.tasks.locomotion_env import _row_norm_clip

    grad = torch.zeros(6, 4, dtype=torch.float64)
    grad[0, 0], grad[1, 1], grad[2, 2], grad[3, 3], grad[4, 0] = 1.0, 2.0, 3.0, 1e6, 2.5  # row 5: zero
    clipped = _row_norm_clip(2.0)(grad.clone())
    median = 2.5  # of the non-zero rows 1, 2, 3, 2.5, 1e6
    assert torch.allclose(clipped[:3], grad[:3]) and torch.allclose(clipped[4:], grad[4:])
    assert torch.isclose(clipped[3].norm(), torch.tensor(2.0 * median, dtype=torch.float64))
    assert torch.allclose(clipped[3] / clipped[3].norm(), grad[3] / grad[3].norm())  # direction kept
    # in an env rollout: on by default, and it changes the gradient only where a row is an outlier
    env = make_env(num_envs=4, heading=False)
    assert env.cfg.grad_clip_relative is not None


@pytest.mark.parametrize("term", ["swing_contact_force", "paired_contact_force"])
def test_contact_force_terms_gradient_through_the_contact_forces_matches_finite_differences(term):
    """The gait-clock tasks' swing-force term, and the bound's paired-force term (here on the trot's diagonal pairs),
    alone (every other weight 0), robots standing on the ground with the reference lifting their feet (mid-episode,
    commanded to walk): float64 central differences of one step's reward w.r.t. the actions against the gradient
    through the smoothed contact forces."""
    env = make_env(num_envs=2, heading=False, randomize=False)
    env.cfg.grad_clip_relative = None
    for _ in range(30):  # settle onto the feet
        env.step(torch.zeros(2, 12, dtype=torch.float64))
    only_reward_terms(env, {term: 1.0})
    env.commands.command[:] = torch.tensor([0.6, 0.0, 0.0])
    env.episode_length_buf[:] = torch.tensor([7, 22])  # phases with a foot pair in swing
    base = torch.tensor(np.random.default_rng(4).uniform(-0.2, 0.2, (2, 12)))
    value, grad, fd = one_step_reward_gradients(env, base)
    assert (value > 1e-4).all()  # feet loaded while the reference lifts them / unequally in a pair (the raw term)
    torch.testing.assert_close(grad, fd, rtol=1e-4, atol=1e-7)
