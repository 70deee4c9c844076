"""Model FLOPs of the update, for MFU: Lightning's `Throughput` reads them as the module's
`flops_per_batch` and divides by the step's time and the device's peak (`GRPOModule.throughput_metrics`);
`scripts/bench_step.py` divides by the forward-backward's time alone."""

from __future__ import annotations


def update_flops(model, rows: int, seq_len: int) -> float:
    """Model FLOPs of one update (forward + backward, no recomputation) over rows x seq_len tokens.

    Matmuls: 2 per weight per token forward, 2 backward for the input gradient; frozen weights get
    no weight gradient, the adapter's get 2 more. MoE experts count top_k / num_experts of their
    weights; the LM head counts once (tied or not), the embedding lookup not at all. Causal
    attention of each full-attention layer: 2*T^2*heads*head_dim forward (QK^T and PV over half
    the square), twice that backward. Norms, activations and linear-attention recurrences are not counted.
    """
    cfg = model.config.get_text_config()
    experts = getattr(cfg, "num_experts", None) or 0
    active = cfg.num_experts_per_tok / experts if experts else 1.0
    embed = model.get_input_embeddings().weight
    frozen = adapter = 0.0
    for name, p in model.named_parameters():
        if p.ndim < 2 or "visual" in name or p is embed:
            continue
        if p.requires_grad:
            adapter += p.numel()
        else:
            frozen += p.numel() * (active if p.ndim == 3 and p.shape[0] == experts else 1.0)
    if model.get_output_embeddings().weight is embed:  # tied: the head is the embedding, skipped above
        frozen += embed.numel()
    layer_types = getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    attention = 3 * 2 * rows * seq_len**2 * cfg.num_attention_heads * head_dim * layer_types.count("full_attention")
    tokens = rows * seq_len
    return 4 * tokens * frozen + 6 * tokens * adapter + attention
