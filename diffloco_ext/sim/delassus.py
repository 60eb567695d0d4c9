"""Stage: the Delassus matrix ``G = J H^-1 J^T`` through the tree-sparse factor, with a hand-written adjoint.

With ``H = L^T L`` (see :mod:`.cholesky`), ``G = W^T W`` where ``W = L^-T J^T``. A contact row of a foot only
involves the DOFs on the foot's path to the root (its leg and the base), and ``L^-T`` keeps that support, so
each column of ``W`` is computed along that path only and each entry of ``G`` is a dot product over it: a few
hundred operations per environment instead of a dense solve with every contact row as right-hand side.

Backward pass (``Y = H^-1 J^T = L^-1 W``, computed only there): for ``G = J H^-1 J^T``, with
``T = (G_bar + G_bar^T) Y^T``,

    J_bar += T          H_bar -= Y G_bar Y^T, taken symmetrised: Y T / 2

(a symmetric ``H_bar`` gives the same gradient upstream, see :mod:`.cholesky`). The two dense products run in
one Warp kernel per environment (no host-side work inside the reverse pass, so a taped step's backward can be
recorded and replayed as a graph: :mod:`.taped_replay`).

:mod:`.impulse_response` reuses ``W`` for the velocity after the contact impulses,
``u_E = u_free + H^-1 J^T P = u_free + L^-1 W P``.
"""

import functools
from dataclasses import dataclass

import warp as wp

from .cholesky import SolveData
from .contact import ContactGeometryData
from .coordinates import contact_funcs, contact_row
from .mass_matrix import MassMatrixData
from .scratch import scratch_array
from .stage_data import StageData, StageInputs, intermediate, kernel_types, stage_input
from .warp_setup import warp_types


@dataclass
class DelassusData(StageData):
    """The Delassus matrix of a step's contacts, and the half solve it is built from."""

    W: wp.array = intermediate(lambda s: (s.N, s.nv, s.F), "vec3", zero=True, values_only=True,
                               doc="L^-T J^T, a foot's three rows in one vec3 (zero off the foot's path)")
    G: wp.array = intermediate(lambda s: (s.N, s.C, s.C), doc="Delassus matrix J H'^-1 J^T")


@dataclass
class DelassusInputs(StageInputs):
    """What the Delassus matrix reads: the factor of H' and the contact rows (H itself only for its gradient)."""

    mass: MassMatrixData = stage_input(group=MassMatrixData)
    solve: SolveData = stage_input(group=SolveData)
    geometry: ContactGeometryData = stage_input(group=ContactGeometryData)


@functools.cache
def delassus_kernel(dtype):
    mat33 = warp_types(dtype).mat33
    foot_rows = contact_funcs(dtype)[0]
    T = kernel_types(dtype)
    In = DelassusInputs.struct_type(dtype)

    @wp.kernel(enable_backward=False)
    def half_solve_gram(model: T.Model, inputs: In, outputs: T.Delassus):
        """``W = L^-T J^T`` (``W`` zeroed beforehand) along each foot's root path, the foot's three contact rows
        side by side in a vec3 (``W`` [N, nv, F], zero elsewhere), then ``G = W^T W`` block by block, each
        symmetric pair of blocks written from one value."""
        e = wp.tid()
        L = inputs.solve.L
        W = outputs.W
        path_start = model.foot_path_start
        path = model.foot_path
        num_feet = W.shape[2]
        for f in range(num_feet):
            start = path_start[f]
            end = path_start[f + 1]
            for p in range(start, end):
                k = path[p]
                W[e, k, f] = foot_rows(inputs.geometry.J, e, f, k)
            for p in range(start, end):  # the path runs leaf to root: descendants first, as L^T needs
                k = path[p]
                y = W[e, k, f] / L[e, k, k]
                W[e, k, f] = y
                for p2 in range(p + 1, end):  # the rest of the path: exactly k's ancestors
                    i = path[p2]
                    W[e, i, f] = W[e, i, f] - y * L[e, k, i]
        for fa in range(num_feet):
            for fb in range(fa, num_feet):
                block = mat33()
                for p in range(path_start[fa], path_start[fa + 1]):
                    k = path[p]
                    block = block + wp.outer(W[e, k, fa], W[e, k, fb])
                for r in range(3):
                    for c in range(3):
                        outputs.G[e, contact_row(fa, r), contact_row(fb, c)] = block[r, c]
                        outputs.G[e, contact_row(fb, c), contact_row(fa, r)] = block[r, c]

    return half_solve_gram


@functools.cache
def lower_solve_kernel(dtype, width: int):
    """``Y = L^-1 W`` for ``W``, ``Y`` [N, n] rows of ``width`` entries (all contact columns of a DOF in one vector:
    the solve runs once per environment, vectorised across the columns)."""
    row = wp.types.vector(width, dtype)

    @wp.kernel(enable_backward=False)
    def lower_solve(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32), W: wp.array2d(dtype=row),
                    Y: wp.array2d(dtype=row)):
        e = wp.tid()
        for k in range(L.shape[1]):  # ancestors first
            s = W[e, k]
            i = dof_parent[k]
            while i != -1:
                s = s - Y[e, i] * L[e, k, i]
                i = dof_parent[i]
            Y[e, k] = s / L[e, k, k]

    return lower_solve


@functools.cache
def adjoint_products_kernel(dtype, width: int):
    """The backward pass of :func:`delassus` (module docstring) for ``Y`` [N, nv] rows of ``width = C`` entries:
    with ``G_s = G_bar + G_bar^T`` and ``z_k = G_s Y_k`` (``T``'s column ``k``, kept in ``Z`` [N, nv] rows),
    ``J_bar[:, k] += z_k`` and ``H_bar[a, b] -= Y_a . z_b / 2``."""
    row = wp.types.vector(width, dtype)
    square = wp.types.matrix((width, width), dtype)
    half = dtype(0.5)

    @wp.kernel(enable_backward=False)
    def adjoint_products(G_bar: wp.array3d(dtype=dtype), Y: wp.array2d(dtype=row), Z: wp.array2d(dtype=row),
                         J_bar: wp.array3d(dtype=dtype), H_bar: wp.array3d(dtype=dtype)):
        e = wp.tid()
        nv = Y.shape[1]
        G_s = square()
        for i in range(width):
            for j in range(width):
                G_s[i, j] = G_bar[e, i, j] + G_bar[e, j, i]
        for k in range(nv):
            z = G_s * Y[e, k]
            Z[e, k] = z
            for i in range(width):
                J_bar[e, i, k] = J_bar[e, i, k] + z[i]
        for a in range(nv):
            y = Y[e, a]
            for b in range(nv):
                H_bar[e, a, b] = H_bar[e, a, b] - half * wp.dot(y, Z[e, b])

    return adjoint_products


def delassus(model, mass, solve, geometry, delassus: DelassusData, tape: wp.Tape | None = None) -> None:
    """``G = J H'^-1 J^T`` [N, C, C] into ``delassus`` for the contact rows ``J`` [N, C = 3F, nv] of ``geometry``
    with the factor of ``solve``. The backward pass adds to the gradients of ``J`` and of ``mass``'s ``H``."""
    inputs = DelassusInputs(mass=mass, solve=solve, geometry=geometry)
    args = [model.arrays, inputs.values(model.dtype, reuse=tape is None), delassus.values]
    wp.launch(delassus_kernel(model.dtype), dim=model.num_envs, inputs=args, device=model.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        N, C, nv = geometry.J.shape
        lower_solve = lower_solve_kernel(model.dtype, C)
        row = wp.types.vector(C, model.dtype)
        # W [N, nv, F] vec3 as [N, nv] rows of C, the same memory
        W_rows = delassus.W.view(model.dtype).reshape((N, nv, C)).view(row)
        Y = scratch_array("delassus.Y", (N, nv), row, model.device, zero=False)
        wp.launch(lower_solve, dim=N, inputs=[solve.L, model.dof_parent, W_rows, Y], device=model.device,
                  record_tape=False)
        Z = scratch_array("delassus.Z", (N, nv), row, model.device, zero=False)
        wp.launch(adjoint_products_kernel(model.dtype, C), dim=N,
                  inputs=[delassus.grads.G, Y, Z, geometry.grads.J, mass.grads.H], device=model.device,
                  record_tape=False)

    tape.record_func(backward=backward, arrays=[])
