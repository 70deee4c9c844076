"""The update's kernels, each beside (not inside) the policy and the loss; one job a file:

- `lm_head`: per-token log-probs and entropies from hidden states in token chunks (no [tokens, V] logits);
- `lora`: each peft LoRA linear as one autograd node;
- `checkpointing`: what a checkpointed decoder layer keeps (selective activation checkpointing);
- `attention`: the sdpa kernel tried first;
- `experts`: frozen MoE experts as one autograd node;
- `linear_attention`: Gated DeltaNet's convolution and gated norm on flash-linear-attention's kernels;
- `compile`: torch.compile with an eager fallback.
"""
