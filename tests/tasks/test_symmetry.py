"""The velocity task's left-right mirror (``diffloco_ext.tasks.velocity.symmetry``) against the physics: ANYmal D
started in the mirror image of a state and driven by the mirrored actions gives the mirrored observations."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.tasks.velocity.env import VelocityEnv
from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg
from diffloco_ext.tasks.velocity.symmetry import (
    joint_mirror,
    left_right_augmentation,
    mirror_actions,
    mirror_observation_group,
    mirror_policy_observation,
)


def _mirror_state(q: torch.Tensor, u: torch.Tensor, sim_joint_names) -> tuple[torch.Tensor, torch.Tensor]:
    """The reflection y -> -y of generalised states (simulator joint order): base position (x, -y, z), quaternion
    (w, -x, y, -z), linear velocity (x, -y, z), angular velocity (-x, y, -z), joints as the actions."""
    index, sign = joint_mirror(sim_joint_names)
    qm, um = q.clone(), u.clone()
    qm[:, 1] = -q[:, 1]
    qm[:, 4], qm[:, 6] = -q[:, 4], -q[:, 6]
    qm[:, 7:] = q[:, 7:][:, index] * sign.double()
    um[:, 1] = -u[:, 1]
    um[:, 3], um[:, 5] = -u[:, 3], -u[:, 5]
    um[:, 6:] = u[:, 6:][:, index] * sign.double()
    return qm, um


def _env(contact="smoothed", symmetric=True):
    """Two ANYmal D envs, nominal parameters; ``symmetric``: the description's few asymmetric figures made
    symmetric (the base's centre of mass 0.033 mm and its products of inertia I_xy, I_yz 0.3-0.5 % of I_yy off the
    mid-plane, the thighs' I_xy, I_yz not mirror images: the CAD's), so that the robot is exactly its mirror image."""
    cfg = AnymalDFlatEnvCfg(num_envs=2, seed=5)
    cfg.sim.dtype = "float64"
    cfg.commands.heading_command = False
    cfg.observation_noise.enable = False
    cfg.randomization.enable = False
    cfg.sim.contact = contact
    env = VelocityEnv(cfg)
    if symmetric:
        names = [b.name for b in env.robot.bodies]
        com, inertia = env.params["body_com"].clone(), env.params["body_inertia"].clone()
        com[:, names.index("base"), 1] = 0.0
        for body in ("base", "LF_THIGH", "RF_THIGH", "LH_THIGH", "RH_THIGH"):
            for i, j in ((0, 1), (1, 2)):
                inertia[:, names.index(body), i, j] = inertia[:, names.index(body), j, i] = 0.0
        env.params = {**env.params, "body_com": com, "body_inertia": inertia}
    return env


@pytest.mark.parametrize("contact,steps,tolerance", [("smoothed", 40, 1e-2), ("hard", 25, 1e-3)])
def test_the_mirrored_state_and_actions_give_the_mirrored_observations(contact, steps, tolerance):
    """Projected Gauss-Seidel sweeps the feet in one order (LF, RF, LH, RH: not mirrored) and stops at its
    tolerance, so the two envs part by that much at each contact solve; hard contact's switching then amplifies it
    (0.5 s here, 0.8 s smoothed: the drop from 0.6 m, touch-down, standing and stepping on the ground)."""
    env = _env(contact)
    g = torch.Generator().manual_seed(0)
    q = torch.tensor(env.model.default_q(), dtype=torch.float64)[:1].clone()
    yaw, roll = 0.4, 0.05
    q[:, 3:7] = torch.tensor([[math.cos(yaw / 2) * math.cos(roll / 2), math.sin(roll / 2) * math.cos(yaw / 2),
                               -math.sin(roll / 2) * math.sin(yaw / 2), math.sin(yaw / 2) * math.cos(roll / 2)]])
    q[:, 1] = 0.3
    q[:, 7:] += 0.1 * torch.randn(1, 12, generator=g, dtype=torch.float64)
    u = 0.3 * torch.randn(1, env.model.nv, generator=g, dtype=torch.float64)
    qm, um = _mirror_state(q, u, env.robot.joint_names)
    env.q, env.u = torch.cat([q, qm]), torch.cat([u, um])
    command = torch.tensor([[0.6, 0.3, 0.5]], dtype=env.commands.command.dtype)
    env.commands.command = torch.cat([command, command * torch.tensor([1.0, -1.0, -1.0])])
    a = 0.5 * torch.randn(1, 12, generator=g, dtype=torch.float64)
    env.actions = torch.cat([a, mirror_actions(a, env.joint_names)])
    worst = 0.0
    with torch.no_grad():
        obs = env._observations()["policy"]
        # the base's centre of mass is 0.033 mm off the mid-plane: its velocity w x c differs by ~2e-5 m/s
        torch.testing.assert_close(obs[1], mirror_policy_observation(obs[:1], env.joint_names)[0], rtol=0, atol=1e-4)
        for step in range(steps):
            a = 0.7 * a + 0.2 * torch.randn(1, 12, generator=g, dtype=torch.float64)
            obs, _, dones, _ = env.step(torch.cat([a, mirror_actions(a, env.joint_names)]))
            assert not dones.any()
            mirrored = mirror_policy_observation(obs["policy"][:1], env.joint_names)[0]
            worst = max(worst, float((obs["policy"][1] - mirrored).abs().max()))
            critic = env._observations()["critic"]
            critic_mirrored = mirror_observation_group("critic", critic[:1], env.joint_names,
                                                       [f.name for f in env.robot.feet])[0]
            worst = max(worst, float((critic[1] - critic_mirrored).abs().max()))
        assert (env.foot_height.min(dim=1).values < 0.02).all(), env.foot_height  # on the ground
    assert worst < tolerance, worst  # joint velocities (rad/s) the largest entries
    # the mirror that forgets the abduction's sign is far off: the check above can fail
    index, _ = joint_mirror(env.joint_names)
    wrong = obs["policy"][:1].clone()
    for start in (12, 24, 36):
        wrong[:, start:start + 12] = wrong[:, start:start + 12][:, index]
    assert float((obs["policy"][1, 12:] - wrong[0, 12:]).abs().max()) > 10 * tolerance  # 0.4-2.8 rad/s


def test_the_description_itself_is_symmetric_to_a_few_tenths_of_a_percent():
    """Without the symmetrising of the few CAD figures the mirrored run parts after touch-down (the policy's
    mirror loss asks for the symmetry of the task, which the robot has to that accuracy)."""
    exact, cad = _env("smoothed"), _env("smoothed", symmetric=False)
    for name in ("body_mass", "joint_stiffness", "joint_damping"):
        torch.testing.assert_close(exact.params[name], cad.params[name])
    base = [b.name for b in cad.robot.bodies].index("base")
    inertia = cad.params["body_inertia"][0, base]
    assert 0 < abs(float(inertia[0, 1])) < 0.006 * float(inertia[1, 1])
    assert 0 < abs(float(cad.params["body_com"][0, base, 1])) < 5e-5


def test_the_mirror_is_an_involution_and_the_augmentation_is_rsl_rls():
    g = torch.Generator().manual_seed(1)
    obs = TensorDict({"policy": torch.randn(5, 48, generator=g), "critic": torch.randn(5, 66, generator=g)},
                     batch_size=[5])
    actions = torch.randn(5, 12, generator=g)
    aug_obs, aug_actions = left_right_augmentation(None, obs, actions)
    assert aug_obs.batch_size[0] == 10 and aug_actions.shape == (10, 12)
    torch.testing.assert_close(aug_obs["policy"][:5], obs["policy"])
    torch.testing.assert_close(aug_actions[:5], actions)
    twice, twice_actions = left_right_augmentation(None, aug_obs[5:], aug_actions[5:])
    torch.testing.assert_close(twice["policy"][5:], obs["policy"])
    torch.testing.assert_close(twice["critic"][5:], obs["critic"])
    torch.testing.assert_close(twice_actions[5:], actions)
    # the command (vx, vy, wz) -> (vx, -vy, -wz); LF_HAA <-> -RF_HAA; LF_HFE <-> RF_HFE
    m = aug_obs["policy"][5:]
    torch.testing.assert_close(m[:, 9:12], obs["policy"][:, 9:12] * torch.tensor([1.0, -1.0, -1.0]))
    torch.testing.assert_close(m[:, 12], -obs["policy"][:, 14])
    torch.testing.assert_close(m[:, 16], obs["policy"][:, 18])
    assert left_right_augmentation(None, None, actions)[0] is None
    assert left_right_augmentation(None, obs, None)[1] is None


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="48"):
        mirror_policy_observation(torch.zeros(2, 47))
    with pytest.raises(ValueError, match="width 50"):
        mirror_observation_group("critic", torch.zeros(2, 50))
    with pytest.raises(ValueError, match="'height_scan'"):
        mirror_observation_group("height_scan", torch.zeros(2, 10))
    with pytest.raises(ValueError, match="side letter"):
        joint_mirror(["HAA_LF"])
