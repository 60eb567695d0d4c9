"""Standalone PhysX (Isaac Lab's ``ovphysx`` backend) on a machine without CUDA: pinned host memory.

Isaac Lab's OVPhysX articulation stages data through *pinned* host arrays
(``wp.zeros(..., device="cpu", pinned=True)`` in ``isaaclab_ov/assets/articulation/articulation.py``). Warp
allocates pinned memory through the CUDA driver, so without one the allocation fails ("Failed to allocate 16 bytes
on device 'cpu'") and no PhysX env can start; no Isaac Lab flag or environment variable turns the pinning off.
Pinned (page-locked) memory only matters for asynchronous copies to a GPU, which a machine without CUDA never
makes, so Warp's CPU device is told to serve pinned requests with its ordinary allocator.

Applied only when Warp sees no CUDA device: on a GPU machine nothing changes.
"""

from __future__ import annotations


def enable_cpu_pinned_fallback() -> bool:
    """Serve Warp's pinned CPU allocations with the ordinary CPU allocator if there is no CUDA device. Returns
    whether the fallback is (now) in place. Idempotent."""
    import warp as wp

    wp.init()
    if wp.is_cuda_available():
        return False
    cpu = wp.get_device("cpu")
    cpu.pinned_allocator = cpu.default_allocator
    return True
