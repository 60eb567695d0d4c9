"""Stage: signed gap between the terrain and every collision body (base, thighs, shanks, ...), per body.

What locomotion tasks read for terminations and penalties (Isaac Lab's flat ANYmal task ends an episode on base
contact and penalises thigh contacts): for each collision body ``k`` (``Model.collision.body_names``, the bodies
with :class:`~diffloco_ext.assets.robot_description.CollisionShape` s, in body order) the smallest signed gap
(m, negative in penetration) between the terrain and its capsules, at a state ``q`` (the end-of-step state)::

    capsule s of body b:  x_i = p + r_b + R_b a_i  (a_0 = start, a_1 = end, a_2 = midpoint; body frame, m)
    gap_s = min_i (n(x_i) . x_i - d(x_i)) - radius_s          (terrain tangent plane n . x = d, :mod:`.terrain`)
    gap_k = min over the capsules of body k of gap_s            output [N, K] (m)

On flat ground (and on any plane) the two end points give the exact capsule-plane gap (the midpoint is skipped);
on a height field the ends and the midpoint are sampled (a bump under the middle third of a long capsule can be
missed). **These bodies do not push on the ground**: they are not in the contact solver (only the foot spheres
are); a body can sink into the terrain and its gap just reports how far.

Gradients: w.r.t. ``q`` when recorded on a tape (:func:`body_gaps` with ``tape``; :func:`body_gaps_torch` for
torch): the base pose by Warp's automatic adjoint of :mod:`.kinematics`' base kernel, the tree by that module's
hand-written reverse, the capsule gaps by Warp's automatic adjoint (a small kernel without loops), the minimum
over a body's capsules by a hand-written reverse (the gradient goes to the smallest capsule's gap; the minimum
is not differentiable where two capsules tie). Checked against float64 central finite differences in
``tests/sim/test_body_contacts.py``.

Where tasks get them: the torch bridge's steps report the gaps of their end state (``StepOutput.body_gap``),
computed inside the step, so a replayed taped step (:mod:`.taped_replay`) replays these launches too instead of
running their Python every policy step (``scripts/benchmark_body_gaps.py``); :func:`body_gaps_torch` gives them
for any ``q``.
"""


import functools
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from .adjoint import launch
from .coordinates import base_funcs
from .kinematics import KinematicsData, kinematics
from .scratch import scratch_array
from .stage_data import Sizes, StageData, intermediate, kernel_types
from .terrain import terrain_funcs
from .warp_setup import NUMPY_DTYPES, warp_types


@dataclass
class CollisionData:
    """Collision capsules on the device, grouped by collision body (shapes: S capsules, K bodies).

    ``body_names`` [K] and ``body_index`` [K] (int32, the simulator's body index) give the order of the gaps;
    capsule ``s`` belongs to body ``shape_body[s]``, and body ``k``'s capsules are
    ``shape_start[k]:shape_start[k + 1]``. ``shape_a``/``shape_b`` [S] vec3: segment end points in the body frame
    (m); ``shape_radius`` [S] (m). The kernels read these arrays from the model's struct as ``collision_<name>``
    (:attr:`~.model.Model.arrays`).
    """

    body_names: tuple[str, ...]
    body_index: wp.array = field(metadata={"element": "int32", "ndim": 1})
    shape_start: wp.array = field(metadata={"element": "int32", "ndim": 1})
    shape_body: wp.array = field(metadata={"element": "int32", "ndim": 1})
    shape_a: wp.array = field(metadata={"element": "vec3", "ndim": 1})
    shape_b: wp.array = field(metadata={"element": "vec3", "ndim": 1})
    shape_radius: wp.array = field(metadata={"element": "scalar", "ndim": 1})

    @property
    def num_bodies(self) -> int:
        return len(self.body_names)

    @property
    def num_shapes(self) -> int:
        return self.shape_body.shape[0]


def collision_data(robot, dtype, device: str) -> CollisionData | None:
    """The robot's collision shapes on ``device`` (None when it has none)."""
    if not robot.collision_shapes:
        return None
    npd = NUMPY_DTYPES[dtype]
    vec3 = warp_types(dtype).vec3
    names = robot.collision_bodies
    shapes = sorted(robot.collision_shapes, key=lambda c: names.index(c.body))
    counts = [sum(1 for c in shapes if c.body == n) for n in names]
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    kw = dict(device=device)
    return CollisionData(
        body_names=names,
        body_index=wp.array(np.array([robot.body_index(n) for n in names], dtype=np.int32), dtype=wp.int32, **kw),
        shape_start=wp.array(start, dtype=wp.int32, **kw),
        shape_body=wp.array(np.array([robot.body_index(c.body) for c in shapes], dtype=np.int32), dtype=wp.int32,
                            **kw),
        shape_a=wp.array(np.array([c.start for c in shapes], dtype=npd), dtype=vec3, **kw),
        shape_b=wp.array(np.array([c.end for c in shapes], dtype=npd), dtype=vec3, **kw),
        shape_radius=wp.array(np.array([c.radius for c in shapes], dtype=npd), dtype=dtype, **kw),
    )


@dataclass
class BodyGapData(StageData):
    """Collision-body gaps of one state: each capsule's, and each body's smallest."""

    shape_gap: wp.array = intermediate(lambda s: (s.N, s.S), doc="signed gap of every capsule (m)")
    argmin: wp.array = intermediate(lambda s: (s.N, s.K), "int32", doc="the capsule of each body's smallest gap")
    body_gap: wp.array = intermediate(lambda s: (s.N, s.K), doc="signed gap of every collision body (m)")


@functools.cache
def body_contact_kernels(dtype):
    vec3 = warp_types(dtype).vec3
    vec4 = wp.types.vector(4, dtype)
    half = dtype(0.5)
    terrain_query = terrain_funcs(dtype)
    base_position = base_funcs(dtype)[0]
    T = kernel_types(dtype)

    @wp.func
    def _point_gap(kind: int, ground_height: dtype, heights: wp.array2d(dtype=dtype), grid: vec4, x: vec3):
        """Signed distance of the world point ``x`` from the terrain's tangent plane below it (m)."""
        d, n = terrain_query(kind, ground_height, heights, grid, x)
        return wp.dot(n, x) - d

    @wp.kernel
    def capsule_gaps(
        # Model:
        model: T.Model,
        # In:
        q_in: wp.array2d(dtype=dtype),
        kin_in: T.Kin,
        # Out:
        bodies_out: T.Bodies,
    ):
        """Signed gap (m) of capsule ``s`` of environment ``e`` (differentiated by Warp's automatic adjoint)."""
        e, s = wp.tid()
        b = model.collision_shape_body[s]
        origin = base_position(q_in, e) + kin_in.body_pos[e, b]
        R = kin_in.body_rot[e, b]
        x0 = origin + R * model.collision_shape_a[s]
        x1 = origin + R * model.collision_shape_b[s]
        kind = model.terrain_kind
        g = model.ground_height[e]
        gap = wp.min(_point_gap(kind, g, model.terrain_heights, model.terrain_grid, x0),
                     _point_gap(kind, g, model.terrain_heights, model.terrain_grid, x1))
        if kind != 0:
            gap = wp.min(gap, _point_gap(kind, g, model.terrain_heights, model.terrain_grid, (x0 + x1) * half))
        bodies_out.shape_gap[e, s] = gap - model.collision_shape_radius[s]

    @wp.kernel(enable_backward=False)
    def body_min(
        # Model:
        model: T.Model,
        # In (shape_gap) and Out (body_gap, argmin):
        bodies_out: T.Bodies,
    ):
        """Smallest capsule gap of body ``k`` and which capsule it is (for the reverse)."""
        e, k = wp.tid()
        start = model.collision_shape_start
        shape_gap = bodies_out.shape_gap
        best = start[k]
        for s in range(start[k] + 1, start[k + 1]):
            if shape_gap[e, s] < shape_gap[e, best]:
                best = s
        bodies_out.body_gap[e, k] = shape_gap[e, best]
        bodies_out.argmin[e, k] = best

    @wp.kernel(enable_backward=False)
    def body_min_adjoint(
        # the forward's arguments:
        model: T.Model,
        bodies_out: T.Bodies,
        # Gradients in (of body_gap) and out (of shape_gap, accumulated):
        bodies_grad: T.Bodies,
    ):
        e = wp.tid()
        for k in range(bodies_out.argmin.shape[1]):
            s = bodies_out.argmin[e, k]
            bodies_grad.shape_gap[e, s] = bodies_grad.shape_gap[e, s] + bodies_grad.body_gap[e, k]

    big = dtype(1.0e30)

    @wp.kernel(enable_backward=False)
    def flat_body_gaps(
        # Model:
        model: T.Model,
        # In:
        q_in: wp.array2d(dtype=dtype),
        kin_in: T.Kin,
        # Out:
        bodies_out: T.Bodies,
    ):
        """Flat ground, forward only: each body's smallest capsule gap from the heights of the capsules' end
        points, one thread per environment (the exact capsule-plane gap; no terrain query). The same arithmetic
        as :func:`capsule_gaps` then :func:`body_min` on flat ground, so an untaped step's gaps equal a taped
        step's bit for bit."""
        e = wp.tid()
        g = model.ground_height[e]
        start = model.collision_shape_start
        for k in range(bodies_out.body_gap.shape[1]):
            best = big
            for s in range(start[k], start[k + 1]):
                b = model.collision_shape_body[s]
                origin = base_position(q_in, e) + kin_in.body_pos[e, b]
                R = kin_in.body_rot[e, b]
                x0 = origin + R * model.collision_shape_a[s]
                x1 = origin + R * model.collision_shape_b[s]
                best = wp.min(best, wp.min(x0[2] - g, x1[2] - g) - model.collision_shape_radius[s])
            bodies_out.body_gap[e, k] = best

    return capsule_gaps, body_min, body_min_adjoint, flat_body_gaps


def body_gap_stage(model, q: wp.array, u_zero: wp.array, kin, bodies: BodyGapData,
                   tape: wp.Tape | None = None) -> None:
    """The tree pass at ``q`` (velocity ``u_zero``: zeros; only the poses are read) into ``kin``, then every
    capsule's and every collision body's gap into ``bodies``; recorded on ``tape`` when given. Untaped on flat
    ground, one kernel computes the bodies' gaps directly (``bodies``' capsule gaps and argmin are not written)."""
    capsule_gaps, body_min, body_min_adjoint, flat_body_gaps = body_contact_kernels(model.dtype)
    N = model.num_envs
    kinematics(model, q, u_zero, kin, tape)
    if tape is None and model.arrays.terrain_kind == 0:
        wp.launch(flat_body_gaps, dim=N, inputs=[model.arrays, q, kin.values, bodies.values], device=model.device,
                  record_tape=False)
        return
    launch(capsule_gaps, (N, model.collision.num_shapes), [model.arrays, q, kin.values, bodies.values],
           model.device, tape)
    inputs = [model.arrays, bodies.values]
    wp.launch(body_min, dim=(N, model.collision.num_bodies), inputs=inputs, device=model.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        wp.launch(body_min_adjoint, dim=N, inputs=[*inputs, bodies.grads], device=model.device, record_tape=False)

    tape.record_func(backward=backward, arrays=[])


def body_gaps(model, q: wp.array, tape: wp.Tape | None = None, out: wp.array | None = None) -> wp.array:
    """Signed gap (m) of every collision body to the terrain at ``q`` [N, nq]: [N, K] in the order
    ``model.collision.body_names`` (into ``out`` when given, else a fresh array).

    With ``tape`` the launches are recorded on it for gradients w.r.t. ``q`` (the output then carries a gradient
    array); without one nothing is recorded and the intermediates are reused scratch memory.
    """
    if model.collision is None:
        raise ValueError(f"robot '{model.robot.name}' has no collision shapes (RobotDescription.collision_shapes)")
    sizes = Sizes.of(model)
    taped = tape is not None
    if out is None:
        out = wp.empty((model.num_envs, model.collision.num_bodies), dtype=model.dtype, device=model.device,
                       requires_grad=taped)
    elif taped and out.grad is None:
        raise ValueError("body_gaps: a taped call's out needs a gradient array (requires_grad=True)")
    u_zero = scratch_array("body_gaps.u_zero", (model.num_envs, model.nv), model.dtype, model.device)
    if taped:
        kin = KinematicsData.allocate(model, sizes)
        scratch = BodyGapData.allocate(model, sizes)
    else:
        kin = KinematicsData.scratch(model, sizes, "body_gaps")
        scratch = BodyGapData.scratch(model, sizes, "body_gaps")
    bodies = BodyGapData(shape_gap=scratch.shape_gap, argmin=scratch.argmin, body_gap=out)
    bodies._dtype = model.dtype
    body_gap_stage(model, q, u_zero, kin, bodies, tape)
    if taped:  # runs first when the tape is reversed: the intermediates' gradient arrays
        def attach() -> None:
            kin.attach_gradients()
            bodies.attach_gradients()

        tape.record_func(backward=attach, arrays=[])
    return out


@functools.cache
def _torch_function():
    import torch

    class BodyGapFunction(torch.autograd.Function):
        """Body gaps of ``q`` as a torch op: a tape per call, reversed in ``backward``."""

        @staticmethod
        def forward(ctx, sim, q):
            model = sim.model
            tape = wp.Tape()
            q_wp = wp.from_torch(q.detach().contiguous(), dtype=model.dtype, requires_grad=True)
            gaps = body_gaps(model, q_wp, tape)
            ctx.saved = (tape, q_wp, gaps)
            return wp.to_torch(gaps).clone()

        @staticmethod
        def backward(ctx, g_gap):
            tape, q_wp, gaps = ctx.saved
            wp.to_torch(gaps.grad).copy_(g_gap)
            tape.backward()
            grad = wp.to_torch(q_wp.grad).clone()
            tape.reset()
            ctx.saved = None
            return None, grad

    return torch, BodyGapFunction


def body_gaps_torch(sim, q):
    """Per-body terrain gaps [N, K] (m, torch) of torch positions ``q`` [N, nq] (e.g. ``TorchSimulator.step(...).q``),
    differentiable w.r.t. ``q`` when it requires grad. ``sim``: a :class:`~.simulator.Simulator` or anything with
    its ``.sim`` (a :class:`~.torch_bridge.TorchSimulator`). Body order: ``sim.model.collision.body_names``."""
    torch, function = _torch_function()
    sim = getattr(sim, "sim", sim)
    model = sim.model
    if torch.is_grad_enabled() and q.requires_grad:
        return function.apply(sim, q)
    q_wp = wp.from_torch(q.detach().contiguous(), dtype=model.dtype)
    return wp.to_torch(body_gaps(model, q_wp)).clone()
