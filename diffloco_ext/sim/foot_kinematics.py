"""Stage: foot sphere centres and velocities at a state, from the simulator's one kinematics pass.

What tasks read after every step (foot heights, foot slip): the world position (m) and velocity (m/s) of every
foot sphere's centre at ``(q, u)``. The tree pass is :mod:`.kinematics` (body poses relative to the base origin
``O``, world orientation, and body velocities in the spatial convention of :mod:`.spatial`: angular velocity
``w``, velocity ``v`` of the body point at ``O``); each foot then reads its body::

    x = r_b + R_b offset        pos = x + base position        vel = v_b + w_b x x

The foot kernel is differentiated by Warp's tape (one thread per env and foot, no loops); the tree by
:mod:`.kinematics`' hand-written reverse, both checked by the float64 finite-difference tests of ``tests/sim``.
"""

import functools
from dataclasses import dataclass

import warp as wp

from .adjoint import launch
from .coordinates import base_funcs
from .kinematics import KinematicsData, kinematics
from .stage_data import Sizes, StageData, intermediate, kernel_types


@dataclass
class FootData(StageData):
    """Foot sphere centres and their velocities at one state (world frame)."""

    foot_pos: wp.array = intermediate(lambda s: (s.N, s.F), "vec3", doc="foot sphere centres (m)")
    foot_vel: wp.array = intermediate(lambda s: (s.N, s.F), "vec3", doc="their velocities (m/s)")


@functools.cache
def foot_kernel(dtype):
    base_position = base_funcs(dtype)[0]
    T = kernel_types(dtype)

    @wp.kernel
    def foot_points(
        # Model:
        model: T.Model,
        # In:
        q_in: wp.array2d(dtype=dtype),
        kin_in: T.Kin,
        # Out:
        feet_out: T.Feet,
    ):
        """Foot ``f``'s sphere centre and its velocity (differentiated by Warp's tape)."""
        e, f = wp.tid()
        b = model.foot_body[f]
        x = kin_in.body_pos[e, b] + kin_in.body_rot[e, b] * model.foot_offset[f]
        feet_out.foot_pos[e, f] = x + base_position(q_in, e)
        feet_out.foot_vel[e, f] = kin_in.body_vel_lin[e, b] + wp.cross(kin_in.body_vel_ang[e, b], x)

    return foot_points


def foot_kinematics(model, q: wp.array, u: wp.array, tape: wp.Tape | None = None) -> tuple[wp.array, wp.array]:
    """Foot sphere centres (world, m) and velocities (world, m/s), each [N, F] vec3 (fresh arrays), at ``(q, u)``;
    recorded on ``tape`` when given (the outputs then carry gradient arrays and gradients back to ``q`` and
    ``u``)."""
    sizes = Sizes.of(model)
    feet = FootData.allocate(model, sizes, requires_grad=tape is not None)
    if tape is None:
        kin = KinematicsData.scratch(model, sizes, "foot_kinematics")
    else:
        kin = KinematicsData.allocate(model, sizes)
    kinematics(model, q, u, kin, tape)
    launch(foot_kernel(model.dtype), (model.num_envs, model.num_feet), [model.arrays, q, kin.values, feet.values],
           model.device, tape)
    if tape is not None:
        tape.record_func(backward=kin.attach_gradients, arrays=[])  # runs first when the tape is reversed
    return feet.foot_pos, feet.foot_vel


def foot_kinematics_torch(sim, q, u):
    """Foot sphere centres and velocities [N, F, 3] (world, m and m/s; torch) at torch ``(q, u)``, differentiable
    w.r.t. both when they require grad (a tape per call, reversed by autograd). ``sim``: a
    :class:`~.simulator.Simulator` or anything with its ``.sim``."""
    import torch

    sim = getattr(sim, "sim", sim)
    model = sim.model
    N, F = model.num_envs, model.num_feet
    if torch.is_grad_enabled() and (q.requires_grad or u.requires_grad):
        return _function().apply(sim, q, u)
    pos, vel = foot_kinematics(model, wp.from_torch(q.detach().contiguous(), dtype=model.dtype),
                               wp.from_torch(u.detach().contiguous(), dtype=model.dtype))
    return wp.to_torch(pos).reshape(N, F, 3).clone(), wp.to_torch(vel).reshape(N, F, 3).clone()


@functools.cache
def _function():
    import torch

    class FootKinematicsFunction(torch.autograd.Function):
        """Foot kinematics of ``(q, u)`` as a torch op: a tape per call, reversed in ``backward``."""

        @staticmethod
        def forward(ctx, sim, q, u):
            model = sim.model
            N, F = model.num_envs, model.num_feet
            tape = wp.Tape()
            q_wp = wp.from_torch(q.detach().contiguous(), dtype=model.dtype, requires_grad=True)
            u_wp = wp.from_torch(u.detach().contiguous(), dtype=model.dtype, requires_grad=True)
            pos, vel = foot_kinematics(model, q_wp, u_wp, tape)
            ctx.saved = (tape, q_wp, u_wp, pos, vel)
            return wp.to_torch(pos).reshape(N, F, 3).clone(), wp.to_torch(vel).reshape(N, F, 3).clone()

        @staticmethod
        def backward(ctx, g_pos, g_vel):
            if ctx.saved is None:
                raise RuntimeError("foot kinematics can be backpropagated once (its tape is freed)")
            tape, q_wp, u_wp, pos, vel = ctx.saved
            for arr, grad in ((pos, g_pos), (vel, g_vel)):
                if grad is not None:
                    view = wp.to_torch(arr.grad)
                    view.copy_(grad.reshape(view.shape))
            tape.backward()
            out = wp.to_torch(q_wp.grad).clone(), wp.to_torch(u_wp.grad).clone()
            tape.reset()
            ctx.saved = None
            return None, *out

    return FootKinematicsFunction

