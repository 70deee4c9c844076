"""A Llama model and its byte-level BPE tokenizer written as a float32 GGUF file, as llama.cpp's converter writes
one: tensors under GGUF's names (`gguf.get_tensor_name_map`), q/k rows permuted to llama.cpp's rotary layout, the
tokenizer as "gpt2" tokens, types and merges, the chat template. Tests write tiny ones to check that
`lit_watercolour.gguf` reads back the model they came from; a real checkpoint comes from llama.cpp's tools.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

TOKEN_NORMAL, TOKEN_CONTROL = 1, 3  # llama.cpp's token types


def permute_rotary(weights: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's q/k row order (convert_hf_to_gguf's `permute`; transformers' reader undoes it)."""
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def write_llama_gguf(model, tokenizer, path: str | Path) -> Path:
    """`model` (a LlamaForCausalLM) and `tokenizer` (a byte-level BPE) as one float32 GGUF file at `path`."""
    import gguf

    c, path = model.config, Path(path)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_block_count(c.num_hidden_layers)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(c.rope_parameters["rope_theta"]))
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)

    special = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([tokenizer.convert_ids_to_tokens(i) for i in range(len(tokenizer))])
    writer.add_token_types([TOKEN_CONTROL if i in special else TOKEN_NORMAL for i in range(len(tokenizer))])
    merges = json.loads(tokenizer.backend_tokenizer.to_str())["model"]["merges"]
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in merges])
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, c.num_hidden_layers)
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and c.tie_word_embeddings:
            continue  # a tied head is the embedding: llama.cpp writes no `output`
        array = tensor.float().numpy()
        if name.endswith("q_proj.weight"):
            array = permute_rotary(array, c.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            array = permute_rotary(array, c.num_key_value_heads)
        writer.add_tensor(names.get_name(name, try_suffixes=(".weight",)), array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
