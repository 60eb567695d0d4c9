"""Stage: the Delassus matrix ``G = J H^-1 J^T`` through the tree-sparse factor, with a hand-written adjoint.

With ``H = L^T L`` (see :mod:`.cholesky`), ``G = W^T W`` where ``W = L^-T J^T``. A contact row of a foot only
involves the DOFs on the foot's path to the root (its leg and the base), and ``L^-T`` keeps that support, so
each column of ``W`` is computed along that path only and each entry of ``G`` is a dot product over it: a few
hundred operations per environment instead of a dense solve with every contact row as right-hand side.

Backward pass (``Y = H^-1 J^T = L^-1 W``, computed only there): for ``G = J H^-1 J^T``, with
``T = (G_bar + G_bar^T) Y^T``,

    J_bar += T          H_bar -= Y G_bar Y^T, taken symmetrised: Y T / 2

(a symmetric ``H_bar`` gives the same gradient upstream, see :mod:`.cholesky`). The two dense products are
batched torch products on zero-copy views of the Warp arrays.

:func:`impulse_response` reuses ``W`` for the velocity after the contact impulses,
``u_E = u_free + H^-1 J^T P = u_free + L^-1 W P``.
"""

import functools

import torch
import warp as wp

from .cholesky import as_rows, cholesky_funcs, outer_update_func
from .adjoint import has_grad, input_grad, output_grad
from .scratch import scratch_array
from .warp_setup import warp_types


@functools.cache
def delassus_kernels(dtype, nv: int):
    vec3 = warp_types(dtype).vec3
    mat33 = warp_types(dtype).mat33
    row = wp.types.vector(nv, dtype)
    _solve_in_place = cholesky_funcs(dtype)
    _subtract_outer = outer_update_func(dtype, nv)

    @wp.kernel(enable_backward=False)
    def half_solve_gram(
        L: wp.array3d(dtype=dtype),
        foot_path_start: wp.array(dtype=wp.int32),
        foot_path: wp.array(dtype=wp.int32),
        J: wp.array3d(dtype=dtype),
        W: wp.array3d(dtype=vec3),
        G: wp.array3d(dtype=dtype),
    ):
        """``W = L^-T J^T`` along each foot's root path, the foot's three contact rows side by side in a vec3
        (``W`` [N, nv, F], zeroed elsewhere), then ``G = W^T W`` block by block, each symmetric pair of blocks
        written from one value."""
        e = wp.tid()
        num_feet = W.shape[2]
        for f in range(num_feet):
            start = foot_path_start[f]
            end = foot_path_start[f + 1]
            for p in range(start, end):
                k = foot_path[p]
                W[e, k, f] = vec3(J[e, 3 * f, k], J[e, 3 * f + 1, k], J[e, 3 * f + 2, k])
            for p in range(start, end):  # the path runs leaf to root: descendants first, as L^T needs
                k = foot_path[p]
                y = W[e, k, f] / L[e, k, k]
                W[e, k, f] = y
                for p2 in range(p + 1, end):  # the rest of the path: exactly k's ancestors
                    i = foot_path[p2]
                    W[e, i, f] = W[e, i, f] - y * L[e, k, i]
        for fa in range(num_feet):
            for fb in range(fa, num_feet):
                block = mat33()
                for p in range(foot_path_start[fa], foot_path_start[fa + 1]):
                    k = foot_path[p]
                    block = block + wp.outer(W[e, k, fa], W[e, k, fb])
                for r in range(3):
                    for c in range(3):
                        G[e, 3 * fa + r, 3 * fb + c] = block[r, c]
                        G[e, 3 * fb + c, 3 * fa + r] = block[r, c]

    @wp.kernel(enable_backward=False)
    def impulse_response(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                         foot_path_start: wp.array(dtype=wp.int32), foot_path: wp.array(dtype=wp.int32),
                         W: wp.array3d(dtype=vec3), P: wp.array3d(dtype=dtype), u_free: wp.array2d(dtype=dtype),
                         du: wp.array3d(dtype=dtype), u_out: wp.array2d(dtype=dtype)):
        """``du = H^-1 J^T P = L^-1 (W P)`` (the path-sparse ``W P``, then one solve with ``L``, ancestors first)
        and ``u_out = u_free + du``."""
        e = wp.tid()
        n = L.shape[1]
        for k in range(n):
            du[e, k, 0] = dtype(0.0)
        for f in range(W.shape[2]):
            pf = vec3(P[e, 3 * f, 0], P[e, 3 * f + 1, 0], P[e, 3 * f + 2, 0])
            for p in range(foot_path_start[f], foot_path_start[f + 1]):
                k = foot_path[p]
                du[e, k, 0] = du[e, k, 0] + wp.dot(W[e, k, f], pf)
        for k in range(n):
            s = du[e, k, 0]
            i = dof_parent[k]
            while i != -1:
                s = s - L[e, k, i] * du[e, i, 0]
                i = dof_parent[i]
            dk = s / L[e, k, k]
            du[e, k, 0] = dk
            u_out[e, k] = u_free[e, k] + dk

    @wp.kernel(enable_backward=False)
    def impulse_response_adjoint(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                                 foot_path_start: wp.array(dtype=wp.int32), foot_path: wp.array(dtype=wp.int32),
                                 J: wp.array3d(dtype=dtype), P: wp.array3d(dtype=dtype),
                                 du: wp.array(dtype=row), u_out_grad: wp.array2d(dtype=dtype),
                                 b_bar: wp.array3d(dtype=dtype), u_free_grad: wp.array2d(dtype=dtype),
                                 P_grad: wp.array3d(dtype=dtype), J_grad: wp.array3d(dtype=dtype),
                                 H_grad: wp.array2d(dtype=row), has_free: int, has_P: int, has_J: int,
                                 has_H: int):
        """For one environment: ``b_bar = H^-1 u_out_bar`` (scratch), ``u_free_bar += u_out_bar``,
        ``P_bar += J b_bar`` and ``J_bar += P b_bar^T`` along the foot paths (``J``'s other entries are structural
        zeros), ``H_bar -= b_bar du^T`` (``du`` and ``H_grad`` as rows, see :mod:`.cholesky`)."""
        e = wp.tid()
        n = L.shape[1]
        for k in range(n):
            g = u_out_grad[e, k]
            b_bar[e, k, 0] = g
            if has_free != 0:
                u_free_grad[e, k] = u_free_grad[e, k] + g
        _solve_in_place(L, dof_parent, b_bar, e)
        for f in range(foot_path_start.shape[0] - 1):
            pf = vec3(P[e, 3 * f, 0], P[e, 3 * f + 1, 0], P[e, 3 * f + 2, 0])
            acc = vec3()
            for p in range(foot_path_start[f], foot_path_start[f + 1]):
                k = foot_path[p]
                bk = b_bar[e, k, 0]
                acc = acc + vec3(J[e, 3 * f, k], J[e, 3 * f + 1, k], J[e, 3 * f + 2, k]) * bk
                if has_J != 0:
                    J_grad[e, 3 * f, k] = J_grad[e, 3 * f, k] + pf[0] * bk
                    J_grad[e, 3 * f + 1, k] = J_grad[e, 3 * f + 1, k] + pf[1] * bk
                    J_grad[e, 3 * f + 2, k] = J_grad[e, 3 * f + 2, k] + pf[2] * bk
            if has_P != 0:
                P_grad[e, 3 * f, 0] = P_grad[e, 3 * f, 0] + acc[0]
                P_grad[e, 3 * f + 1, 0] = P_grad[e, 3 * f + 1, 0] + acc[1]
                P_grad[e, 3 * f + 2, 0] = P_grad[e, 3 * f + 2, 0] + acc[2]
        if has_H != 0:
            _subtract_outer(H_grad, b_bar, du, e)

    return half_solve_gram, impulse_response, impulse_response_adjoint


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


def delassus(H: wp.array, L: wp.array, dof_parent: wp.array, foot_path_start: wp.array, foot_path: wp.array,
             J: wp.array, W: wp.array, G: wp.array, tape: wp.Tape | None = None) -> None:
    """``G = J H^-1 J^T`` [N, C, C] for contact rows ``J`` [N, C = 3F, nv] (``W`` [N, nv, F] vec3, zeroed
    scratch)."""
    half_solve_gram = delassus_kernels(H.dtype, H.shape[1])[0]
    N, C, nv = J.shape
    wp.launch(half_solve_gram, dim=N, inputs=[L, foot_path_start, foot_path, J, W, G], device=J.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        G_grad = output_grad("delassus", "G", G)
        lower_solve = lower_solve_kernel(H.dtype, C)
        row = wp.types.vector(C, H.dtype)
        W_rows = W.view(H.dtype).reshape((N, nv, C)).view(row)  # [N, nv, F] vec3 as [N, nv] rows, same memory
        Y = scratch_array("delassus.Y", (N, nv), row, J.device, zero=False)
        wp.launch(lower_solve, dim=N, inputs=[L, dof_parent, W_rows, Y], device=J.device, record_tape=False)
        Y_t = wp.to_torch(Y).reshape(N, nv, C)
        G_bar = wp.to_torch(G_grad)
        G_sym = wp.to_torch(scratch_array("delassus.G_sym", (N, C, C), H.dtype, J.device, zero=False))
        T = wp.to_torch(scratch_array("delassus.T", (N, C, nv), H.dtype, J.device, zero=False))
        torch.add(G_bar, G_bar.transpose(1, 2), out=G_sym)
        torch.bmm(G_sym, Y_t.transpose(1, 2), out=T)
        if has_grad(J):
            wp.to_torch(J.grad).add_(T)
        if has_grad(H):
            # -Y G_bar Y^T symmetrised (same gradient upstream, see :mod:`.cholesky`)
            wp.to_torch(H.grad).baddbmm_(Y_t, T, alpha=-0.5)

    tape.record_func(backward=backward, arrays=[])


def impulse_response(H: wp.array, L: wp.array, dof_parent: wp.array, foot_path_start: wp.array,
                     foot_path: wp.array, J: wp.array, W: wp.array, P: wp.array, u_free: wp.array, du: wp.array,
                     u_out: wp.array, tape: wp.Tape | None = None) -> None:
    """Velocity change ``du = H^-1 J^T P`` [N, nv, 1] of contact impulses ``P`` [N, C, 1], reusing ``W`` from
    :func:`delassus`, and the velocity after the impulses ``u_out = u_free + du`` [N, nv]. Backward
    (``b_bar = H^-1 u_out_bar``): ``u_free_bar += u_out_bar``, ``P_bar += J b_bar``, ``J_bar += P b_bar^T``,
    ``H_bar -= b_bar du^T`` as one row-vector update per row of ``H`` (dense rank-one, see :mod:`.cholesky`)."""
    forward, adjoint = delassus_kernels(H.dtype, H.shape[1])[1:]
    N = J.shape[0]
    wp.launch(forward, dim=N, inputs=[L, dof_parent, foot_path_start, foot_path, W, P, u_free, du, u_out],
              device=J.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        u_out_grad = output_grad("impulse_response", "u_out", u_out)
        b_bar = scratch_array("impulse_response.b_bar", du.shape, du.dtype, du.device, zero=False)
        ins = [input_grad(f"impulse_response.{name}", a) for name, a in (("u_free", u_free), ("P", P), ("J", J), ("H", H))]
        (u_free_grad, _), (P_grad, _), (J_grad, _), (H_grad, _) = ins
        wp.launch(adjoint, dim=N, device=J.device, record_tape=False, inputs=[
            L, dof_parent, foot_path_start, foot_path, J, P, as_rows(du), u_out_grad, b_bar,
            u_free_grad, P_grad, J_grad, as_rows(H_grad), *(h for _, h in ins)])

    tape.record_func(backward=backward, arrays=[])
