"""Each peft LoRA linear as one autograd node: y = x W^T + bias + scaling * (x A^T) B^T."""

from __future__ import annotations

import types

import torch


class _LoraLinear(torch.autograd.Function):
    """y = x W^T + bias + scaling * (x A^T) B^T, one autograd node in one dtype.

    peft runs LoRA as four more ops a layer (A, B, the scaling, the add), each a pass over a
    [tokens, out] tensor; here the B product is added by the base output's own matmul epilogue
    (addmm), and backward shares d y's passes between the input, A and B gradients. Saves x and
    x A^T (r numbers a token), as peft does.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scaling: float, dtype: torch.dtype):
        with torch.autocast(x.device.type, enabled=False):
            x2 = x.reshape(-1, x.shape[-1]).to(dtype)
            w, a, b = weight.to(dtype), lora_a.to(dtype), lora_b.to(dtype)
            xa = x2 @ a.t()
            base = x2 @ w.t() if bias is None else torch.addmm(bias.to(dtype), x2, w.t())
            y = torch.addmm(base, xa, b.t(), alpha=scaling)  # out of place: selective checkpointing may keep `base`
        ctx.save_for_backward(x2, xa, weight, bias, lora_a, lora_b)
        ctx.scaling, ctx.dtype, ctx.x_shape, ctx.x_dtype = scaling, dtype, x.shape, x.dtype
        return y.view(*x.shape[:-1], -1)

    @staticmethod
    def backward(ctx, grad_y):
        x2, xa, weight, bias, lora_a, lora_b = ctx.saved_tensors
        need_x, need_w, need_bias, need_a, need_b = ctx.needs_input_grad[:5]
        dtype, s = ctx.dtype, ctx.scaling
        grad_x = grad_w = grad_bias = grad_a = grad_b = None
        with torch.autocast(grad_y.device.type, enabled=False):
            g = grad_y.reshape(-1, grad_y.shape[-1]).to(dtype)
            a, b = lora_a.to(dtype), lora_b.to(dtype)
            gb = g @ (b * s)  # d loss / d (x A^T), [tokens, r]
            if need_x:
                grad_x = (g @ weight.to(dtype)).addmm_(gb, a).view(ctx.x_shape).to(ctx.x_dtype)
            if need_a:
                grad_a = (gb.t() @ x2).to(lora_a.dtype)
            if need_b:
                grad_b = (g.t() @ (xa * s)).to(lora_b.dtype)
            if need_w:
                grad_w = (g.t() @ x2).to(weight.dtype)
            if need_bias:
                grad_bias = g.sum(0).to(bias.dtype)
        return grad_x, grad_w, grad_bias, grad_a, grad_b, None, None


def _fused_lora_forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """peft's `lora.Linear.forward` as one `_LoraLinear` where the layer is plain LoRA; peft's own otherwise."""
    names = [n for n in self.active_adapters if n in self.lora_A]
    base = self.base_layer
    if (args or kwargs or self.disable_adapters or self.merged or len(names) != 1 or names[0] in self.lora_variant
            or getattr(self, "fan_in_fan_out", False) or type(base) is not torch.nn.Linear
            or not base.weight.is_floating_point() or self.lora_B[names[0]].bias is not None
            or (self.training and not isinstance(self.lora_dropout[names[0]], torch.nn.Identity))):
        return type(self).forward(self, x, *args, **kwargs)
    name = names[0]
    lora_a, lora_b = self.lora_A[name].weight, self.lora_B[name].weight
    device = x.device.type
    if torch.is_autocast_enabled(device):  # as peft + autocast: every matmul in the autocast dtype
        dtype = torch.get_autocast_dtype(device)
    elif x.dtype == base.weight.dtype == lora_a.dtype == lora_b.dtype:
        dtype = x.dtype
    else:  # peft's mixed precision (float32 adapter on a 16-bit base): left to peft
        return type(self).forward(self, x)
    return _LoraLinear.apply(x, base.weight, base.bias, lora_a, lora_b, float(self.scaling[name]), dtype)


def fuse_lora_linears(model: torch.nn.Module) -> int:
    """Run every peft LoRA linear layer of `model` through `_LoraLinear` (in place; returns how many).

    The same function as peft's forward (tested against it), with fewer passes over the activations;
    layers peft runs differently (adapter off or merged, several adapters, DoRA and other variants,
    dropout in training, quantised or non-Linear base) fall back to peft's forward call by call.
    """
    from peft.tuners.lora import Linear as LoraLinear

    layers = [m for m in model.modules() if type(m) is LoraLinear]
    for m in layers:
        m.forward = types.MethodType(_fused_lora_forward, m)
    return len(layers)
