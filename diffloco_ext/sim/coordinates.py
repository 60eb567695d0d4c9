"""Where things sit in the generalised coordinates ``q``, velocities ``u`` and contact rows, as Warp functions
that kernels and host code both call (the conventions of :mod:`.model`).

* ``q`` [nq = 7 + n]: base position (world, m) at 0..2, base quaternion (w, x, y, z) at 3..6, joint ``j``'s
  angle at ``q_of_joint(j) = 7 + j``;
* ``u`` [nv = 6 + n]: base linear velocity (world) at 0..2, base angular velocity (base frame) at 3..5, joint
  ``j``'s velocity at ``dof_of_joint(j) = 6 + j``;
* body ``b >= 1`` is moved by joint ``b - 1``: its coordinate is ``q_of_body(b) = 6 + b``, its DOF
  ``dof_of_body(b) = 5 + b`` (the base, body 0, owns DOFs 0..5; ``body_of_dof`` is the inverse);
* contact rows: foot ``f``'s normal, first and second tangent are rows ``contact_row(f, 0..2) = 3 f + 0..2``.

The base orientation is stored as (w, x, y, z) in ``q``; Warp quaternions are (x, y, z, w):
:func:`base_funcs` is the one place that converts between the two (and reads the base's entries of ``q``
and ``u``).
"""

import functools

import warp as wp

from .warp_setup import warp_types

#: Leading entries of ``q`` (base position, base quaternion) and of ``u`` (base linear, angular velocity).
BASE_COORDS = wp.constant(7)
BASE_DOFS = wp.constant(6)


@wp.func
def q_of_joint(j: int):
    """Index in ``q`` of joint ``j``'s angle."""
    return BASE_COORDS + j


@wp.func
def dof_of_joint(j: int):
    """Index in ``u`` (and in H's rows) of joint ``j``'s velocity."""
    return BASE_DOFS + j


@wp.func
def q_of_body(b: int):
    """Index in ``q`` of the angle of the joint that moves body ``b >= 1``."""
    return BASE_COORDS - 1 + b


@wp.func
def dof_of_body(b: int):
    """Index in ``u`` of the DOF of the joint that moves body ``b >= 1``."""
    return BASE_DOFS - 1 + b


@wp.func
def body_of_dof(k: int):
    """The body DOF ``k`` moves: the base (0) for the six base DOFs, else the body of its joint."""
    return wp.max(k - (BASE_DOFS - 1), 0)


@wp.func
def contact_row(f: int, r: int):
    """Row of foot ``f``'s contact direction ``r`` (0 normal, 1 and 2 tangents) in J, G and the impulses."""
    return 3 * f + r


@functools.cache
def base_funcs(dtype):
    """``(base_position, base_quat, store_base_quat, base_linear_velocity, base_angular_velocity)`` of env ``e``:
    the base position ``q[e, 0:3]`` (world, m); its orientation ``q[e, 3:7]`` = (w, x, y, z) as a Warp quaternion
    (x, y, z, w), not normalised; a Warp quaternion written back into ``q_out``'s (w, x, y, z) slots; the base's
    linear velocity ``u[e, 0:3]`` (world, m/s) and angular velocity ``u[e, 3:6]`` (base frame, rad/s)."""
    t = warp_types(dtype)
    vec3, quat = t.vec3, t.quat

    @wp.func
    def base_position(q: wp.array2d(dtype=dtype), e: int):
        return vec3(q[e, 0], q[e, 1], q[e, 2])

    @wp.func
    def base_quat(q: wp.array2d(dtype=dtype), e: int):
        return quat(q[e, 4], q[e, 5], q[e, 6], q[e, 3])

    @wp.func
    def store_base_quat(q_out: wp.array2d(dtype=dtype), e: int, rot: quat):
        q_out[e, 3] = rot[3]
        q_out[e, 4] = rot[0]
        q_out[e, 5] = rot[1]
        q_out[e, 6] = rot[2]
        return 0

    @wp.func
    def base_linear_velocity(u: wp.array2d(dtype=dtype), e: int):
        return vec3(u[e, 0], u[e, 1], u[e, 2])

    @wp.func
    def base_angular_velocity(u: wp.array2d(dtype=dtype), e: int):
        return vec3(u[e, 3], u[e, 4], u[e, 5])

    return base_position, base_quat, store_base_quat, base_linear_velocity, base_angular_velocity


@functools.cache
def contact_funcs(dtype):
    """``(foot_rows, foot_vector)``: column ``k`` of foot ``f``'s three contact rows of ``J`` [N, 3F, nv], and
    foot ``f``'s three entries of a [N, 3F, 1] column (impulses, contact-point velocities), each as a vec3."""
    vec3 = warp_types(dtype).vec3

    @wp.func
    def foot_rows(J: wp.array3d(dtype=dtype), e: int, f: int, k: int):
        return vec3(J[e, contact_row(f, 0), k], J[e, contact_row(f, 1), k], J[e, contact_row(f, 2), k])

    @wp.func
    def foot_vector(a: wp.array3d(dtype=dtype), e: int, f: int):
        return vec3(a[e, contact_row(f, 0), 0], a[e, contact_row(f, 1), 0], a[e, contact_row(f, 2), 0])

    return foot_rows, foot_vector
