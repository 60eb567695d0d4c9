"""Batched matrix-column products ``C[e] = A[e] B[e]`` with a hand-written adjoint (the step's ``c = J u``).

Warp's automatic adjoint of a dynamic accumulation loop is unreliable (``shared/notes/warp-cpu.md``), so the
product is launched off the tape and its backward pass, batched torch products on zero-copy views of the Warp
arrays, is recorded with ``Tape.record_func``:

    A_bar += C_bar B^T          B_bar += A^T C_bar
"""

import functools

import torch
import warp as wp


@functools.cache
def matmul_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def matmul(A: wp.array3d(dtype=dtype), B: wp.array3d(dtype=dtype), C: wp.array3d(dtype=dtype)):
        """Column ``j`` of ``C[e] = A[e] B[e]`` (one thread per environment and column: the step's products are
        tall and thin, matrix times vector)."""
        e, j = wp.tid()
        for i in range(C.shape[1]):
            s = dtype(0.0)
            for k in range(A.shape[2]):
                s += A[e, i, k] * B[e, k, j]
            C[e, i, j] = s

    return matmul


def batched_matmul(A: wp.array, B: wp.array, C: wp.array, tape: wp.Tape | None = None) -> None:
    """``C = A B`` for stacks of matrices ([N, ., .] arrays); adjoint recorded on ``tape`` when given."""
    matmul = matmul_kernels(A.dtype)
    if B.shape[1] != A.shape[2] or C.shape[1] != A.shape[1] or C.shape[2] != B.shape[2]:
        raise ValueError(f"shape mismatch: A {A.shape[1:]}, B {B.shape[1:]}, C {C.shape[1:]}")
    wp.launch(matmul, dim=(A.shape[0], B.shape[2]), inputs=[A, B, C], device=A.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if C.grad is None:
            return
        A_t, B_t, C_bar = wp.to_torch(A), wp.to_torch(B), wp.to_torch(C.grad)
        if A.requires_grad and A.grad is not None:
            wp.to_torch(A.grad).add_(torch.bmm(C_bar, B_t.transpose(1, 2)))
        if B.requires_grad and B.grad is not None:
            wp.to_torch(B.grad).add_(torch.bmm(A_t.transpose(1, 2), C_bar))

    tape.record_func(backward=backward, arrays=[A, B, C])
