"""Left-right (sagittal-plane) mirror symmetry of the velocity task's observations and actions.

A quadruped whose left and right halves are mirror images (ANYmal C and D: their descriptions are, to 0.03 mm of
the base's centre of mass) walks the mirrored command with the mirrored motion: reflecting the world in the base's
x-z plane maps a trajectory to a trajectory. A policy that respects that symmetry loads its left and right legs
alike; one trained without it may not (a main-job policy trained without it: left front knee RMS torque 19-22 N m, right
front 9-16 N m). Mittal et al. (ICRA 2024, "Symmetry Considerations for Learning Task Symmetric Robot Policies")
train with a mirror loss or with mirrored samples; rsl_rl implements both (``rsl_rl.extensions.Symmetry``), with a
user function of the signature of :func:`left_right_augmentation`, which rsl_rl's PPO takes
(``agent.algorithm.symmetry_cfg``).

The reflection ``y -> -y`` of the base frame (x forward, y left, z up), on each observation term:

* linear velocity, projected gravity: ``(x, -y, z)``; angular velocity (a pseudo-vector): ``(-x, y, -z)``;
* command ``(vx, vy, wz)``: ``(vx, -vy, -wz)``;
* joint terms (positions minus default, velocities, actions; Isaac Lab's joint order): left and right legs swap
  (LF <-> RF, LH <-> RH), hip abduction (HAA) changes sign, hip and knee flexion (HFE, KFE) keep theirs (the
  default pose is the same on both sides, so positions relative to it mirror as the positions do);
* the privileged critic terms: feet swap (contacts, foot heights), friction and mass unchanged, the centre-of-mass
  offset ``(x, -y, z)``, the tracking errors as the command, the tracking kernels unchanged.

``tests/tasks/test_symmetry.py`` checks it against the physics: the mirrored state driven by the mirrored actions
gives the mirrored observations.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from .observations import POLICY_TERMS

#: The sides' letters in a joint or foot name (``LF_HAA``, ``RH_FOOT``): the first letter is the side.
_SIDES = {"L": "R", "R": "L"}


def mirrored_name(name: str) -> str:
    """``LF_HAA`` -> ``RF_HAA`` (the first letter is the side)."""
    if not name or name[0] not in _SIDES:
        raise ValueError(f"'{name}' does not start with a side letter (L or R): no mirror image")
    return _SIDES[name[0]] + name[1:]


def joint_mirror(joint_names: list[str] | tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(index, sign)`` [n] such that ``x_mirrored = sign * x[:, index]`` for joint-ordered terms: each joint takes
    its mirror image's value, negated for hip abduction (``*_HAA``)."""
    names = list(joint_names)
    index = [names.index(mirrored_name(n)) for n in names]
    sign = [-1.0 if n.endswith("_HAA") else 1.0 for n in names]
    return torch.tensor(index), torch.tensor(sign)


def foot_mirror(foot_names: list[str] | tuple[str, ...]) -> torch.Tensor:
    """``index`` [k]: feet take their mirror image's value."""
    names = list(foot_names)
    return torch.tensor([names.index(mirrored_name(n)) for n in names])


_ANYMAL_JOINTS = tuple(f"{leg}_{kind}" for kind in ("HAA", "HFE", "KFE") for leg in ("LF", "LH", "RF", "RH"))
_ANYMAL_FEET = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")  # the robot description's order (privileged terms)


def _policy_map(joint_names) -> tuple[torch.Tensor, torch.Tensor]:
    """``(index, sign)`` [48] of the policy observation (:data:`POLICY_TERMS`)."""
    j_index, j_sign = joint_mirror(joint_names)
    index, sign, start = [], [], 0
    per_term = {"base_lin_vel": [1.0, -1.0, 1.0], "base_ang_vel": [-1.0, 1.0, -1.0],
                "projected_gravity": [1.0, -1.0, 1.0], "velocity_commands": [1.0, -1.0, -1.0]}
    for name, size in POLICY_TERMS:
        if name in per_term:
            index += [start + i for i in range(size)]
            sign += per_term[name]
        else:
            index += (start + j_index).tolist()
            sign += j_sign.tolist()
        start += size
    return torch.tensor(index), torch.tensor(sign)


def _critic_map(width: int, joint_names, foot_names) -> tuple[torch.Tensor, torch.Tensor]:
    """``(index, sign)`` of the velocity task's privileged critic group (``VelocityEnv._observations``): the policy
    terms, contacts (k), foot heights (k), friction, mass scale, centre-of-mass offset (3), then the tracking
    features (5, ``critic_tracking_features``) if present (which follows from the width)."""
    p_index, p_sign = _policy_map(joint_names)
    k = len(foot_names)
    f = foot_mirror(foot_names)
    base = p_index.numel() + 2 * k + 5
    extras = {0: (), 5: ("tracking",)}.get(width - base)
    if extras is None:
        raise ValueError(f"a critic observation of width {width} is not the velocity task's privileged group "
                         f"({base}, +5 tracking features): no mirror for it")
    index, sign = p_index.tolist(), p_sign.tolist()
    start = p_index.numel()
    for _ in range(2):  # contacts, foot heights
        index += (start + f).tolist()
        sign += [1.0] * k
        start += k
    index += [start, start + 1, start + 2, start + 3, start + 4]  # friction, mass scale, com offset (x, y, z)
    sign += [1.0, 1.0, 1.0, -1.0, 1.0]
    start += 5
    if "tracking" in extras:  # command - velocity (vx, vy, wz), the two kernels
        index += [start + i for i in range(5)]
        sign += [1.0, -1.0, -1.0, 1.0, 1.0]
    return torch.tensor(index), torch.tensor(sign)


def _names(env) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if env is None:
        return _ANYMAL_JOINTS, _ANYMAL_FEET
    unwrapped = getattr(env, "unwrapped", env)
    joints = tuple(getattr(unwrapped, "joint_names", _ANYMAL_JOINTS))
    robot = getattr(unwrapped, "robot", None)
    feet = tuple(f.name for f in robot.feet) if robot is not None and getattr(robot, "feet", None) else _ANYMAL_FEET
    return joints, feet


def mirror_policy_observation(obs: torch.Tensor, joint_names=_ANYMAL_JOINTS) -> torch.Tensor:
    """The mirror image [N, 48] of policy observations ``obs`` [N, 48] (Isaac Lab's order, joints in
    ``joint_names``' order)."""
    if obs.shape[-1] != sum(size for _, size in POLICY_TERMS):
        raise ValueError(f"policy observations have {sum(s for _, s in POLICY_TERMS)} entries, got {obs.shape[-1]}")
    index, sign = _policy_map(joint_names)
    return obs[..., index.to(obs.device)] * sign.to(obs.device, obs.dtype)


def mirror_actions(actions: torch.Tensor, joint_names=_ANYMAL_JOINTS) -> torch.Tensor:
    """The mirror image [N, n] of joint-ordered actions ``actions`` [N, n]."""
    if actions.shape[-1] != len(joint_names):
        raise ValueError(f"actions have one entry per joint ({len(joint_names)}), got {actions.shape[-1]}")
    index, sign = joint_mirror(joint_names)
    return actions[..., index.to(actions.device)] * sign.to(actions.device, actions.dtype)


def mirror_observation_group(name: str, obs: torch.Tensor, joint_names=_ANYMAL_JOINTS,
                             foot_names=_ANYMAL_FEET) -> torch.Tensor:
    """The mirror image of one observation group of the velocity task (``policy`` or ``critic``)."""
    if name == "policy" or (name == "critic" and obs.shape[-1] == sum(s for _, s in POLICY_TERMS)):
        return mirror_policy_observation(obs, joint_names)
    if name == "critic":
        index, sign = _critic_map(obs.shape[-1], joint_names, foot_names)
        return obs[..., index.to(obs.device)] * sign.to(obs.device, obs.dtype)
    raise ValueError(f"no mirror for the observation group '{name}' (the velocity task has 'policy' and 'critic')")


def left_right_augmentation(env=None, obs: TensorDict | None = None, actions: torch.Tensor | None = None
                            ) -> tuple[TensorDict | None, torch.Tensor | None]:
    """rsl_rl's symmetry function (``symmetry_cfg["data_augmentation_func"]``): the batch followed by its mirror
    image, ``[2B, ...]`` (the original samples first), for the observations (every group) and the actions; None
    stays None. ``env`` gives the joint and foot names (ANYmal's without it)."""
    joints, feet = _names(env)
    obs_aug = None
    if obs is not None:
        batch = obs.batch_size[0]
        obs_aug = TensorDict({k: torch.cat([v, mirror_observation_group(k, v, joints, feet)], dim=0)
                              for k, v in obs.items()}, batch_size=[2 * batch], device=obs.device)
    actions_aug = None if actions is None else torch.cat([actions, mirror_actions(actions, joints)], dim=0)
    return obs_aug, actions_aug
