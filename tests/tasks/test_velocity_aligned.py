"""The velocity task on the aligned step (Song et al.: MuJoCo forward, a surrogate backward): same interface, its
values MuJoCo's, resets cut the gradient chain, MuJoCo's divergence reset and counted, bad combinations refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.sim.mujoco_engine import MujocoEngine
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.velocity.env import VelocityEnv

from .velocity_envs import make_env

ALIGNED = dict(engine="mujoco", engine_threads=1)


@pytest.mark.parametrize("surrogate", ["simplified", "smoothed"])
def test_interface_and_values_are_mujocos(surrogate):
    env = make_env(3, dtype="float32", surrogate=surrogate, **ALIGNED)
    warp = make_env(3, dtype="float32")
    obs = env.get_observations()
    assert {k: (v.shape, v.dtype) for k, v in obs.items()} == {k: (v.shape, v.dtype)
                                                                for k, v in warp.get_observations().items()}
    assert env.dtype == torch.float64 and env.output_dtype == torch.float32
    actions = 0.3 * torch.randn(3, 12, generator=torch.Generator().manual_seed(0))
    q, u = env.q.clone(), env.u.clone()
    policy_actions = actions.clone().requires_grad_(True)
    obs, reward, dones, _ = env.step(policy_actions)
    # MuJoCo's models carry the env's randomised parameters: base mass and inertia scaled, com moved, gains
    mujoco_models = env.bridge.engine.models
    scale = (env.params["body_mass"][:, 0] / env.nominal["body_mass"][:, 0]).numpy()
    base = env.bridge.engine.base_body
    for e, m in enumerate(mujoco_models):
        assert m.body_mass[base] == pytest.approx(env.robot.bodies[0].mass * scale[e], rel=1e-12)
        assert m.body_inertia[base] == pytest.approx(env.bridge.engine.base_inertia * scale[e], rel=1e-12)
        floor = env.bridge.engine._friction_geoms[0]
        assert m.geom_friction[floor, 0] == pytest.approx(float(env.params["friction"][e]))
    engine = MujocoEngine(env.robot, 3, threads=1)
    engine.set_parameters(**env.bridge._engine_params)
    plain = engine.step(q.numpy(), u.numpy(), env.joint_targets(actions.double()).numpy())
    assert not dones.any()
    assert np.array_equal(env.q.detach().numpy(), plain.q) and np.array_equal(env.u.detach().numpy(), plain.u)
    assert reward.dtype == torch.float32 and obs["policy"].dtype == torch.float32
    reward.sum().backward()
    assert policy_actions.grad is not None and policy_actions.grad.abs().sum() > 0


def test_a_reset_cuts_the_gradient_chain():
    env = make_env(2, surrogate="simplified", **ALIGNED)
    a = torch.zeros(2, 12, dtype=torch.float64, requires_grad=True)
    env.step(a)
    env._reset_envs(torch.tensor([True, False]))
    _, reward, _, _ = env.step(torch.zeros(2, 12, dtype=torch.float64))
    (grad,) = torch.autograd.grad(env.q[:, 2].sum() + reward.sum(), a)
    assert grad[0].abs().sum() == 0 and grad[1].abs().sum() > 0


def test_a_mujoco_divergence_is_reset_and_counted():
    env = make_env(3, **ALIGNED)
    env.u = env.u.clone()
    env.u[0, 6] = 5.0e3  # beyond the speed guard
    env.u[1, 7] = float("nan")
    with torch.no_grad():
        obs, reward, dones, extras = env.step(torch.zeros(3, 12, dtype=torch.float64))
    assert dones.tolist() == [1, 1, 0]
    assert extras["log"]["Episode_Termination/diverged"] == 2.0
    assert torch.isfinite(obs["policy"]).all() and torch.isfinite(reward).all()
    assert torch.isfinite(env.q).all() and torch.isfinite(env.u).all()


def test_the_registered_variant_and_bad_combinations():
    cfg = registry.load_cfg("DiffLoco-Velocity-Flat-AnymalD-Aligned")
    assert (cfg.sim.engine, cfg.sim.surrogate) == ("mujoco", "smoothed")
    assert registry.load_play_cfg("DiffLoco-Velocity-Flat-AnymalD-Aligned").sim.engine == "mujoco"
    recipe = registry.load_cfg("DiffLoco-Velocity-Flat-AnymalD")
    recipe.num_envs, recipe.sim.engine = 2, "mujoco"
    with pytest.raises(ValueError, match="adversarial_fraction=0.25 needs the differentiable simulator"):
        VelocityEnv(recipe)
    cfg.num_envs = 2
    cfg.sim.contact.mode = "hard"
    with pytest.raises(ValueError, match="smoothed contact"):
        VelocityEnv(cfg)
