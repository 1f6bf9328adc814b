"""Which attention a model runs on the CPU in 16-bit under pinned kernels: eager, not PyTorch's fused kernel.

PyTorch 2.13's fused CPU attention (`scaled_dot_product_attention`'s flash kernel) decides at run
time, from the CPU itself, to pack its bfloat16 blocks for AMX (`pack_vnni2`), and then calls code
that exists only in its AVX-512 build. Where the kernels are pinned below the CPU's own
(`ATEN_CPU_CAPABILITY=avx2`: `membench run`, `--reproducible` and the tests; `harness.run.reproducible`),
an Intel Xeon with AMX therefore crashes in the first bfloat16 attention, forward or backward:
"pack_vnni2 is only supported when avx512 is supported" (seen on 2026-11-28 on a Xeon with
avx512f and amx_tile; `ATEN_CPU_CAPABILITY=default` crashes too, `=avx512` runs; float32 never packs).

So a model loaded on the CPU in bfloat16 or float16 while ATen's kernels are pinned runs
transformers' eager attention (matmul, softmax, matmul), on every CPU alike: the kernel the flash
path would take depends on the CPU (AMX or not), which is what the pin exists to prevent. The
results file records it (`accelerator.attn_implementation`). float32, and every GPU, keep
transformers' default (sdpa).
"""

from __future__ import annotations

import os

PINNED_KERNELS = "ATEN_CPU_CAPABILITY"  # set: ATen dispatches to the kernels it names, not the CPU's best
REDUCED_PRECISION = ("bfloat16", "float16")
EAGER = "eager"


def kernels_pinned() -> bool:
    """True when this process's ATen kernels are chosen by `ATEN_CPU_CAPABILITY`, not by the CPU."""
    return bool(os.environ.get(PINNED_KERNELS))


def attention_implementation(device: str, dtype: str) -> str | None:
    """`eager` for a model on the CPU in 16-bit under pinned kernels (module docstring); None (the
    transformers default) otherwise. `dtype` as torch names it without its prefix (`bfloat16`)."""
    if device == "cpu" and dtype in REDUCED_PRECISION and kernels_pinned():
        return EAGER
    return None
