"""Stage: the Delassus matrix ``G = J H^-1 J^T`` through the tree-sparse factor, with a hand-written adjoint.

With ``H = L^T L`` (see :mod:`.cholesky`), ``G = W^T W`` where ``W = L^-T J^T``. A contact row of a foot only
involves the DOFs on the foot's path to the root (its leg and the base), and ``L^-T`` keeps that support, so
each column of ``W`` is computed along that path only and each entry of ``G`` is a dot product over it: a few
hundred operations per environment instead of a dense solve with every contact row as right-hand side.

Backward pass (``Y = H^-1 J^T``, computed only there): for ``G = J H^-1 J^T``

    J_bar += (G_bar + G_bar^T) Y^T          H_bar -= Y G_bar Y^T   (accumulated on H's lower triangle)

the lower-triangle rule being the one of :mod:`.cholesky` (the factorisation reads only that triangle).

:func:`impulse_response` reuses ``W`` for the velocity change of the contact impulses, ``H^-1 J^T P = L^-1 W P``.
"""

import functools

import torch
import warp as wp

from .cholesky import accumulate_lower, cholesky_kernels
from .warp_setup import warp_types


@functools.cache
def delassus_kernels(dtype):
    vec3 = warp_types(dtype).vec3
    mat33 = warp_types(dtype).mat33

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
        (``W`` [N, nv, F], zeroed elsewhere), then ``G = W^T W`` block by block."""
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
    def lower_solve(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32), W: wp.array3d(dtype=vec3),
                    Y: wp.array3d(dtype=dtype)):
        """``Y[:, 3f:3f+3] = L^-1 W[:, f]`` (ancestors first)."""
        e, f = wp.tid()
        n = L.shape[1]
        for k in range(n):
            s = W[e, k, f]
            i = dof_parent[k]
            while i != -1:
                s = s - vec3(Y[e, i, 3 * f], Y[e, i, 3 * f + 1], Y[e, i, 3 * f + 2]) * L[e, k, i]
                i = dof_parent[i]
            y = s / L[e, k, k]
            Y[e, k, 3 * f] = y[0]
            Y[e, k, 3 * f + 1] = y[1]
            Y[e, k, 3 * f + 2] = y[2]

    @wp.kernel(enable_backward=False)
    def impulse_response(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                         foot_path_start: wp.array(dtype=wp.int32), foot_path: wp.array(dtype=wp.int32),
                         W: wp.array3d(dtype=vec3), P: wp.array3d(dtype=dtype), du: wp.array3d(dtype=dtype)):
        """``du = H^-1 J^T P = L^-1 (W P)``: the path-sparse ``W P``, then one solve with ``L`` (ancestors first)."""
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
            du[e, k, 0] = s / L[e, k, k]

    @wp.kernel(enable_backward=False)
    def impulse_response_adjoint(J: wp.array3d(dtype=dtype), P: wp.array3d(dtype=dtype),
                                 b_bar: wp.array3d(dtype=dtype), P_grad: wp.array3d(dtype=dtype),
                                 J_grad: wp.array3d(dtype=dtype), has_P: int, has_J: int):
        """``P_bar += J b_bar``, ``J_bar += P b_bar^T`` for one environment."""
        e = wp.tid()
        for r in range(J.shape[1]):
            if has_P != 0:
                s = dtype(0.0)
                for k in range(J.shape[2]):
                    s += J[e, r, k] * b_bar[e, k, 0]
                P_grad[e, r, 0] = P_grad[e, r, 0] + s
            if has_J != 0:
                pr = P[e, r, 0]
                for k in range(J.shape[2]):
                    J_grad[e, r, k] = J_grad[e, r, k] + pr * b_bar[e, k, 0]

    return half_solve_gram, lower_solve, impulse_response, impulse_response_adjoint


def delassus(H: wp.array, L: wp.array, dof_parent: wp.array, foot_path_start: wp.array, foot_path: wp.array,
             J: wp.array, W: wp.array, G: wp.array, tape: wp.Tape | None = None) -> None:
    """``G = J H^-1 J^T`` [N, C, C] for contact rows ``J`` [N, C, nv] (``W`` [N, nv, F] vec3, zeroed scratch)."""
    half_solve_gram, lower_solve = delassus_kernels(H.dtype)[:2]
    N, C, nv = J.shape
    wp.launch(half_solve_gram, dim=N, inputs=[L, foot_path_start, foot_path, J, W, G], device=J.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if G.grad is None:
            return
        Y = wp.zeros((N, nv, C), dtype=H.dtype, device=J.device)
        wp.launch(lower_solve, dim=(N, C // 3), inputs=[L, dof_parent, W, Y], device=J.device, record_tape=False)
        Y_t, G_bar = wp.to_torch(Y), wp.to_torch(G.grad)
        if J.requires_grad and J.grad is not None:
            wp.to_torch(J.grad).add_(torch.bmm(G_bar + G_bar.transpose(1, 2), Y_t.transpose(1, 2)))
        if H.requires_grad and H.grad is not None:
            accumulate_lower(wp.to_torch(H.grad), -torch.bmm(torch.bmm(Y_t, G_bar), Y_t.transpose(1, 2)))

    tape.record_func(backward=backward, arrays=[H, J, G])


def impulse_response(H: wp.array, L: wp.array, dof_parent: wp.array, foot_path_start: wp.array,
                     foot_path: wp.array, J: wp.array, W: wp.array, P: wp.array, du: wp.array,
                     tape: wp.Tape | None = None) -> None:
    """Velocity change ``du = H^-1 J^T P`` [N, nv, 1] of contact impulses ``P`` [N, C, 1], reusing ``W`` from
    :func:`delassus`. Backward (``b_bar = H^-1 du_bar``): ``P_bar += J b_bar``, ``J_bar += P b_bar^T``,
    ``H_bar -= b_bar du^T`` folded onto the lower triangle."""
    kernel = delassus_kernels(H.dtype)[2]
    N = J.shape[0]
    wp.launch(kernel, dim=N, inputs=[L, dof_parent, foot_path_start, foot_path, W, P, du], device=J.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if du.grad is None:
            return
        solve_adjoint = cholesky_kernels(H.dtype)[1]
        b_bar = wp.empty_like(du, requires_grad=False)
        has_H = H.requires_grad and H.grad is not None
        wp.launch(solve_adjoint, dim=N, device=J.device, record_tape=False,
                  inputs=[L, dof_parent, du, du.grad, b_bar, b_bar, H.grad if has_H else H, 0, int(has_H)])
        has_P = P.requires_grad and P.grad is not None
        has_J = J.requires_grad and J.grad is not None
        wp.launch(delassus_kernels(H.dtype)[3], dim=N, device=J.device, record_tape=False,
                  inputs=[J, P, b_bar, P.grad if has_P else b_bar, J.grad if has_J else J, int(has_P), int(has_J)])

    tape.record_func(backward=backward, arrays=[H, J, P, du])
