"""The reference implementation behind ``kvplan verify``: a compact decoder built from any ModelCard, its KV caches,
and the allocation tracker that measures them. This package is the only part of kvplan that imports torch, and only
its submodules do (``model``, ``cache``, ``track``, ``measure``, and for ``--tp/--pp`` ``tp``, the sharding
transform, and ``rank``, one process of a sharded run); ``shrink`` is pure Python.
"""
