"""tierctl's stand-in for ``sgl_kernel`` under SGLang 0.5.23 on a CPU without AMX.

SGLang's CPU path imports a handful of helpers from ``sgl_kernel`` at module level (behind
``if is_cpu():``). Those come from sgl-kernel's CPU build (``sgl-kernel/csrc/cpu``), which is
not published on PyPI: the ``sglang-kernel`` 0.4.10 wheel there is CUDA only (``sm90``/``sm100``
``common_ops``; importing it here fails with ``libcuda.so.1: cannot open shared object file``;
the older ``sgl-kernel`` 0.3.21 with ``libnvrtc.so.12``). This package takes its name, on the engine's ``PYTHONPATH`` only
(:func:`tierctl.realengine.sglang.engine_env`), and provides:

- in plain torch, two bookkeeping ops: :func:`assign_req_to_token_pool_cpu` (write a batch's
  new KV-cache slots into the request-to-token table; SGLang calls it from its
  speculative-decoding allocator, ``alloc_for_spec_decode``) and
  :func:`copy_all_layer_kv_cache_cpu` (move KV rows inside every layer's buffer;
  ``move_kv_cache``). Text serving of the tiny model runs neither (its logs have no stand-in
  line; the real-engine tests check that): SGLang's own CPU code does the rest;
- the speculative-decoding and AMX-attention helpers, which their modules import but text
  serving without ``--speculative-algorithm`` never calls, as functions that raise
  :class:`NotImplementedError` naming the op.

It registers no ``torch.ops.sgl_kernel`` operator: SGLang reads ``hasattr(torch.ops.sgl_kernel,
"convert_weight_packed")`` as "the Intel AMX backend is available", so without one (and without
AMX on this CPU) every layer takes SGLang's own torch-native path (``forward_native``): RMSNorm,
SiLU-and-mul, rotary embedding, the ``torch_native`` attention backend, the sampler.

Each op writes one line to stderr the first time it runs (``tierctl sgl_kernel stand-in:
NAME``), so an engine log shows which of them a workload used. Runs under the engine's
virtualenv: it imports torch, never tierctl.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import Any

import torch

__version__ = "0.0.0+tierctl.cpu-stand-in"

#: The ops that have run in this process, in the order they first ran.
USED: list[str] = []


def _note(name: str) -> None:
    if name not in USED:
        USED.append(name)
        print(f"tierctl sgl_kernel stand-in: {name}", file=sys.stderr, flush=True)


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """Write each request's new KV-cache slots into its row of the request-to-token table.

    Request ``i`` of the batch gets ``req_to_token[req_pool_indices[i], start[i]:end[i]]``
    from the next ``end[i] - start[i]`` entries of ``out_cache_loc`` (the batch's slots,
    request after request): what SGLang's triton kernel ``assign_req_to_token_pool`` does.
    """
    _note("assign_req_to_token_pool_cpu")
    at = 0
    rows = req_pool_indices.tolist()
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    for row, start, end in zip(rows, starts, ends, strict=True):
        n = end - start
        req_to_token[row, start:end] = out_cache_loc[at : at + n].to(req_to_token.dtype)
        at += n


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """Copy row ``src_loc[j]`` to row ``tgt_loc[j]`` in every layer's KV buffer.

    ``data_ptrs`` holds each buffer's address and ``strides`` its row size in bytes (SGLang's
    ``copy_all_layer_kv_cache_tiled`` triton kernel takes the same arguments).
    """
    _note("copy_all_layer_kv_cache_cpu")
    pairs = list(zip(src_loc.tolist(), tgt_loc.tolist(), strict=True))
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        for src, tgt in pairs:
            ctypes.memmove(base + tgt * stride, base + src * stride, stride)


def _refused(name: str) -> Callable[..., Any]:
    def op(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"sgl_kernel.{name}: not provided by tierctl's CPU stand-in (speculative decoding "
            "and the AMX attention backend need sgl-kernel's CPU build)"
        )

    op.__name__ = op.__qualname__ = name
    return op


#: Imported at module level by SGLang 0.5.23's speculative-decoding and AMX modules on CPU;
#: never called by text serving without --speculative-algorithm.
REFUSED = (
    "build_tree_kernel_efficient_cpu",
    "verify_tree_greedy_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "rotate_input_ids_cpu",
    "build_draft_decode_metadata_cpu",
)
for _name in REFUSED:
    globals()[_name] = _refused(_name)
