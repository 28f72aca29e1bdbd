"""tierctl's ``sgl_kernel`` stand-in, run by the real SGLang's interpreter (it needs torch):
its two ops do what SGLang's kernels of the same arguments do, its refused ops say so, and it
registers no ``torch.ops.sgl_kernel`` operator (so SGLang does not take it for the AMX
backend)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tierctl.realengine import sglang as realsglang

pytestmark = [pytest.mark.real_engine]

SCRIPT = r"""
import torch
import sgl_kernel
from sglang.srt.utils.common import cpu_has_amx_support

assert sgl_kernel.__file__.startswith(SHIM), sgl_kernel.__file__

# assign_req_to_token_pool_cpu: request i's slots [start_i, end_i) of its row get the next
# end_i - start_i entries of out_cache_loc.
table = torch.zeros((4, 10), dtype=torch.int32)
sgl_kernel.assign_req_to_token_pool_cpu(
    torch.tensor([2, 0]), table, torch.tensor([1, 3]), torch.tensor([4, 5]),
    torch.tensor([11, 12, 13, 21, 22], dtype=torch.int64), 10,
)
assert table[2].tolist() == [0, 11, 12, 13, 0, 0, 0, 0, 0, 0], table[2]
assert table[0].tolist() == [0, 0, 0, 21, 22, 0, 0, 0, 0, 0], table[0]
assert table[1].abs().sum() == 0 and table[3].abs().sum() == 0

# copy_all_layer_kv_cache_cpu: row src -> row tgt in every layer's buffer, by raw pointers.
layers = [torch.arange(24, dtype=torch.float32).reshape(6, 4) + 100 * k for k in range(2)]
want = [t.clone() for t in layers]
for t in want:
    t[[4, 5]] = t[[0, 1]]
ptrs = torch.tensor([t.data_ptr() for t in layers], dtype=torch.uint64)
strides = torch.tensor([t.stride(0) * t.element_size() for t in layers], dtype=torch.int64)
sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([4, 5]), torch.tensor([0, 1]))
assert all(torch.equal(a, b) for a, b in zip(layers, want)), layers

try:
    sgl_kernel.verify_tree_greedy_cpu()
except NotImplementedError as exc:
    assert "verify_tree_greedy_cpu" in str(exc)
else:
    raise AssertionError("a refused op ran")

assert not hasattr(torch.ops.sgl_kernel, "convert_weight_packed")
assert cpu_has_amx_support() is False
print("ok", sgl_kernel.USED)
"""


def test_the_stand_in_ops(sglang_python: Path) -> None:
    proc = subprocess.run(
        [str(sglang_python), "-c", f"SHIM = {str(realsglang.SHIM_DIR)!r}\n{SCRIPT}"],
        capture_output=True,
        text=True,
        timeout=300,
        env=realsglang.engine_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[0] == "ok"
    assert "tierctl sgl_kernel stand-in: assign_req_to_token_pool_cpu" in proc.stderr
