"""The validation backends: the protocol, per-env parameters with the same semantics in our hard mode and in
MuJoCo, MuJoCo's threads, and sim-to-sim agreement of an open-loop trot.

Sim-to-sim tolerances (3 s open-loop trot, targets at 50 Hz: our hard mode at 4 x 5 ms, MuJoCo at 8 x 2.5 ms,
the validation settings). Measured: base height RMS 1.7 mm, yaw RMS 0.39 deg, joint RMS 11.4 mrad (independent
measurements on ANYmal D at dt 5 ms found about 2 mm, 0.3 deg and 12 mrad). The two differ by construction:
MuJoCo's contact is soft (``solref`` time constant 20 ms: a foot sinks ~0.5 mm at rest and takes a few steps to
stop at touchdown, where ours stops in one step), and the DC-motor speed line is explicit in MuJoCo, implicit in
ours (:mod:`diffloco_ext.sim.actuators`). Tolerances: about twice the measurements, 4 mm, 1 deg, 25 mrad. With
one parameter changed in MuJoCo only the test fails: +5 kg on the base (base height RMS 13 mm), PD gains x 0.8 or
friction 0.4 (the feet no longer lift 4 cm).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.validation.backends import Backend, EnvParameters
from diffloco_ext.validation.mujoco_backend import MujocoBackend
from diffloco_ext.validation.robot_kinematics import RobotKinematics
from diffloco_ext.validation.sim_backend import make_backend as make_hard

ROBOT = get_robot("anymal_d")
DEFAULT = torch.tensor(ROBOT.default_joint_positions())


def _backends(n):
    return {"hard": make_hard(ROBOT, n, policy_dt=0.02, sim_dt=0.005), "mujoco": MujocoBackend(ROBOT, n)}


def _start(n, height=0.56):
    q = torch.zeros(n, 19, dtype=torch.float64)
    q[:, 2], q[:, 3], q[:, 7:] = height, 1.0, DEFAULT
    return q, torch.zeros(n, 18, dtype=torch.float64)


def test_backends_follow_the_protocol():
    for backend in _backends(2).values():
        assert isinstance(backend, Backend)
        assert backend.policy_dt == 0.02 and backend.num_envs == 2
        assert torch.equal(backend.joint_torque(), torch.zeros(2, 12, dtype=torch.float64))
        q, u = _start(2)
        u[1, 6] = 0.5
        backend.reset(q, u)
        q1, u1 = backend.state()
        assert torch.allclose(q1, q) and torch.allclose(u1, u)
        backend.reset(q + 1.0, u, env_mask=torch.tensor([False, True]))  # only env 1
        q2, _ = backend.state()
        assert torch.allclose(q2[0], q[0]) and torch.allclose(q2[1], q[1] + 1.0)
        with pytest.raises(ValueError, match="for 3 envs given to a backend of 2"):
            backend.set_parameters(EnvParameters.nominal(3))
        bad = EnvParameters.nominal(2)
        bad.payload_kg[0] = -1000.0
        with pytest.raises(ValueError, match="without mass"):
            backend.set_parameters(bad)


def test_parameters_have_the_same_effect_in_both_backends():
    """Stand for 2 s at nominal, +5 kg, -5 kg, 0.8 k_p/k_d: the stance heights move the same way in both
    backends. Measured (mm, against nominal): +5 kg -5.6 / -5.8, -5 kg +5.3 / +5.4, 0.8 x gains -15.0 / -15.1
    (hard / MuJoCo)."""
    params = EnvParameters(friction=np.array([1.0, 1.0, 1.0, 1.2]), payload_kg=np.array([0.0, 5.0, -5.0, 0.0]),
                           stiffness_scale=np.array([1.0, 1.0, 1.0, 0.8]), damping_scale=np.array([1.0, 1.0, 1.0, 0.8]))
    heights = {}
    for name, backend in _backends(4).items():
        backend.set_parameters(params)
        backend.reset(*_start(4))
        for _ in range(100):
            backend.step(DEFAULT.repeat(4, 1).double())
        heights[name] = backend.state()[0][:, 2].numpy()
    hard, mujoco = heights["hard"], heights["mujoco"]
    for h in (hard, mujoco):
        assert h[1] < h[0] - 0.003 and h[2] > h[0] + 0.003  # the payload sinks the stance, its removal lifts it
        assert h[3] < h[0] - 0.005  # softer gains: a lower stance
    np.testing.assert_allclose(hard - hard[0], mujoco - mujoco[0], atol=5e-4)  # measured: 0.2 mm
    mj = _backends(4)["mujoco"]
    mj.set_parameters(params)
    assert mj.models[1].body_mass[1] == pytest.approx(mj.model.body_mass[1] + 5.0)
    assert mj.models[3].geom_friction[mj.model.geom("LF_FOOT").id, 0] == 1.2
    assert mj.models[3].geom_friction[mj.model.geom("floor").id, 0] == 1.2


def test_mujoco_soft_ground_sinks_the_stance_and_bounces_more():
    """The registry's ``mujoco-soft`` (every geom's solref time constant 0.04 s, MuJoCo's default 0.02): the same
    robot dropped from 0.56 m on its default pose sinks deeper into the softer ground (the spring of MuJoCo's soft
    contact scales as 1 / time constant^2) and overshoots more on landing; a time constant MuJoCo would clamp is an
    error. Measured: stance 3.3 mm lower, the landing's lowest point 5.5 mm lower."""
    from diffloco_ext.validation import backend_registry

    runs = {}
    for name in ("mujoco", "mujoco-soft"):
        backend = backend_registry.make_backend(name, ROBOT, 1, policy_dt=0.02)
        assert backend.name == name
        backend.reset(*_start(1))
        z = []
        for _ in range(100):
            backend.step(DEFAULT[None].double())
            z.append(float(backend.state()[0][0, 2]))
        runs[name] = (backend, np.array(z))
    (default, z0), (soft, z1) = runs["mujoco"], runs["mujoco-soft"]
    assert np.all(soft.model.geom_solref[:, 0] == 0.04) and np.all(default.model.geom_solref[:, 0] == 0.02)
    assert z1[-10:].mean() < z0[-10:].mean() - 0.002  # the stance, after 2 s
    assert z1.min() < z0.min() - 0.004  # the landing's lowest point
    with pytest.raises(ValueError, match="below two MuJoCo steps"):
        MujocoBackend(ROBOT, 1, contact_time_constant=0.004)


def test_mujoco_threads_give_the_same_states():
    states = []
    for threads in (1, 2):
        backend = MujocoBackend(ROBOT, 6, threads=threads)
        q, u = _start(6)
        u[:, 0] = torch.linspace(-0.5, 0.5, 6)
        backend.reset(q, u)
        for t in range(20):
            backend.step((DEFAULT + 0.2 * math.sin(0.3 * t)).repeat(6, 1).double())
        states.append(torch.cat(backend.state(), dim=1))
    assert torch.equal(states[0], states[1])  # no warm start: the thread schedule cannot change results


def _trot_target(t: float) -> torch.Tensor:
    """Open-loop trot: diagonal pairs (LF+RH, RF+LH) lift in turn, 0.6 s cycle, hip flexion 0.4 rad and knee
    0.8 rad at the top of the swing (the feet rise 6-9 cm)."""
    names = ROBOT.joint_names
    phase = torch.tensor([0.0 if n[:2] in ("LF", "RH") else math.pi for n in names])
    front = torch.tensor([1.0 if n[1] == "F" else -1.0 for n in names])
    lift = torch.tensor([0.0 if n.endswith("HAA") else (0.4 if n.endswith("HFE") else -0.8) for n in names]) * front
    return DEFAULT + lift * torch.clamp(torch.sin(2 * math.pi * t / 0.6 + phase), min=0.0)


def _yaw(q):
    w, x, y, z = q[:, 3], q[:, 4], q[:, 5], q[:, 6]
    return np.unwrap(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def test_open_loop_trot_agrees_between_hard_mode_and_mujoco():
    kin = RobotKinematics(ROBOT, 1)
    runs = {}
    for name, backend in _backends(1).items():
        backend.reset(*_start(1))
        for _ in range(25):  # settle on the ground for 0.5 s
            backend.step(DEFAULT[None].double())
        qs, lift = [], []
        for t in range(150):  # 3 s
            backend.step(_trot_target(t * backend.policy_dt)[None].double())
            q, u = backend.state()
            qs.append(q[0].numpy())
            lift.append(kin.foot_heights(kin.feet(q, u)[0])[0])
        runs[name] = np.array(qs), np.array(lift)
    (hard, hard_lift), (mujoco, mujoco_lift) = runs["hard"], runs["mujoco"]
    assert hard_lift.max(axis=0).min() > 0.04 and mujoco_lift.max(axis=0).min() > 0.04  # every foot swung
    assert np.ptp(hard[:, 7:], axis=0).max() > 0.5  # the joints moved
    height = 1e3 * np.sqrt(np.mean((hard[:, 2] - mujoco[:, 2]) ** 2))
    yaw = np.degrees(np.sqrt(np.mean((_yaw(hard) - _yaw(mujoco)) ** 2)))
    joints = 1e3 * np.sqrt(np.mean((hard[:, 7:] - mujoco[:, 7:]) ** 2))
    assert height < 4.0, f"base height RMS {height:.2f} mm"
    assert yaw < 1.0, f"yaw RMS {yaw:.3f} deg"
    assert joints < 25.0, f"joint RMS {joints:.1f} mrad"
