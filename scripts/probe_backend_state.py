"""Probe of a validation backend's physics and state: ANYmal D standing (default pose held) is given a base velocity
of 0.8 m/s (env 0 along x, env 1 along y); prints how far the base moves in 0.2 s and 1 s (the feet hold it: the
base sways and comes back), then the read base velocity against the finite difference of the read base position over
one policy step (0.02 s). Session 12 (docs/tasks.md): MuJoCo 0.776 / 0.774 m/s, Isaac Lab PhysX 0.769 / 0.769, Isaac
Lab Newton 0.54 read against 2.14 from the positions: the backend stepped Newton 4x the policy step (its physics
manager runs all of a policy step's physics steps in one call). After the fix Newton reads 0.770 against 0.767.

    .venv/bin/python scripts/probe_backend_state.py {mujoco,physx,newton}
"""
import sys, json, time
import torch
from diffloco_ext.assets import get_robot
robot = get_robot("anymal_d")
engine = sys.argv[1]
if engine == "mujoco":
    from diffloco_ext.validation.backend_registry import make_backend as mk
    backend = mk("mujoco", robot, 2, policy_dt=0.02)
else:
    from diffloco_ext.isaaclab.validation_backend import make_backend
    backend = make_backend(robot, 2, engine=engine)
default = torch.tensor([robot.default_joint_pos[n] for n in robot.joint_names], dtype=torch.float64)
q0 = torch.zeros(2, 7 + 12, dtype=torch.float64); q0[:, 2] = 0.56; q0[:, 3] = 1.0; q0[:, 7:] = default
u0 = torch.zeros(2, 6 + 12, dtype=torch.float64)
backend.reset(q0, u0)
for _ in range(50): backend.step(default.repeat(2, 1))
q, u = backend.state()
q1 = q.clone(); u1 = u.clone(); u1[:, 0] = torch.tensor([0.8, 0.0]); u1[:, 1] = torch.tensor([0.0, 0.8])
backend.reset(q1, u1)
xs = []
for i in range(50):
    backend.step(default.repeat(2, 1))
    q, u = backend.state(); xs.append([float(q[0, 0] - q1[0, 0]), float(q[1, 1] - q1[1, 1])])
print(json.dumps({"engine": engine, "height": float(q[0, 2]), "slide_0.2s": xs[9], "slide_1s": xs[-1],
                  "speed_1s": [float(u[0, 0]), float(u[1, 1])]}))
# consistency: read base velocity against the finite difference of the read base position (policy steps of 0.02 s)
backend.reset(q1, u1)
backend.step(default.repeat(2, 1)); qa, ua = backend.state()
backend.step(default.repeat(2, 1)); qb, ub = backend.state()
fd = (qb[:, :3] - qa[:, :3]) / 0.02
print(json.dumps({"engine": engine, "u_read_lin": ((ua[:, :3] + ub[:, :3]) / 2).tolist(), "fd_lin": fd.tolist(),
                  "u_read_ang": ((ua[:, 3:6] + ub[:, 3:6]) / 2).tolist()}))
