"""The intermediates of one simulator step, declared with their shape, dtype and lifetime rules.

Every field is declared by :func:`intermediate`: its shape (from the model's sizes), its element type, whether
it must start at zero (a stage adds into it or writes it in part) and whether a gradient flows through it (the
``values_only`` ones are read by hand-written reverse passes only, so a taped step keeps their values and
nothing else). Allocation, zeroing of the reused buffers, gradient attachment and ``nbytes`` all iterate these
declarations: there is no list of names elsewhere deciding them.

Shapes use ``N`` envs, ``B`` bodies, ``n`` joints, ``nv`` DOFs, ``nq`` coordinates, ``F`` feet, ``C = 3F``
contact rows, ``I`` Gauss-Seidel iterations.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

import warp as wp

from .scratch import scratch_array
from .warp_setup import warp_types


@dataclass(frozen=True)
class Sizes:
    N: int
    B: int
    n: int
    nv: int
    nq: int
    F: int
    I: int  # noqa: E741 - Gauss-Seidel iterations

    @property
    def C(self) -> int:
        return 3 * self.F


def intermediate(shape: Callable[[Sizes], tuple], dtype: str = "scalar", *, zero: bool = False,
                 values_only: bool = False, doc: str = ""):
    """A step intermediate: ``shape(sizes)``; ``dtype`` one of ``"scalar"``, ``"vec3"``, ``"mat33"``,
    ``"int32"`` (int32 fields never take a gradient); ``zero``: allocated zeroed and zeroed before each reuse;
    ``values_only``: no gradient array."""
    if dtype not in ("scalar", "vec3", "mat33", "int32"):
        raise ValueError(f"unknown intermediate dtype '{dtype}'")
    return field(metadata={"shape": shape, "dtype": dtype, "zero": zero,
                           "grad": not values_only and dtype != "int32", "doc": doc})


def _element_type(model, name: str):
    t = warp_types(model.dtype)
    return {"scalar": model.dtype, "vec3": t.vec3, "mat33": t.mat33, "int32": wp.int32}[name]


class _Group:
    """Allocation and bookkeeping by the field declarations (shared by the groups below)."""

    @classmethod
    def allocate(cls, model, sizes: Sizes, requires_grad: bool = False, **groups):
        arrays = {}
        for f in dataclasses.fields(cls):
            meta = f.metadata
            if "shape" not in meta:
                continue
            factory = wp.zeros if meta["zero"] else wp.empty
            arrays[f.name] = factory(meta["shape"](sizes), dtype=_element_type(model, meta["dtype"]),
                                     device=model.device, requires_grad=requires_grad and meta["grad"])
        return cls(**arrays, **groups)

    def _arrays(self):
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, _Group):
                yield from value._arrays()
            elif isinstance(value, wp.array) and "shape" in f.metadata:
                yield f, value

    def zero_accumulators(self) -> None:
        """Zero the fields declared ``zero`` (before a reused buffer's next step; the list is found once)."""
        zero = self.__dict__.get("_zero_arrays")
        if zero is None:
            zero = self.__dict__["_zero_arrays"] = [v for f, v in self._arrays() if f.metadata["zero"]]
        for value in zero:
            value.zero_()

    def attach_gradients(self) -> None:
        """Give every intermediate a gradient flows through, and that has none yet, a zeroed gradient array from
        memory shared by all steps (:mod:`.scratch`): a taped step keeps only its values, and the reverse pass of
        each step, which calls this first, reuses the same gradient memory."""
        for f, value in self._arrays():
            if f.metadata["grad"] and value.grad is None:
                value.grad = scratch_array(f"step_gradient.{f.name}", value.shape, value.dtype, value.device)

    def nbytes(self) -> int:
        """Bytes held by the arrays and their gradient arrays."""
        return sum(v.capacity + (v.grad.capacity if v.grad is not None else 0) for _, v in self._arrays())


@dataclass
class KinematicsData(_Group):
    """Forward kinematics and body velocities of one state (:mod:`.kinematics`); world orientation, about the
    base origin."""

    body_rot: wp.array = intermediate(lambda s: (s.N, s.B), "mat33", doc="body rotations")
    body_pos: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="body positions (m)")
    dof_ang: wp.array = intermediate(lambda s: (s.N, s.nv), "vec3", doc="motion subspace, angular part")
    dof_lin: wp.array = intermediate(lambda s: (s.N, s.nv), "vec3", doc="motion subspace, linear part")
    body_vel_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="body angular velocities (rad/s)")
    body_vel_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="body velocities at the origin (m/s)")


@dataclass
class ContactData(_Group):
    """Contact intermediates of one step (:mod:`.contact`, :mod:`.contact_velocity`, :mod:`.delassus`,
    :mod:`.gauss_seidel`)."""

    gap: wp.array = intermediate(lambda s: (s.N, s.F), doc="signed gap of each foot at the midpoint (m)")
    frame: wp.array = intermediate(lambda s: (s.N, s.F, 3), "vec3", doc="normal, tangent 1, tangent 2")
    J: wp.array = intermediate(lambda s: (s.N, s.C, s.nv), zero=True, doc="contact rows (a foot's path only)")
    u_free: wp.array = intermediate(lambda s: (s.N, s.nv), doc="velocity after the step without impulses")
    c: wp.array = intermediate(lambda s: (s.N, s.C, 1), doc="contact-point velocity without impulses (m/s)")
    W: wp.array = intermediate(lambda s: (s.N, s.nv, s.F), "vec3", zero=True, values_only=True,
                               doc="L^-T J^T, a foot's three rows in one vec3")
    G: wp.array = intermediate(lambda s: (s.N, s.C, s.C), doc="Delassus matrix")
    weight: wp.array = intermediate(lambda s: (s.N, s.F), values_only=True, doc="smoothing weight / contact state")
    target: wp.array = intermediate(lambda s: (s.N, s.F), "vec3", values_only=True,
                                    doc="free contact velocity with stabilisation (m/s)")
    history: wp.array = intermediate(lambda s: (s.N, s.I + 1, s.F), "vec3", values_only=True, doc="PGS iterates")
    residual: wp.array = intermediate(lambda s: (s.N, s.I, s.F), "vec3", values_only=True,
                                      doc="PGS residuals (written when taped)")
    impulse: wp.array = intermediate(lambda s: (s.N, s.C, 1), doc="impulses in the contact frames (N s)")
    du_contact: wp.array = intermediate(lambda s: (s.N, s.nv, 1), values_only=True,
                                        doc="velocity change of the impulses")
    force: wp.array = intermediate(lambda s: (s.N, s.F), "vec3", doc="mean contact force over the step (N, world)")


@dataclass
class StepData(_Group):
    """Intermediate results of one step, kept per step for its backward pass (stage modules name them)."""

    kin: KinematicsData
    q_mid: wp.array = intermediate(lambda s: (s.N, s.nq), doc="midpoint coordinates")
    inertia_m: wp.array = intermediate(lambda s: (s.N, s.B), doc="body masses (kg)")
    inertia_h: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", doc="first moments about the origin")
    inertia_J: wp.array = intermediate(lambda s: (s.N, s.B), "mat33", doc="rotational inertias about the origin")
    composite_m: wp.array = intermediate(lambda s: (s.N, s.B), values_only=True)
    composite_h: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    composite_J: wp.array = intermediate(lambda s: (s.N, s.B), "mat33", values_only=True)
    H: wp.array = intermediate(lambda s: (s.N, s.nv, s.nv), zero=True, doc="joint-space mass matrix (CRBA)")
    L: wp.array = intermediate(lambda s: (s.N, s.nv, s.nv), values_only=True,
                               doc="tree-sparse factor of H + dt diag(implicit damping)")
    body_acc_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    body_acc_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    body_force_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    body_force_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    subtree_force_ang: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    subtree_force_lin: wp.array = intermediate(lambda s: (s.N, s.B), "vec3", values_only=True)
    bias: wp.array = intermediate(lambda s: (s.N, s.nv), doc="bias forces (RNEA)")
    drive_branch: wp.array = intermediate(lambda s: (s.N, s.n), "int32", zero=True,
                                          doc="envelope piece of each drive over the step (actuators codes)")
    tau_start: wp.array = intermediate(lambda s: (s.N, s.n), doc="drive torque of the piece at the start velocity")
    implicit_damping: wp.array = intermediate(lambda s: (s.N, s.n), values_only=True,
                                              doc="slope b of the speed line taken implicitly (N m s/rad)")
    invalid_control: wp.array = intermediate(lambda s: (s.N,), "int32", zero=True,
                                             doc="non-finite joint target or feed-forward torque")
    rhs: wp.array = intermediate(lambda s: (s.N, s.nv, 1), doc="impulse of the smooth forces over the step")
    du: wp.array = intermediate(lambda s: (s.N, s.nv, 1), doc="velocity change without contact")
    u_new: wp.array = intermediate(lambda s: (s.N, s.nv), doc="end-of-step velocity before the guard")
    tau: wp.array = intermediate(lambda s: (s.N, s.n), doc="drive torque applied during the step (N m)")
    q_new: wp.array = intermediate(lambda s: (s.N, s.nq), doc="end-of-step coordinates before the guard")
    diverged: wp.array = intermediate(lambda s: (s.N,), "int32", zero=True, doc="the env diverged and was held")
    contact: ContactData | None = None
    body_gap: wp.array | None = None  # [N, K] collision-body gaps at the end-of-step state (m), values only

    @classmethod
    def allocate(cls, model, requires_grad: bool = False, contact=None) -> "StepData":
        sizes = Sizes(N=model.num_envs, B=model.num_bodies, n=model.num_joints, nv=model.nv, nq=model.nq,
                      F=model.num_feet, I=contact.iterations if contact is not None else 0)
        with_contact = contact is not None and contact.mode != "none" and model.num_feet > 0
        return super().allocate(
            model, sizes, requires_grad, kin=KinematicsData.allocate(model, sizes, requires_grad),
            contact=ContactData.allocate(model, sizes, requires_grad) if with_contact else None)
