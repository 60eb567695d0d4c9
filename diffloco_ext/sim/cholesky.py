"""Stage: Cholesky factorisation of H and solves with it, with a hand-written adjoint.

``x = H^-1 b`` is computed as ``L^T L x = b`` (never an explicit inverse), with the tree-sparse factorisation
of a kinematic tree's mass matrix: the factor has non-zeros only where H has them (a DOF and its ancestors),
so the cost grows with the sum of squared depths instead of n^3. Warp's automatic adjoint of the
factorisation loops is unreliable (see ``shared/notes/warp-cpu.md``), so the backward pass is written by hand
and recorded on the tape with ``Tape.record_func``: for ``x = H^-1 b``

    b_bar = H^-1 x_bar          (one more solve with the same factor)
    H_bar = -b_bar x^T          the adjoint for a general (full) H

The factorisation reads only the lower triangle of the symmetric H, so the adjoint of what it computes is this
``H_bar`` folded onto that triangle; both give the same gradient upstream, because the CRBA (the only producer
of H) writes ``H[k, l]`` and ``H[l, k]`` from one value and its adjoint sums ``H_bar[k, l] + H_bar[l, k]``. The
unfolded form is a dense rank-one update, one vector operation per row, where the fold would walk the tree's
pattern entry by entry (2.3 -> 0.4 ms at 4096 envs).

The step factors ``H' = H + dt diag(0, b)``, H shifted on the joint diagonal by the implicit drive damping ``b``
of :mod:`.actuators` (``dt b`` in kg m^2), and solves it for the step's impulse ``rhs``: every later solve with
``L`` (:mod:`.delassus`) solves with ``H'``, and the adjoint above is that of ``H'``. The shift carries no
gradient; since ``dH'/dH = 1``, ``H_bar`` is also the adjoint of the unshifted ``H`` (what the CRBA's reverse
needs).
"""


import functools
from dataclasses import dataclass

import warp as wp

from .actuators import ActuationData
from .adjoint import launch_stage
from .coordinates import BASE_DOFS
from .mass_matrix import MassMatrixData
from .scratch import scratch_array
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input


@dataclass
class SolveData(StageData):
    """The factor of the step's (shifted) mass matrix and the velocity change it gives."""

    L: wp.array = intermediate(lambda s: (s.N, s.nv, s.nv), values_only=True,
                               doc="tree-sparse factor of H + dt diag(0, implicit damping)")
    du: wp.array = intermediate(lambda s: (s.N, s.nv, 1), doc="velocity change without contact")


@functools.cache
def cholesky_funcs(dtype):
    """Device function shared with other stages: the solve with the factor."""

    @wp.func
    def solve_in_place(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                       x: wp.array3d(dtype=dtype), e: int):
        """``x[e] <- (L^T L)^-1 x[e]`` (one column): ``L^T y = x`` descendants first, then ``L x = y``."""
        n = L.shape[1]
        for kk in range(n):
            k = n - 1 - kk
            y = x[e, k, 0] / L[e, k, k]
            x[e, k, 0] = y
            i = dof_parent[k]
            while i != -1:
                x[e, i, 0] = x[e, i, 0] - L[e, k, i] * y
                i = dof_parent[i]
        for k in range(n):
            s = x[e, k, 0]
            i = dof_parent[k]
            while i != -1:
                s = s - L[e, k, i] * x[e, i, 0]
                i = dof_parent[i]
            x[e, k, 0] = s / L[e, k, k]
        return 0

    return solve_in_place


def as_rows(a: wp.array) -> wp.array:
    """Zero-copy view of an [N, n, n] array as [N, n] rows (vectors of n), or of [N, n, 1] as [N]
    (``wp.array.view``)."""
    n = a.shape[1]
    flat = a if a.shape[2] == n else a.reshape((a.shape[0], n))
    return flat.view(wp.types.vector(n, a.dtype))


@functools.cache
def outer_update_func(dtype, n: int):
    """``H_rows[e] -= a[e] b[e]^T`` for ``a`` [N, n, 1] and rows views (:func:`as_rows`) of ``H`` and ``b``: one
    vector operation per row (it vectorises, unlike a walk over the tree's pattern)."""
    row = wp.types.vector(n, dtype)

    @wp.func
    def subtract_outer(H_rows: wp.array2d(dtype=row), a: wp.array3d(dtype=dtype), b: wp.array(dtype=row), e: int):
        be = b[e]
        for k in range(n):
            H_rows[e, k] = H_rows[e, k] - be * a[e, k, 0]
        return 0

    return subtract_outer


@dataclass
class SolveInputs(StageInputs):
    """What the factor-and-solve reads: H, the drives' implicit damping and the step's impulse."""

    mass: MassMatrixData = stage_input(group=MassMatrixData)
    act: ActuationData = stage_input(group=ActuationData)
    dt: float = stage_input("scalar", doc="time step (s)")


@functools.cache
def cholesky_kernels(dtype, n: int):
    _solve_in_place = cholesky_funcs(dtype)
    _subtract_outer = outer_update_func(dtype, n)
    row = wp.types.vector(n, dtype)
    T = kernel_types(dtype)
    In = SolveInputs.struct_type(dtype)

    @wp.kernel(enable_backward=False)
    def factor_and_solve(model: T.Model, inputs: In, outputs: T.Solve):
        """Tree-sparse factor ``H' = L^T L`` of ``H' = H + dt diag(0, b)`` (Featherstone, RBDA §6.5: no fill-in
        beyond the ancestor pattern; ``L[k, i]`` is non-zero only for ``i`` an ancestor of DOF ``k`` or ``i = k``),
        then ``du = H'^-1 rhs``, in one pass over each environment. A non-positive pivot gives NaN (flagged
        downstream by the divergence guard)."""
        e = wp.tid()
        H = inputs.mass.H
        L = outputs.L
        dof_parent = model.dof_parent
        for k in range(n):
            i = k
            while i != -1:
                L[e, k, i] = H[e, k, i]
                i = dof_parent[i]
            if k >= BASE_DOFS:
                L[e, k, k] = L[e, k, k] + inputs.dt * inputs.act.implicit_damping[e, k - BASE_DOFS]
        for kk in range(n):
            k = n - 1 - kk
            d = wp.sqrt(L[e, k, k])
            L[e, k, k] = d
            i = dof_parent[k]
            while i != -1:
                L[e, k, i] = L[e, k, i] / d
                i = dof_parent[i]
            i = dof_parent[k]
            while i != -1:
                j = i
                while j != -1:
                    L[e, i, j] = L[e, i, j] - L[e, k, i] * L[e, k, j]
                    j = dof_parent[j]
                i = dof_parent[i]
        for k in range(n):
            outputs.du[e, k, 0] = inputs.act.rhs[e, k, 0]
        _solve_in_place(L, dof_parent, outputs.du, e)

    @wp.kernel(enable_backward=False)
    def factor_and_solve_adjoint(model: T.Model, inputs: In, outputs: T.Solve, inputs_grad: In, outputs_grad: T.Solve,
                                 du_rows: wp.array(dtype=row), b_bar: wp.array3d(dtype=dtype),
                                 H_grad_rows: wp.array2d(dtype=row)):
        """Adjoint of ``du = H'^-1 rhs`` in one pass: ``b_bar = H'^-1 du_bar`` (working memory), ``rhs_bar +=
        b_bar``, ``H_bar -= b_bar du^T`` (``du`` and ``H_bar`` as rows of the same memory, :func:`as_rows`)."""
        e = wp.tid()
        for k in range(n):
            b_bar[e, k, 0] = outputs_grad.du[e, k, 0]
        _solve_in_place(outputs.L, model.dof_parent, b_bar, e)
        for k in range(n):
            inputs_grad.act.rhs[e, k, 0] = inputs_grad.act.rhs[e, k, 0] + b_bar[e, k, 0]
        _subtract_outer(H_grad_rows, b_bar, du_rows, e)

    return factor_and_solve, factor_and_solve_adjoint


def factor_and_solve(model, mass, act, dt: float, solve: SolveData, tape: wp.Tape | None = None) -> None:
    """Factor ``H' = H + dt diag(0, b)`` (H of ``mass``, the implicit damping ``b`` of ``act``) into ``solve.L``
    and solve ``solve.du = H'^-1 rhs`` for the step's impulse ``act.rhs`` [N, nv, 1]. With a ``tape``, records the
    hand-written adjoint (gradients to ``rhs`` and ``H``; none to the shift)."""
    forward, adjoint = cholesky_kernels(model.dtype, model.nv)

    def working_memory():
        b_bar = scratch_array("cholesky.b_bar", solve.du.shape, solve.du.dtype, model.device, zero=False)
        return [as_rows(solve.du), b_bar, as_rows(mass.grads.H)]

    launch_stage("factor_and_solve", model, [forward], adjoint, SolveInputs(mass=mass, act=act, dt=dt), solve, tape,
                 extra_grads=working_memory)
