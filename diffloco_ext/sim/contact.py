"""Foot-ground contact: the contact model's settings (:class:`ContactParams`) and the contact geometry stage
(candidates, signed gaps, contact frames, Jacobian rows). The contact stages of a step, in order: the geometry
(here), the contact-point velocities (:mod:`.contact_velocity`), the Delassus matrix (:mod:`.delassus`), the
solve for the impulses and forces (:mod:`.gauss_seidel`, which describes it) and the impulses' velocity change
(:mod:`.impulse_response`).

One solver, three modes chosen per simulation (``ContactParams.mode``), sharing the geometry, the Jacobian and
the velocity update ``u_E = u_A + H'^-1 (rhs + J^T P)`` (``H'``, ``rhs``: the step's shifted mass matrix and
impulse of the smooth forces, :mod:`.cholesky`, :mod:`.actuators`):

* ``"smoothed"`` (Schwarke et al., arXiv 2404.02887): every contact's influence weighted by
  ``sigma(g) = 1 / (1 + exp(kappa g))`` of its signed gap ``g`` (m). Contacts farther than ``col_height`` above the
  ground get ``sigma = 0``. ``kappa`` (1/m) is read at every step: change it freely.
* ``"hard"``: ``sigma`` the step function (1 for ``g <= 0``, else 0), plus a stabilisation that removes
  penetration beyond a small slop (see :class:`ContactParams`).
* ``"soft"``: penalty spring-damper ``f_n = k_p (-g) - k_d v_n`` for ``g < 0`` with regularised Coulomb friction
  ``f_t = -k_f v_t`` capped at ``mu f_n``, taken implicitly (at the end-of-step velocity, so it is stable at any
  ``dt``): the same solve with a compliance on the diagonal; weights are the step function.

Ground: the model's terrain (:mod:`.terrain`): by default a horizontal plane per environment at height
``ground_height`` (m), contact frame the world ``(z, x, y)``; or a height field shared by all environments, whose
tangent plane below the foot sphere's centre gives the normal and the gap (the solver is unchanged).
"""

import functools
import math
from dataclasses import dataclass

import warp as wp

from .adjoint import launch
from .coordinates import base_funcs, contact_row, dof_of_body
from .stage_data import StageData, intermediate, kernel_types
from .terrain import terrain_funcs
from .warp_setup import warp_types

CONTACT_MODES = ("smoothed", "hard", "soft", "none")
_MODE_ID = {"smoothed": 0, "hard": 1}


@dataclass
class ContactParams:
    """Contact model settings (SI units), validated whenever a field is set.

    Every assignment re-checks the whole set (``params.kappa = -300`` raises, and the old value stays), so a
    simulator that reads these settings at every step never runs with an invalid one. ``stabilization`` left at
    ``None`` follows the mode (:attr:`effective_stabilization`), so ``params.mode = "hard"`` gets hard contact's
    default, exactly as a fresh ``ContactParams("hard")`` would.

    Attributes:
        mode: ``"smoothed"``, ``"hard"``, ``"soft"`` or ``"none"``.
        kappa: Sigmoid sharpness of smoothed contact (1/m), > 0. Changeable between steps.
        iterations: Projected Gauss-Seidel iterations (fixed count, >= 1: the unrolled solve is differentiated).
        col_height: Candidates farther than this above the ground get no impulse (m), >= 0.
        soft_stiffness: Penalty normal stiffness k_p (N/m), > 0.
        soft_damping: Penalty normal damping k_d on the approach velocity (N s/m), >= 0.
        soft_friction_damping: Friction damping k_f of the regularised Coulomb law (N s/m), > 0.
        stabilization: Fraction of a penetration removed per step (Baumgarte-style): a penetrating contact
            (gap ``g < 0``) asks for a separating normal velocity ``-stabilization * g / dt``. It bounds the
            penetration that a fixed, finite number of Gauss-Seidel iterations would otherwise let drift.
            ``None``: 0.2 in hard mode, 0 in smoothed mode (smoothed contact stands where ``sigma ~ 1``, below
            the surface: pushing it back to ``g = 0``, where ``sigma = 0.5``, halves friction and the robot slips).
        relaxation: Over-relaxation of the Gauss-Seidel steps (1 = plain Gauss-Seidel), in (0, 2).
        slop: Penetration the stabilisation leaves in place (m): it pushes towards ``g = -slop``, so a resting
            contact stays active instead of flickering on and off at ``g = 0`` (which lets feet creep).
        max_push_speed: Cap on the separating velocity the stabilisation asks for (m/s): a deep penetration
            after a fast impact is removed over several steps instead of bouncing the body off the ground.
        surrogate_kappa: Hard mode only: the sharpness (1/m) of a surrogate gradient through the contact's weight,
            >= 0. The forward solve stays hard contact's (weight = step(g)); the reverse sweep takes the weight's
            derivative as that of ``sigma(g) = 1 / (1 + exp(surrogate_kappa g))`` (a straight-through estimator,
            in the spirit of Song et al.'s (arXiv 2403.14864) accurate forward and simplified backward), so a foot about
            to touch down or lift off gets the smoothed contact's gradient while the trajectory is hard contact's. 0
            (default): the exact gradient of hard contact (none through the weight). Ignored in the other modes and on
            the envs of a soft ground.
        smooth_soft_grounds: Smoothed mode only: the envs on a soft ground (``model.contact_soft_stiffness`` > 0)
            keep the smoothed weight ``sigma(g)`` on their spring (True), so that the spring's gradient sees a foot
            before it touches down, instead of soft contact's step (False, default: exactly soft contact there).
    """

    mode: str = "smoothed"
    kappa: float = 300.0
    iterations: int = 10
    col_height: float = 0.1
    soft_stiffness: float = 2.0e4
    soft_damping: float = 1.0e3
    soft_friction_damping: float = 1.0e5
    stabilization: float | None = None
    relaxation: float = 1.0
    slop: float = 5.0e-4
    max_push_speed: float = 0.05
    surrogate_kappa: float = 0.0
    smooth_soft_grounds: bool = False

    def __setattr__(self, name: str, value) -> None:
        if name not in self.__dataclass_fields__:
            raise AttributeError(f"ContactParams has no setting '{name}': use one of "
                                 f"{tuple(self.__dataclass_fields__)}")
        initialised = all(f in self.__dict__ for f in self.__dataclass_fields__)
        old = self.__dict__.get(name)
        object.__setattr__(self, name, value)
        if initialised:
            try:
                self.validate()
            except (ValueError, TypeError):
                object.__setattr__(self, name, old)
                raise

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first invalid setting."""
        if self.mode not in CONTACT_MODES:
            raise ValueError(f"unknown contact mode '{self.mode}': use one of {CONTACT_MODES}")
        if isinstance(self.iterations, bool) or not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"iterations must be an integer >= 1, got {self.iterations!r}")
        checks = (("kappa", lambda x: x > 0, "> 0"), ("col_height", lambda x: x >= 0, ">= 0"),
                  ("soft_stiffness", lambda x: x > 0, "> 0"), ("soft_damping", lambda x: x >= 0, ">= 0"),
                  ("soft_friction_damping", lambda x: x > 0, "> 0"), ("relaxation", lambda x: 0 < x < 2, "in (0, 2)"),
                  ("slop", lambda x: x >= 0, ">= 0"), ("max_push_speed", lambda x: x > 0, "> 0"),
                  ("surrogate_kappa", lambda x: x >= 0, ">= 0"))
        for name, ok, text in checks:
            value = getattr(self, name)
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or not ok(value)):
                raise ValueError(f"contact setting {name} must be a finite number {text}, got {value!r}")
        if not isinstance(self.smooth_soft_grounds, bool):
            raise ValueError(f"smooth_soft_grounds must be true or false, got {self.smooth_soft_grounds!r}")
        s = self.stabilization
        if s is not None and (isinstance(s, bool) or not isinstance(s, (int, float)) or not 0.0 <= s < 1.0):
            raise ValueError(f"stabilization must be None or in [0, 1), got {s!r}")

    @property
    def effective_stabilization(self) -> float:
        """``stabilization``, or the mode's default when it is ``None`` (0.2 hard, 0 otherwise)."""
        if self.stabilization is not None:
            return float(self.stabilization)
        return 0.2 if self.mode == "hard" else 0.0

    def solver_terms(self, dt: float) -> tuple[int, float, float, float, float, float]:
        """(weight mode, gap rate (1/s), gap offset (m), max push (m/s), normal and tangential compliance (s/kg))."""
        if self.mode == "soft":
            k, d, kf = self.soft_stiffness, self.soft_damping, self.soft_friction_damping
            return 1, k / (k * dt + d), 0.0, 1.0e30, 1.0 / (dt * (k * dt + d)), 1.0 / (dt * kf)
        return _MODE_ID[self.mode], self.effective_stabilization / dt, self.slop, self.max_push_speed, 0.0, 0.0


@dataclass
class ContactGeometryData(StageData):
    """The contact candidates of one step: every foot sphere against the terrain at the step's midpoint."""

    gap: wp.array = intermediate(lambda s: (s.N, s.F), doc="signed gap of each foot (m)")
    frame: wp.array = intermediate(lambda s: (s.N, s.F, 3), "vec3", doc="normal, tangent 1, tangent 2 (world)")
    J: wp.array = intermediate(lambda s: (s.N, s.C, s.nv), zero=True, doc="contact rows (a foot's path only)")


@functools.cache
def contact_geometry_kernel(dtype):
    vec3 = warp_types(dtype).vec3
    zero = dtype(0.0)
    one = dtype(1.0)
    base_position = base_funcs(dtype)[0]
    _terrain_query = terrain_funcs(dtype)  # (kind, ground_height, heights, grid, x) -> tangent plane (d, n)
    T = kernel_types(dtype)

    @wp.func
    def _tangents(n: vec3):
        a = vec3(one, zero, zero)
        if wp.abs(n[0]) > dtype(0.9):
            a = vec3(zero, one, zero)
        t1 = wp.normalize(a - n * wp.dot(a, n))
        return t1, wp.cross(n, t1)

    @wp.kernel
    def contact_geometry(
        # Model:
        model: T.Model,
        # In:
        q_in: wp.array2d(dtype=dtype),
        kin_in: T.Kin,
        # Out (J zeroed):
        geometry_out: T.Geometry,
    ):
        """Signed gap (m), contact frame (normal, tangent 1, tangent 2) and Jacobian rows of foot ``f``
        (differentiated by Warp's tape).

        The gap is the sphere's distance from the terrain's tangent plane ``n . x = height`` below its centre.

        ``J`` [N, 3F, nv] maps ``u`` to the contact point's velocity in the contact frame. It must be zeroed
        (only the foot's root path is written).
        """
        e, f = wp.tid()
        b = model.foot_body[f]
        base = base_position(q_in, e)
        centre = kin_in.body_pos[e, b] + kin_in.body_rot[e, b] * model.foot_offset[f]
        height, n = _terrain_query(model.terrain_kind, model.ground_height[e], model.terrain_heights,
                                   model.terrain_grid, centre + base)
        t1, t2 = _tangents(n)
        radius = model.foot_radius[f]
        r = centre - n * radius
        geometry_out.gap[e, f] = wp.dot(n, centre + base) - radius - height
        geometry_out.frame[e, f, 0] = n
        geometry_out.frame[e, f, 1] = t1
        geometry_out.frame[e, f, 2] = t2
        for k in range(6):
            v = kin_in.dof_lin[e, k] + wp.cross(kin_in.dof_ang[e, k], r)
            geometry_out.J[e, contact_row(f, 0), k] = wp.dot(n, v)
            geometry_out.J[e, contact_row(f, 1), k] = wp.dot(t1, v)
            geometry_out.J[e, contact_row(f, 2), k] = wp.dot(t2, v)
        # The dynamic loop uses names of its own: a local it shared with the unrolled loop above (v, k) would be
        # loop-carried, and Warp's adjoint then replays the wrong value of it (the base columns' normal
        # derivative, which only a non-flat terrain needs, came out wrong).
        for a in range(model.ancestor_start[b], model.ancestor_start[b + 1] + 1):
            body = b
            if a < model.ancestor_start[b + 1]:
                body = model.ancestor_index[a]
            col = dof_of_body(body)
            v_col = kin_in.dof_lin[e, col] + wp.cross(kin_in.dof_ang[e, col], r)
            geometry_out.J[e, contact_row(f, 0), col] = wp.dot(n, v_col)
            geometry_out.J[e, contact_row(f, 1), col] = wp.dot(t1, v_col)
            geometry_out.J[e, contact_row(f, 2), col] = wp.dot(t2, v_col)

    return contact_geometry


def contact_geometry(model, q: wp.array, kin, geometry: ContactGeometryData, tape: wp.Tape | None = None) -> None:
    """Gaps, contact frames and contact rows (J zeroed beforehand) of every foot at ``q`` [N, nq] (the step's
    midpoint) with the kinematics ``kin`` into ``geometry``; recorded on ``tape`` for Warp's automatic adjoint."""
    launch(contact_geometry_kernel(model.dtype), (model.num_envs, model.num_feet),
           [model.arrays, q, kin.values, geometry.values], model.device, tape)
