"""The scripts' tests run torch on one thread, as the learning tests do (as the scripts do: the machine is small and
shared, and Warp's CPU kernels run on one core)."""

from ..learning.conftest import _single_thread  # noqa: F401  (the autouse fixture, for this folder too)
