"""Stage: Cholesky factorisation of H and solves with it, with a hand-written adjoint.

``x = H^-1 b`` is computed as ``L^T L x = b`` (never an explicit inverse), with the tree-sparse factorisation
of a kinematic tree's mass matrix: the factor has non-zeros only where H has them (a DOF and its ancestors),
so the cost grows with the sum of squared depths instead of n^3. Warp's automatic adjoint of the
factorisation loops is unreliable (see ``shared/notes/warp-cpu.md``), so the backward pass is written by hand
and recorded on the tape with ``Tape.record_func``: for ``x = H^-1 b``

    b_bar = H^-1 x_bar          (one more solve with the same factor)
    H_bar = -b_bar x^T          (summed over right-hand sides) for a general H

The factorisation reads only the lower triangle of H (H is symmetric by construction), so the exact adjoint
of what is computed goes to the lower triangle only: ``H_bar[i, j] = -(b_bar_i x_j + b_bar_j x_i)`` for
``i > j``, ``-b_bar_i x_i`` on the diagonal, zero above it. The dense adjoint products run as batched torch
matrix products on zero-copy views of the Warp arrays (much faster than scalar Warp loops on the CPU).
"""


import functools

import torch
import warp as wp


def accumulate_lower(H_grad: torch.Tensor, M: torch.Tensor) -> None:
    """``H_grad += tril(M + M^T, -1) + diag(M)`` in place: the adjoint ``M`` of a full matrix folded onto the lower
    triangle, for a function that reads only the lower triangle of a symmetric ``H`` ([N, n, n] tensors)."""
    H_grad.add_(torch.tril(M + M.transpose(1, 2), diagonal=-1) + torch.diag_embed(torch.diagonal(M, dim1=1, dim2=2)))


@functools.cache
def cholesky_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def solve(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32), b: wp.array3d(dtype=dtype),
              x: wp.array3d(dtype=dtype)):
        """``x[e, :, c] = (L^T L)^-1 b[e, :, c]`` for every right-hand side column ``c``."""
        e, c = wp.tid()
        n = L.shape[1]
        for k in range(n):
            x[e, k, c] = b[e, k, c]
        for kk in range(n):  # L^T y = b, descendants first (y stored in x)
            k = n - 1 - kk
            y = x[e, k, c] / L[e, k, k]
            x[e, k, c] = y
            i = dof_parent[k]
            while i != -1:
                x[e, i, c] = x[e, i, c] - L[e, k, i] * y
                i = dof_parent[i]
        for k in range(n):  # L x = y, ancestors first
            s = x[e, k, c]
            i = dof_parent[k]
            while i != -1:
                s = s - L[e, k, i] * x[e, i, c]
                i = dof_parent[i]
            x[e, k, c] = s / L[e, k, k]

    @wp.kernel(enable_backward=False)
    def factor_and_solve(H: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                         b: wp.array3d(dtype=dtype), L: wp.array3d(dtype=dtype), x: wp.array3d(dtype=dtype)):
        """Tree-sparse factor ``H = L^T L`` (Featherstone, RBDA §6.5: no fill-in beyond the ancestor pattern;
        ``L[k, i]`` is non-zero only for ``i`` an ancestor of DOF ``k`` or ``i = k``), then ``x = H^-1 b`` for one
        right-hand side, in one pass over each environment. A non-positive pivot gives NaN (flagged
        downstream by the divergence guard)."""
        e = wp.tid()
        n = H.shape[1]
        for k in range(n):
            i = k
            while i != -1:
                L[e, k, i] = H[e, k, i]
                i = dof_parent[i]
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
            x[e, k, 0] = b[e, k, 0]
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

    @wp.kernel(enable_backward=False)
    def subtract_lower_outer(a: wp.array3d(dtype=dtype), x: wp.array3d(dtype=dtype), H_grad: wp.array3d(dtype=dtype)):
        """``H_grad -= a x^T`` folded onto the lower triangle (summed over the columns of ``a``, ``x``)."""
        e = wp.tid()
        n = x.shape[1]
        for i in range(n):
            for j in range(i + 1):
                s = dtype(0.0)
                for c in range(x.shape[2]):
                    s += a[e, i, c] * x[e, j, c]
                    if j < i:
                        s += a[e, j, c] * x[e, i, c]
                H_grad[e, i, j] = H_grad[e, i, j] - s

    @wp.kernel(enable_backward=False)
    def add_into(a: wp.array3d(dtype=dtype), out: wp.array3d(dtype=dtype)):
        e = wp.tid()
        for i in range(a.shape[1]):
            for c in range(a.shape[2]):
                out[e, i, c] = out[e, i, c] + a[e, i, c]

    return solve, factor_and_solve, subtract_lower_outer, add_into


def solve_with_factor(H: wp.array, dof_parent: wp.array, L: wp.array, b: wp.array, x: wp.array,
                      tape: wp.Tape | None = None, factor_first: bool = False) -> None:
    """``x = H^-1 b`` for ``b``, ``x`` of shape [N, n, m], using the factor ``L`` of ``H``.

    ``factor_first``: compute ``L`` in the same pass (one right-hand side only). With a ``tape``, records the
    hand-written adjoint (gradients to ``b`` and ``H`` where they require grad).
    """
    solve, factor_and_solve, subtract_lower_outer, add_into = cholesky_kernels(H.dtype)
    dims = (b.shape[0], b.shape[2])
    if factor_first:
        if b.shape[2] != 1:
            raise ValueError("factor_first solves one right-hand side")
        wp.launch(factor_and_solve, dim=b.shape[0], inputs=[H, dof_parent, b, L, x], device=b.device,
                  record_tape=False)
    else:
        wp.launch(solve, dim=dims, inputs=[L, dof_parent, b, x], device=b.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if x.grad is None:
            return
        b_bar = wp.empty_like(x, requires_grad=False)
        wp.launch(solve, dim=dims, inputs=[L, dof_parent, x.grad, b_bar], device=b.device, record_tape=False)
        if b.requires_grad and b.grad is not None:
            wp.launch(add_into, dim=b.shape[0], inputs=[b_bar, b.grad], device=b.device, record_tape=False)
        if H.requires_grad and H.grad is not None:
            wp.launch(subtract_lower_outer, dim=b.shape[0], inputs=[b_bar, x, H.grad], device=b.device,
                      record_tape=False)

    tape.record_func(backward=backward, arrays=[H, b, x])
