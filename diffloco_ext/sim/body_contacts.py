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
"""


import functools
from dataclasses import dataclass

import numpy as np
import warp as wp

from .adjoint import input_grad, output_grad
from .kinematics import joint_funcs, kinematics_kernels
from .scratch import scratch_array
from .terrain import terrain_funcs, terrain_inputs
from .warp_setup import NUMPY_DTYPES, warp_types


@dataclass
class CollisionData:
    """Collision capsules on the device, grouped by collision body (shapes: S capsules, K bodies).

    ``body_names`` [K] and ``body_index`` [K] (int32, the simulator's body index) give the order of the gaps;
    capsule ``s`` belongs to body ``shape_body[s]``, and body ``k``'s capsules are
    ``shape_start[k]:shape_start[k + 1]``. ``shape_a``/``shape_b`` [S] vec3: segment end points in the body frame
    (m); ``shape_radius`` [S] (m).
    """

    body_names: tuple[str, ...]
    body_index: wp.array
    shape_start: wp.array
    shape_body: wp.array
    shape_a: wp.array
    shape_b: wp.array
    shape_radius: wp.array

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


@functools.cache
def body_contact_kernels(dtype):
    t = warp_types(dtype)
    vec3, mat33 = t.vec3, t.mat33
    vec4 = wp.types.vector(4, dtype)
    half = dtype(0.5)
    terrain_query = terrain_funcs(dtype)

    @wp.func
    def _point_gap(kind: int, ground_height: dtype, heights: wp.array2d(dtype=dtype), grid: vec4, x: vec3):
        d, n = terrain_query(kind, ground_height, heights, grid, x)
        return wp.dot(n, x) - d

    @wp.kernel
    def capsule_gaps(
        # Model:
        shape_body: wp.array(dtype=wp.int32),
        shape_a: wp.array(dtype=vec3),
        shape_b: wp.array(dtype=vec3),
        shape_radius: wp.array(dtype=dtype),
        ground_height: wp.array(dtype=dtype),
        terrain_kind: int,
        heights: wp.array2d(dtype=dtype),
        grid: vec4,
        # In:
        q_in: wp.array2d(dtype=dtype),
        body_rot_in: wp.array2d(dtype=mat33),
        body_pos_in: wp.array2d(dtype=vec3),
        # Out:
        shape_gap_out: wp.array2d(dtype=dtype),
    ):
        """Signed gap (m) of capsule ``s`` of environment ``e`` (differentiated by Warp's automatic adjoint)."""
        e, s = wp.tid()
        b = shape_body[s]
        origin = vec3(q_in[e, 0], q_in[e, 1], q_in[e, 2]) + body_pos_in[e, b]
        R = body_rot_in[e, b]
        x0 = origin + R * shape_a[s]
        x1 = origin + R * shape_b[s]
        g = ground_height[e]
        gap = wp.min(_point_gap(terrain_kind, g, heights, grid, x0), _point_gap(terrain_kind, g, heights, grid, x1))
        if terrain_kind != 0:
            gap = wp.min(gap, _point_gap(terrain_kind, g, heights, grid, (x0 + x1) * half))
        shape_gap_out[e, s] = gap - shape_radius[s]

    @wp.kernel(enable_backward=False)
    def body_min(
        # Model:
        shape_start: wp.array(dtype=wp.int32),
        # In:
        shape_gap_in: wp.array2d(dtype=dtype),
        # Out:
        body_gap_out: wp.array2d(dtype=dtype),
        argmin_out: wp.array2d(dtype=wp.int32),
    ):
        """Smallest capsule gap of body ``k`` and which capsule it is (for the reverse)."""
        e, k = wp.tid()
        best = shape_start[k]
        for s in range(shape_start[k] + 1, shape_start[k + 1]):
            if shape_gap_in[e, s] < shape_gap_in[e, best]:
                best = s
        body_gap_out[e, k] = shape_gap_in[e, best]
        argmin_out[e, k] = best

    @wp.kernel(enable_backward=False)
    def body_min_adjoint(
        # In:
        argmin_in: wp.array2d(dtype=wp.int32),
        body_gap_grad_in: wp.array2d(dtype=dtype),
        # Out:
        shape_gap_grad_out: wp.array2d(dtype=dtype),
    ):
        e = wp.tid()
        for k in range(argmin_in.shape[1]):
            s = argmin_in[e, k]
            shape_gap_grad_out[e, s] = shape_gap_grad_out[e, s] + body_gap_grad_in[e, k]

    _, joint_pose, _ = joint_funcs(dtype)
    big = dtype(1.0e30)

    @wp.kernel(enable_backward=False)
    def flat_body_gaps(
        # Model:
        body_parent: wp.array(dtype=wp.int32),
        body_pos0: wp.array(dtype=vec3),
        body_rot0: wp.array(dtype=mat33),
        joint_axis: wp.array(dtype=vec3),
        shape_start: wp.array(dtype=wp.int32),
        shape_body: wp.array(dtype=wp.int32),
        shape_a: wp.array(dtype=vec3),
        shape_b: wp.array(dtype=vec3),
        shape_radius: wp.array(dtype=dtype),
        ground_height: wp.array(dtype=dtype),
        # In:
        q_in: wp.array2d(dtype=dtype),
        # Out:
        body_rot_out: wp.array2d(dtype=mat33),
        body_pos_out: wp.array2d(dtype=vec3),
        body_gap_out: wp.array2d(dtype=dtype),
    ):
        """Flat ground, forward only (no tape), one pass per environment: body poses parents first into
        ``body_*_out`` (scratch), then the heights of every capsule's end points."""
        e = wp.tid()
        body_rot_out[e, 0] = wp.quat_to_matrix(wp.normalize(wp.quaternion(q_in[e, 4], q_in[e, 5], q_in[e, 6],
                                                                           q_in[e, 3])))
        body_pos_out[e, 0] = vec3(dtype(0.0), dtype(0.0), dtype(0.0))
        for b in range(1, body_parent.shape[0]):
            p = body_parent[b]
            rot, r, _a = joint_pose(body_rot_out[e, p], body_pos_out[e, p], body_rot0[b], body_pos0[b],
                                    joint_axis[b], q_in[e, 6 + b])
            body_rot_out[e, b] = rot
            body_pos_out[e, b] = r
        z0 = q_in[e, 2] - ground_height[e]
        for k in range(body_gap_out.shape[1]):
            best = big
            for s in range(shape_start[k], shape_start[k + 1]):
                b = shape_body[s]
                R = body_rot_out[e, b]
                row = vec3(R[2, 0], R[2, 1], R[2, 2])
                z = z0 + body_pos_out[e, b][2]
                gap = wp.min(wp.dot(row, shape_a[s]), wp.dot(row, shape_b[s])) + z - shape_radius[s]
                best = wp.min(best, gap)
            body_gap_out[e, k] = best

    return capsule_gaps, body_min, body_min_adjoint, flat_body_gaps


def body_gaps(model, q: wp.array, tape: wp.Tape | None = None, out: wp.array | None = None) -> wp.array:
    """Signed gap (m) of every collision body to the terrain at ``q`` [N, nq]: [N, K] in the order
    ``model.collision.body_names`` (into ``out`` when given).

    With ``tape`` the launches are recorded on it for gradients w.r.t. ``q`` (inside ``with tape:`` or not);
    without one nothing is recorded, even inside an active tape, the intermediates are reused scratch memory,
    and on flat ground a single fused kernel computes only the heights of the capsules' end points.
    """
    cd = model.collision
    if cd is None:
        raise ValueError(f"robot '{model.robot.name}' has no collision shapes (RobotDescription.collision_shapes)")
    t = warp_types(model.dtype)
    N, B, S, K = model.num_envs, model.num_bodies, cd.num_shapes, cd.num_bodies
    base, tree, tree_adjoint = kinematics_kernels(model.dtype)[:3]
    capsule_gaps, body_min, body_min_adjoint, flat_fused = body_contact_kernels(model.dtype)
    taped = tape is not None
    kw = dict(device=model.device)
    kind = terrain_inputs(model)[0]
    if not taped:
        if out is None:
            out = wp.empty((N, K), dtype=model.dtype, **kw)
        if kind == 0:
            wp.launch(flat_fused, dim=N, record_tape=False, inputs=[
                model.body_parent, model.body_pos0, model.body_rot0, model.joint_axis, cd.shape_start,
                cd.shape_body, cd.shape_a, cd.shape_b, cd.shape_radius, model.ground_height, q,
                scratch_array("body_contacts.fused_rot", (N, B), t.mat33, model.device, zero=False),
                scratch_array("body_contacts.fused_pos", (N, B), t.vec3, model.device, zero=False), out], **kw)
            return out
        body_rot = scratch_array("body_contacts.body_rot", (N, B), t.mat33, model.device, zero=False)
        body_pos = scratch_array("body_contacts.body_pos", (N, B), t.vec3, model.device, zero=False)
        dof = [scratch_array(f"body_contacts.dof{i}", (N, model.nv), t.vec3, model.device, zero=False)
               for i in range(2)]
        shape_gap = scratch_array("body_contacts.shape_gap", (N, S), model.dtype, model.device, zero=False)
        argmin = scratch_array("body_contacts.argmin", (N, K), wp.int32, model.device, zero=False)
        wp.launch(base, dim=N, record_tape=False, inputs=[q, body_rot, body_pos, *dof], **kw)
        wp.launch(tree, dim=N, record_tape=False, inputs=[
            q, model.body_parent, model.body_pos0, model.body_rot0, model.joint_axis, body_rot, body_pos, *dof], **kw)
        wp.launch(capsule_gaps, dim=(N, S), record_tape=False, inputs=[
            cd.shape_body, cd.shape_a, cd.shape_b, cd.shape_radius, model.ground_height, *terrain_inputs(model), q,
            body_rot, body_pos, shape_gap], **kw)
        wp.launch(body_min, dim=(N, K), record_tape=False, inputs=[cd.shape_start, shape_gap, out, argmin], **kw)
        return out
    active = wp._src.context.runtime.tape
    if active is not None and active is not tape:
        raise RuntimeError("body_gaps: another tape is active; pass that tape")
    if active is None:
        with tape:
            return body_gaps(model, q, tape, out)

    def make(name, shape, dtype, grad):  # a taped call keeps its own intermediates
        return wp.zeros(shape, dtype=dtype, requires_grad=grad, **kw)

    body_rot = make("body_rot", (N, B), t.mat33, True)
    body_pos = make("body_pos", (N, B), t.vec3, True)
    dof_ang = make("dof_ang", (N, model.nv), t.vec3, True)
    dof_lin = make("dof_lin", (N, model.nv), t.vec3, True)
    shape_gap = make("shape_gap", (N, S), model.dtype, True)
    argmin = make("argmin", (N, K), wp.int32, False)
    if out is None:
        out = wp.empty((N, K), dtype=model.dtype, requires_grad=True, **kw)
    wp.launch(base, dim=N, inputs=[q, body_rot, body_pos, dof_ang, dof_lin], **kw)
    wp.launch(tree, dim=N, record_tape=False, inputs=[
        q, model.body_parent, model.body_pos0, model.body_rot0, model.joint_axis, body_rot, body_pos, dof_ang,
        dof_lin], **kw)

    def tree_backward() -> None:
        q_grad, _ = input_grad("body_contacts.kinematics", q)
        wp.launch(tree_adjoint, dim=N, record_tape=False, inputs=[
            q, model.body_parent, model.body_pos0, model.body_rot0, model.joint_axis, body_rot, body_pos,
            body_rot.grad, body_pos.grad, dof_ang.grad, dof_lin.grad, q_grad], **kw)

    tape.record_func(backward=tree_backward, arrays=[])
    wp.launch(capsule_gaps, dim=(N, S), inputs=[
        cd.shape_body, cd.shape_a, cd.shape_b, cd.shape_radius, model.ground_height, *terrain_inputs(model), q,
        body_rot, body_pos, shape_gap], **kw)
    wp.launch(body_min, dim=(N, K), record_tape=False, inputs=[cd.shape_start, shape_gap, out, argmin], **kw)

    def min_backward() -> None:
        grad = output_grad("body_contacts", "body_gap", out)
        wp.launch(body_min_adjoint, dim=N, record_tape=False, inputs=[argmin, grad, shape_gap.grad], **kw)

    tape.record_func(backward=min_backward, arrays=[])
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
