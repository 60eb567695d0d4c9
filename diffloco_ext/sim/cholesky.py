"""Stage: Cholesky factorisation of H and solves with it, with a hand-written adjoint.

``x = H^-1 b`` is computed as ``L^T L x = b`` (never an explicit inverse), with the tree-sparse factorisation
of a kinematic tree's mass matrix: the factor has non-zeros only where H has them (a DOF and its ancestors),
so the cost grows with the sum of squared depths instead of n^3. Warp's automatic adjoint of the
factorisation loops is unreliable (see ``shared/notes/warp-cpu.md``), so the backward pass is written by hand
and recorded on the tape with ``Tape.record_func``: for ``x = H^-1 b``

    b_bar = H^-1 x_bar          (one more solve with the same factor)
    H_bar = -b_bar x^T          for a general H

The factorisation reads only the lower triangle of H (H is symmetric by construction), so the exact adjoint
of what is computed goes to the lower triangle only: ``H_bar[i, j] = -(b_bar_i x_j + b_bar_j x_i)`` for
``i > j``, ``-b_bar_i x_i`` on the diagonal, zero above it. Only the tree's non-zero pattern of ``H`` is read
by the factorisation (and written by the CRBA), so the fold is done on that pattern only.
"""


import functools

import warp as wp


@functools.cache
def cholesky_funcs(dtype):
    """Device functions shared with other stages: the solve with the factor, and the rank-one adjoint fold."""

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

    @wp.func
    def subtract_outer_lower(H_grad: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                             a: wp.array3d(dtype=dtype), b: wp.array3d(dtype=dtype), e: int):
        """``H_grad -= a b^T`` folded onto the lower triangle, on the tree's non-zero pattern only (``H[k, i]``
        for ``i`` an ancestor of ``k`` or ``k`` itself: the only entries of ``H`` that the factorisation reads
        and the CRBA writes)."""
        for k in range(H_grad.shape[1]):
            ak = a[e, k, 0]
            bk = b[e, k, 0]
            H_grad[e, k, k] = H_grad[e, k, k] - ak * bk
            i = dof_parent[k]
            while i != -1:
                H_grad[e, k, i] = H_grad[e, k, i] - (ak * b[e, i, 0] + a[e, i, 0] * bk)
                i = dof_parent[i]
        return 0

    return solve_in_place, subtract_outer_lower


@functools.cache
def cholesky_kernels(dtype):
    _solve_in_place, _subtract_outer_lower = cholesky_funcs(dtype)

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
        _solve_in_place(L, dof_parent, x, e)

    @wp.kernel(enable_backward=False)
    def solve_adjoint(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32), x: wp.array3d(dtype=dtype),
                      x_grad: wp.array3d(dtype=dtype), b_bar: wp.array3d(dtype=dtype), b_grad: wp.array3d(dtype=dtype),
                      H_grad: wp.array3d(dtype=dtype), has_b: int, has_H: int):
        """Adjoint of ``x = H^-1 b`` for one right-hand side in one pass: ``b_bar = H^-1 x_bar`` (into ``b_bar``),
        ``b_grad += b_bar``, ``H_grad -= b_bar x^T`` folded onto the lower triangle."""
        e = wp.tid()
        n = L.shape[1]
        for k in range(n):
            b_bar[e, k, 0] = x_grad[e, k, 0]
        _solve_in_place(L, dof_parent, b_bar, e)
        if has_b != 0:
            for k in range(n):
                b_grad[e, k, 0] = b_grad[e, k, 0] + b_bar[e, k, 0]
        if has_H != 0:
            _subtract_outer_lower(H_grad, dof_parent, b_bar, x, e)

    return factor_and_solve, solve_adjoint


def factor_and_solve(H: wp.array, dof_parent: wp.array, L: wp.array, b: wp.array, x: wp.array,
                     tape: wp.Tape | None = None) -> None:
    """Factor ``H`` [N, n, n] into ``L`` and solve ``x = H^-1 b`` for ``b``, ``x`` of shape [N, n, 1].

    With a ``tape``, records the hand-written adjoint (gradients to ``b`` and ``H`` where they require grad).
    """
    forward, adjoint = cholesky_kernels(H.dtype)
    if b.shape[2] != 1:
        raise ValueError("one right-hand side: b must have shape [N, n, 1]")
    N = b.shape[0]
    wp.launch(forward, dim=N, inputs=[H, dof_parent, b, L, x], device=b.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if x.grad is None:
            return
        b_bar = wp.empty_like(x, requires_grad=False)
        has_b = b.requires_grad and b.grad is not None
        has_H = H.requires_grad and H.grad is not None
        wp.launch(adjoint, dim=N, device=b.device, record_tape=False,
                  inputs=[L, dof_parent, x, x.grad, b_bar, b.grad if has_b else b_bar, H.grad if has_H else H,
                          int(has_b), int(has_H)])

    tape.record_func(backward=backward, arrays=[H, b, x])
