"""The velocity task's randomisation: the ranges, the soft grounds, the ranges after the curriculum and their ramp,
the pushes, and the adversary that moves the draws against the learner."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from diffloco_ext.tasks.velocity.env import VelocityEnv

from .velocity_envs import adversarial_env, make_env, return_through, task_cfg


def test_randomisation_stays_in_its_ranges():
    env = make_env(num_envs=64, dtype="float32")
    r = env.cfg.randomization
    f = env.params["friction"]
    assert f.min() >= r.friction[0] and f.max() <= r.friction[1] and f.std() > 0.1
    scale = env.params["body_mass"][:, 0] / env.nominal["body_mass"][:, 0]
    assert scale.min() >= r.base_mass_scale[0] - 1e-6 and scale.max() <= r.base_mass_scale[1] + 1e-6
    torch.testing.assert_close(env.params["body_mass"][:, 1:], env.nominal["body_mass"][:, 1:])
    dcom = env.params["body_com"][:, 0] - env.nominal["body_com"][:, 0]
    assert dcom[:, :2].abs().max() <= r.base_com_xy + 1e-6 and dcom[:, 2].abs().max() <= r.base_com_z + 1e-6
    kp = env.params["joint_stiffness"] / env.nominal["joint_stiffness"]
    assert kp.min() >= r.stiffness_scale[0] - 1e-6 and kp.max() <= r.stiffness_scale[1] + 1e-6
    cmd = env.commands.command
    assert cmd[:, :2].abs().max() <= 1.0 and cmd[:, 2].abs().max() <= 1.0


def test_soft_grounds_put_that_share_of_the_envs_on_a_spring():
    """``randomization.soft_ground_fraction``: that share of the envs (drawn at each reset) stands on soft contact's
    spring with a stiffness from ``soft_ground_stiffness`` (log-uniform), the others on the training's smoothed
    contact; the soft envs stand lower the softer their spring; off by default; malformed values are errors."""
    cfg = task_cfg(64)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    r = cfg.randomization
    r.soft_ground_fraction, r.soft_ground_stiffness = 0.5, (1.0e4, 1.0e5)
    r.push_velocity_xy, r.base_com_xy, r.base_com_z = 0.0, 0.0, 0.0
    r.friction = r.base_mass_scale = r.stiffness_scale = r.damping_scale = (1.0, 1.0)
    cfg.reset.velocity, cfg.reset.joint_pos_scale, cfg.reset.position_xy = 0.0, (1.0, 1.0), 0.0
    env = VelocityEnv(cfg)
    k = env.params["contact_soft_stiffness"]
    soft = k > 0
    assert 20 <= int(soft.sum()) <= 44
    assert k[soft].min() >= 1.0e4 * (1 - 1e-6) and k[soft].max() <= 1.0e5 * (1 + 1e-6)
    with torch.no_grad():
        for _ in range(50):  # dropped from 0.65 m: standing after ~0.5 s
            env.step(torch.zeros(env.num_envs, 12))
    z = env.q[:, 2]
    assert float(torch.corrcoef(torch.stack((torch.log(k[soft]), z[soft])))[0, 1]) > 0.9  # stiffer: higher
    softest = z[soft][torch.argsort(k[soft])[:2]]
    assert float(softest.max()) < float(z[~soft].min()) - 0.001  # ~1e4 N/m sinks deeper than smoothed (3 mm)
    stiffest = z[soft][torch.argsort(k[soft])[-2:]]
    assert float(stiffest.min()) > float(z[~soft].max()) + 0.001  # ~1e5 N/m stands higher (2 mm)
    assert torch.equal(make_env(num_envs=4, dtype="float32").params["contact_soft_stiffness"], torch.zeros(4))
    for key, bad in [("soft_ground_fraction", 1.5), ("soft_ground_stiffness", (0.0, 1.0e4)),
                     ("soft_ground_stiffness", (2.0e4, 1.0e4))]:
        cfg = task_cfg(2)
        setattr(cfg.randomization.after_curriculum, key, bad)
        with pytest.raises(ValueError, match=key):
            VelocityEnv(cfg)


def test_randomisation_widens_once_the_curriculum_is_done():
    """``randomization.after_curriculum``: resets during the command curriculum draw from the base ranges, resets
    after it from the ranges set there (the others unchanged); without a curriculum the wide ranges hold at once."""
    def env_with(curriculum_steps: int) -> VelocityEnv:
        cfg = task_cfg(256)
        cfg.sim.dtype = "float32"
        r = cfg.randomization
        r.friction, r.base_mass_scale, r.stiffness_scale = (0.9, 1.0), (0.9, 1.1), (0.95, 1.05)
        r.after_curriculum.friction, r.after_curriculum.base_mass_scale = (0.3, 0.5), (1.2, 1.3)
        if curriculum_steps:
            cfg.commands.curriculum_steps = curriculum_steps
            cfg.commands.curriculum_initial_scale = 0.5
        return VelocityEnv(cfg)

    def drawn(env):
        mass = (env.params["body_mass"][:, 0] / env.nominal["body_mass"][:, 0])
        kp = env.params["joint_stiffness"][:, 0] / env.nominal["joint_stiffness"][:, 0]
        return env.params["friction"], mass, kp

    env = env_with(curriculum_steps=4)
    f, m, kp = drawn(env)  # the first reset: the curriculum has not begun
    assert f.min() >= 0.9 and f.max() <= 1.0 and m.max() < 1.2
    with torch.no_grad():
        for _ in range(5):
            env.step(torch.zeros(env.num_envs, 12))
    assert env.commands.progress == 1.0
    env.reset()
    f, m, kp = drawn(env)
    assert f.min() >= 0.3 and f.max() <= 0.5 and f.std() > 0.03
    assert m.min() >= 1.2 - 1e-6 and m.max() <= 1.3 + 1e-6
    assert kp.min() >= 0.95 - 1e-6 and kp.max() <= 1.05 + 1e-6  # not set after the curriculum: unchanged
    f, m, _ = drawn(env_with(curriculum_steps=0))
    assert f.max() <= 0.5 and m.min() >= 1.2 - 1e-6


def test_randomisation_ranges_ramp_widens_them_linearly_after_the_curriculum():
    """``randomization.ranges_ramp``: the curriculum's ranges until ``start`` policy steps after its end, then each
    endpoint moves linearly to ``after_curriculum``'s, reached exactly at ``end``; a malformed ramp is an error naming
    the field."""
    from diffloco_ext.tasks.velocity.env_cfg import RandomizationCfg, RandomizationRangesCfg

    r = RandomizationCfg(friction=(0.8, 1.2), base_com_xy=0.02, adversarial_fraction=0.0,
                         after_curriculum=RandomizationRangesCfg(friction=(0.4, 1.0), base_com_xy=0.06,
                                                                 adversarial_fraction=0.5))
    assert r.ranges(0.0)["friction"] == (0.8, 1.2) and r.ranges(1.0)["friction"] == (0.4, 1.0)
    half = r.ranges(0.5)
    assert half["friction"] == pytest.approx((0.6, 1.1)) and half["base_com_xy"] == pytest.approx(0.04)
    assert half["adversarial_fraction"] == pytest.approx(0.25)
    assert half["stiffness_scale"] == r.stiffness_scale  # not set after the curriculum: unchanged

    cfg = task_cfg(512)
    cfg.sim.dtype = "float32"
    rc = cfg.randomization
    rc.friction, rc.after_curriculum.friction = (0.9, 1.0), (0.1, 0.2)
    rc.ranges_ramp = (2, 6)
    cfg.commands.curriculum_steps, cfg.commands.curriculum_initial_scale = 2, 0.5
    env = VelocityEnv(cfg)
    seen = []
    with torch.no_grad():
        for _ in range(9):
            seen.append(env._ranges_after())
            env.reset()  # every env draws from the ranges in force
            f = env.params["friction"]
            lo, hi = rc.ranges(seen[-1])["friction"]
            assert f.min() >= lo - 1e-6 and f.max() <= hi + 1e-6 and f.max() - f.min() > 0.5 * (hi - lo)
            env.step(torch.zeros(env.num_envs, 12))
    # steps 0-1: the curriculum; 2-4: the ramp's start (since_done 0-2); then linear to 1 at since_done 6
    assert seen == pytest.approx([0.0, 0.0, 0.0, 0.0, 0.0, 0.25, 0.5, 0.75, 1.0])
    f = env.params["friction"]
    assert f.min() >= 0.1 - 1e-6 and f.max() <= 0.2 + 1e-6
    for bad in ((5, 2), (-1, 3), "x"):
        cfg = task_cfg(2, seed=42)
        cfg.randomization.ranges_ramp = bad
        with pytest.raises(ValueError, match="ranges_ramp"):
            VelocityEnv(cfg)


def _push_env(after_curriculum: bool, curriculum_steps: int) -> VelocityEnv:
    cfg = task_cfg(4, seed=5)
    cfg.sim.dtype = "float32"
    cfg.observation_noise.enable = False
    cfg.randomization.push_velocity_xy = 1.0
    cfg.randomization.push_interval = (0.1, 0.1)  # every 5 policy steps
    cfg.randomization.pushes_after_curriculum = after_curriculum
    if curriculum_steps:
        cfg.commands.curriculum_steps = curriculum_steps
        cfg.commands.curriculum_initial_scale = 0.5
    return VelocityEnv(cfg)


def _planar_velocity_jumps(env: VelocityEnv, steps: int) -> list[int]:
    """Policy steps at which some env's world-frame planar base velocity jumped by > 0.3 m/s after the step."""
    jumps = []
    with torch.no_grad():
        for k in range(steps):
            env.step(torch.zeros(env.num_envs, 12))
            before = env.last_output.u[:, :2].clone()  # the physics' end-of-step velocity
            after = env.u[:, :2]  # after the step's events (the push)
            if bool(((after - before).norm(dim=1) > 0.3).any()):
                jumps.append(k)
    return jumps


def test_pushes_kick_at_their_interval_and_wait_for_the_curriculum_when_asked():
    """Pushes change the base's planar velocity at the push interval; with ``pushes_after_curriculum`` nobody is
    pushed while the command curriculum runs, and pushes start once it has reached the full ranges."""
    plain = _planar_velocity_jumps(_push_env(False, 0), 12)
    assert plain and all(k % 5 == 4 for k in plain), plain  # a push every 0.1 s = 5 policy steps
    waiting = _push_env(True, 8)  # the curriculum reaches the full ranges after 8 policy steps
    jumps = _planar_velocity_jumps(waiting, 16)
    assert jumps and min(jumps) >= 8, jumps
    assert _planar_velocity_jumps(_push_env(True, 0), 6), "without a curriculum the pushes start at once"


def test_adversary_moves_the_chosen_envs_draws_down_the_return_within_the_ranges():
    """``randomization.adversarial_fraction``: at ``detach_state`` the chosen envs' randomised quantities step by
    ``adversarial_step`` x the range's width along the sign of the last backward pass's gradient of the loss (minus
    the return) w.r.t. them, clamped to the ranges; envs not chosen, and envs reset since the last cut, keep theirs;
    without the adversary no parameter carries a gradient; a bad fraction or step is an error naming the field."""
    env = adversarial_env(16, fraction=0.5)
    chosen = env.adversarial.clone()
    assert 0 < int(chosen.sum()) < 16
    env.detach_state()
    assert env.params["joint_stiffness"].requires_grad and env.params["friction"].requires_grad
    before = {k: v.clone() for k, v in env._draws.items()}
    leaves = env._leaves
    rng = np.random.default_rng(1)
    actions = [torch.tensor(rng.uniform(-0.5, 0.5, (16, 12))) for _ in range(4)]
    env.episode_length_buf[3] = env.max_episode_length - 2  # env 3 times out (and resets) within the horizon
    (-return_through(env, actions)).backward()
    grads = {k: leaf.grad.clone() for k, leaf in leaves.items()}
    reset = env._reset_since_detach.clone()
    assert reset[3] and int(reset.sum()) < 4
    fresh = {k: v.clone() for k, v in env._draws.items()}  # the reset envs' new draws
    env.detach_state()
    moved = 0
    for name, (lo, hi) in env._draw_bounds().items():
        width = hi - lo
        expected = torch.minimum(torch.maximum(before[name] + 0.25 * width * torch.sign(grads[name]), lo), hi)
        for i in range(16):
            if reset[i]:
                torch.testing.assert_close(env._draws[name][i], fresh[name][i])
            elif chosen[i]:
                torch.testing.assert_close(env._draws[name][i], expected[i])
                moved += int((env._draws[name][i] != before[name][i]).any())
            else:
                torch.testing.assert_close(env._draws[name][i], before[name][i])
        assert bool((env._draws[name] >= lo - 1e-12).all() and (env._draws[name] <= hi + 1e-12).all())
    assert moved >= 10
    # the parameters the simulator uses are the moved draws'
    torch.testing.assert_close(env.params["joint_stiffness"].detach(),
                               env.nominal["joint_stiffness"] * env._draws["stiffness_scale"])
    torch.testing.assert_close(env.params["friction"].detach(), env._draws["friction"])
    no = torch.zeros(16, dtype=torch.bool)
    log = env._episode_log(~no, no, no, no)
    assert log["Adversary/envs"] == float(env.adversarial.sum())
    lo, hi = env._draw_bounds()["friction"]
    assert log["Adversary/friction"] == pytest.approx(float(((env._draws["friction"] - lo) / (hi - lo))[
        env.adversarial].mean()))
    off = adversarial_env(4, fraction=0.0)
    off.detach_state()
    assert not any(v.requires_grad for v in off.params.values()) and off._leaves is None
    for key, bad in (("adversarial_fraction", 1.5), ("adversarial_step", 0.0), ("adversarial_step", True)):
        cfg = task_cfg(2)
        setattr(cfg.randomization, key, bad)
        with pytest.raises(ValueError, match=f"env.randomization.{key}"):
            VelocityEnv(cfg)
