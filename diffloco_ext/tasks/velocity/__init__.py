"""Velocity tracking (``DiffLoco-Velocity-Flat-AnymalD`` / ``-AnymalC``): Isaac Lab's flat ANYmal-D task interface
with differentiable rewards."""
