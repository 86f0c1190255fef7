"""Checks on the programs JAX would compile for other platforms (``jax.export``, which
lowers for a platform this machine does not have)."""

from __future__ import annotations

from jax import export


def assert_loop_only_on_cpu(fn, *args) -> None:
    """``fn`` (jitted), lowered for ``args``, has a loop in its CPU program and none in
    its CUDA one."""
    assert "stablehlo.while" in export.export(fn, platforms=["cpu"])(*args).mlir_module()
    assert "stablehlo.while" not in export.export(fn, platforms=["cuda"])(*args).mlir_module()
