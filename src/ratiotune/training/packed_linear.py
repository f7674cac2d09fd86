"""The CPU decode copy's linear layers with their weights laid out once for oneDNN (prepacked).

A bf16 matmul on CPU goes through oneDNN, which first reorders the weight into the blocked layout
its AVX512-BF16/AMX kernels read. `F.linear` does that on every call, so a decode step, which
reads every weight once, pays a reorder per weight per step. Measured here (one thread, 8 rows,
SmolLM2-135M): 60 cold 1536x576 weights take 296 us each through F.linear and 199 us prepacked
(the read floor is ~130 us), and a whole decode step 103 ms vs 82 ms, with identical outputs.

So the decode copy (generation.Decoding) packs each nn.Linear once, after it is made and after
every refresh from the masters (the weights only change at an optimizer step), and its forward
runs torch.ops.mkldnn._linear_pointwise on the packed weight (the op torch.compile's CPU backend
uses for frozen linears). The module's own bf16 weight is then dropped, so the copy holds each
weight once; a weight the copy shares with another module (an LM head tied to the embeddings)
is kept, and packed beside it. A refresh packs straight from the float32 masters. `available()`
says whether this torch has the op; when it does not, the copy decodes through plain F.linear.
"""

from __future__ import annotations

import collections
import types

import torch

# The row count the layout is chosen for (oneDNN's batch-size hint): a rollout call of one
# window is rollout_buffer_size x num_generations rows (8 for studies/smollm2-cpu.yaml). Any row
# count runs on it; the hint only steers oneDNN's blocking.
ROWS_HINT = 8


def available() -> bool:
    """Whether this torch build has oneDNN's prepacked linear (CPU builds with mkldnn)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")


def _packed_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    out = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, x.shape[-1]), self._packed_weight, self.bias, "none", [], "")
    return out.reshape(*x.shape[:-1], out.shape[-1])


def _pack(weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(torch.bfloat16), ROWS_HINT)


def pack(model: torch.nn.Module) -> int:
    """Pack every bf16 nn.Linear of `model` (an inference-only copy) and route its forward there; returns how many.

    The module's own weight is dropped unless another module shares it (a tied LM head).
    """
    # How many modules hold each tensor: a tied LM head's weight is also the embeddings'.
    holders = collections.Counter(id(t) for m in model.modules() for t in m._parameters.values() if t is not None)
    count = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.weight.dtype == torch.bfloat16:
            module._packed_weight = _pack(module.weight)
            module.forward = types.MethodType(_packed_forward, module)
            if holders[id(module.weight)] == 1:
                module._parameters["weight"] = None  # decoding reads the packed one only
            count += 1
    return count


def repack(model: torch.nn.Module, masters: dict[str, torch.Tensor]) -> None:
    """Pack again after an optimizer step: from the float32 master of a dropped weight, else from the
    module's own bf16 weight (refreshed in place by the caller). `masters` maps parameter names to tensors."""
    with torch.no_grad():
        for name, module in model.named_modules():
            if hasattr(module, "_packed_weight"):
                weight = module.weight if module.weight is not None else masters[f"{name}.weight" if name else "weight"]
                module._packed_weight = _pack(weight)


def packed_bytes(model: torch.nn.Module) -> int:
    """Bytes of the packed weights (bf16, one per packed linear)."""
    return sum(2 * m.in_features * m.out_features for m in model.modules() if hasattr(m, "_packed_weight"))
