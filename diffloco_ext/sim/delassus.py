"""Stage: the Delassus matrix ``G = J H^-1 J^T`` through the tree-sparse factor, with a hand-written adjoint.

With ``H = L^T L`` (see :mod:`.cholesky`), ``G = W^T W`` where ``W = L^-T J^T``. A contact row of a foot only
involves the DOFs on the foot's path to the root (its leg and the base), and ``L^-T`` keeps that support, so
each column of ``W`` is computed along that path only and each entry of ``G`` is a dot product over it: a few
hundred operations per environment instead of a dense solve with every contact row as right-hand side.

Backward pass (``Y = H^-1 J^T``, computed only there): for ``G = J H^-1 J^T``

    J_bar += (G_bar + G_bar^T) Y^T          H_bar -= Y G_bar Y^T   (accumulated on H's lower triangle)

the lower-triangle rule being the one of :mod:`.cholesky` (the factorisation reads only that triangle).
"""

import functools

import torch
import warp as wp

from .cholesky import accumulate_lower


@functools.cache
def delassus_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def half_solve_gram(
        L: wp.array3d(dtype=dtype),
        dof_parent: wp.array(dtype=wp.int32),
        foot_path_start: wp.array(dtype=wp.int32),
        foot_path: wp.array(dtype=wp.int32),
        J: wp.array3d(dtype=dtype),
        W: wp.array3d(dtype=dtype),
        G: wp.array3d(dtype=dtype),
    ):
        """``W = L^-T J^T`` along each foot's root path (``W`` zeroed elsewhere), then ``G = W^T W``."""
        e = wp.tid()
        num_rows = J.shape[1]
        for c in range(num_rows):
            f = c // 3
            start = foot_path_start[f]
            end = foot_path_start[f + 1]
            for p in range(start, end):
                k = foot_path[p]
                W[e, k, c] = J[e, c, k]
            for p in range(start, end):  # the path runs leaf to root: descendants first, as L^T needs
                k = foot_path[p]
                y = W[e, k, c] / L[e, k, k]
                W[e, k, c] = y
                i = dof_parent[k]
                while i != -1:
                    W[e, i, c] = W[e, i, c] - L[e, k, i] * y
                    i = dof_parent[i]
        for a in range(num_rows):
            fa = a // 3
            for b in range(a, num_rows):
                s = dtype(0.0)
                for p in range(foot_path_start[fa], foot_path_start[fa + 1]):
                    k = foot_path[p]
                    s += W[e, k, a] * W[e, k, b]
                G[e, a, b] = s
                G[e, b, a] = s

    @wp.kernel(enable_backward=False)
    def lower_solve(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32), W: wp.array3d(dtype=dtype),
                    Y: wp.array3d(dtype=dtype)):
        """``Y[:, c] = L^-1 W[:, c]`` (ancestors first)."""
        e, c = wp.tid()
        n = L.shape[1]
        for k in range(n):
            s = W[e, k, c]
            i = dof_parent[k]
            while i != -1:
                s = s - L[e, k, i] * Y[e, i, c]
                i = dof_parent[i]
            Y[e, k, c] = s / L[e, k, k]

    return half_solve_gram, lower_solve


def delassus(H: wp.array, L: wp.array, dof_parent: wp.array, foot_path_start: wp.array, foot_path: wp.array,
             J: wp.array, W: wp.array, G: wp.array, tape: wp.Tape | None = None) -> None:
    """``G = J H^-1 J^T`` [N, C, C] for contact rows ``J`` [N, C, nv] (``W`` [N, nv, C] zeroed scratch)."""
    half_solve_gram, lower_solve = delassus_kernels(H.dtype)
    N, C, nv = J.shape
    wp.launch(half_solve_gram, dim=N, inputs=[L, dof_parent, foot_path_start, foot_path, J, W, G], device=J.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if G.grad is None:
            return
        Y = wp.zeros((N, nv, C), dtype=H.dtype, device=J.device)
        wp.launch(lower_solve, dim=(N, C), inputs=[L, dof_parent, W, Y], device=J.device, record_tape=False)
        Y_t, G_bar = wp.to_torch(Y), wp.to_torch(G.grad)
        if J.requires_grad and J.grad is not None:
            wp.to_torch(J.grad).add_(torch.bmm(G_bar + G_bar.transpose(1, 2), Y_t.transpose(1, 2)))
        if H.requires_grad and H.grad is not None:
            accumulate_lower(wp.to_torch(H.grad), -torch.bmm(torch.bmm(Y_t, G_bar), Y_t.transpose(1, 2)))

    tape.record_func(backward=backward, arrays=[H, J, G])
