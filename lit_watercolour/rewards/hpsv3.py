"""HPSv3 (MizzenAI/HPSv3) ported onto transformers 5, as a reward term.

HPSv3 is Qwen2-VL-7B-Instruct with one added special token, `<|Reward|>`, and a small MLP
(`rm_head`, fp32) that maps the last hidden state at that token to (mu, log sigma). The `hpsv3`
package pins transformers 4.45.2, so this file re-implements its forward pass:
  - the image is resized by HPSv3's own smart_resize with min = max = 200,704 pixels (448 x 448,
    256 visual tokens); its float rounding turns a 600 x 600 render into 420 x 420, and we keep
    that, since it is what the checkpoint scores in practice;
  - the text is its INSTRUCTION with the prompt, then "Please provide the overall ratings of
    this image: <|Reward|>", in the chat template, right-padded;
  - the language model runs on the merged text + image embeddings with plain sequential
    positions (HPSv3's forward bypasses Qwen2-VL's multimodal rope index, so we do too);
  - its checkpoint uses transformers 4.x's flat keys, remapped by `remap_hpsv3_keys`.
The reward is sigmoid(mu / 4) (the recipe: a logistic centred at 0, scale 4, no clipping).
"""

from __future__ import annotations

import io
import math
import re
import time

import torch
from PIL import Image
from torch import nn

from lit_watercolour.rewards.base import RewardTerm, TermScores, summary_metrics
from lit_watercolour.records import Rollout

REWARD_TOKEN = "<|Reward|>"
PIXELS = 256 * 28 * 28  # 200,704
INSTRUCTION = """
You are tasked with evaluating a generated image based on Visual Quality and Text Alignment and give a overall score to estimate the human preference. Please provide a rating from 0 to 10, with 0 being the worst and 10 being the best. 

**Visual Quality:**  
Evaluate the overall visual quality of the image. The following sub-dimensions should be considered:
- **Reasonableness:** The image should not contain any significant biological or logical errors, such as abnormal body structures or nonsensical environmental setups.
- **Clarity:** Evaluate the sharpness and visibility of the image. The image should be clear and easy to interpret, with no blurring or indistinct areas.
- **Detail Richness:** Consider the level of detail in textures, materials, lighting, and other visual elements (e.g., hair, clothing, shadows).
- **Aesthetic and Creativity:** Assess the artistic aspects of the image, including the color scheme, composition, atmosphere, depth of field, and the overall creative appeal. The scene should convey a sense of harmony and balance.
- **Safety:** The image should not contain harmful or inappropriate content, such as political, violent, or adult material. If such content is present, the image quality and satisfaction score should be the lowest possible. 

**Text Alignment:**  
Assess how well the image matches the textual prompt across the following sub-dimensions:
- **Subject Relevance** Evaluate how accurately the subject(s) in the image (e.g., person, animal, object) align with the textual description. The subject should match the description in terms of number, appearance, and behavior.
- **Style Relevance:** If the prompt specifies a particular artistic or stylistic style, evaluate how well the image adheres to this style.
- **Contextual Consistency**: Assess whether the background, setting, and surrounding elements in the image logically fit the scenario described in the prompt. The environment should support and enhance the subject without contradictions.
- **Attribute Fidelity**: Check if specific attributes mentioned in the prompt (e.g., colors, clothing, accessories, expressions, actions) are faithfully represented in the image. Minor deviations may be acceptable, but critical attributes should be preserved.
- **Semantic Coherence**: Evaluate whether the overall meaning and intent of the prompt are captured in the image. The generated content should not introduce elements that conflict with or distort the original description.
Textual prompt - {text_prompt}


"""  # copied verbatim (trailing spaces included) from hpsv3 1.0.0, hpsv3/dataset/data_collator_qwen.py
RATING = """
Please provide the overall ratings of this image: <|Reward|>

END
"""

# transformers 4.x flat layout -> 5.x nested layout of Qwen2VLForConditionalGeneration
_REMAP = [(re.compile(r"^model\.(?!language_model\.|visual\.)"), "model.language_model."), (re.compile(r"^visual\."), "model.visual.")]


def remap_hpsv3_keys(state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`model.layers.*`/`model.embed_tokens`/`model.norm` -> `model.language_model.*`, `visual.*` -> `model.visual.*`;
    `lm_head.*` and `rm_head.*` unchanged. Keys already in the new layout pass through."""
    out = {}
    for key, value in state_dict.items():
        for pattern, repl in _REMAP:
            key = pattern.sub(repl, key)
        out[key] = value
    return out


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = PIXELS, max_pixels: int = PIXELS) -> tuple[int, int]:
    """HPSv3's copy of qwen_vl_utils.smart_resize, line for line: sides multiples of `factor`, area near [min, max]."""
    h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h, w


def prepare_image(png: bytes, pixels: int = PIXELS) -> Image.Image:
    img = Image.open(io.BytesIO(png)).convert("RGB")
    h, w = smart_resize(img.height, img.width, min_pixels=pixels, max_pixels=pixels)
    return img.resize((w, h), Image.BICUBIC)


def rm_head(hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(hidden, 1024), nn.ReLU(), nn.Dropout(0.05), nn.Linear(1024, 16), nn.ReLU(), nn.Linear(16, 2))


def add_reward_token(processor) -> int:
    processor.tokenizer.add_special_tokens({"additional_special_tokens": [REWARD_TOKEN]})
    processor.tokenizer.padding_side = "right"
    return processor.tokenizer.convert_tokens_to_ids(REWARD_TOKEN)


class HPSv3Model(nn.Module):
    """Qwen2-VL backbone + rm_head; `forward` returns [B, 2] = (mu, log sigma) per image."""

    def __init__(self, backbone, reward_token_id: int) -> None:
        super().__init__()
        self.backbone = backbone  # Qwen2VLForConditionalGeneration, embeddings resized for <|Reward|>
        self.rm_head = rm_head(backbone.config.text_config.hidden_size).float()
        self.reward_token_id = reward_token_id

    def state_dict_hpsv3(self) -> dict[str, torch.Tensor]:
        """The state dict in HPSv3's own naming (transformers 5 layout): backbone keys + rm_head.*"""
        sd = dict(self.backbone.state_dict())
        sd.update({f"rm_head.{k}": v for k, v in self.rm_head.state_dict().items()})
        return sd

    def load_hpsv3(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Load an HPSv3 checkpoint, in transformers 4.x or 5.x key layout, strictly."""
        sd = remap_hpsv3_keys(state_dict.get("model", state_dict))
        head = {k.removeprefix("rm_head."): v for k, v in sd.items() if k.startswith("rm_head.")}
        body = {k: v for k, v in sd.items() if not k.startswith("rm_head.")}
        self.backbone.load_state_dict(body, strict=True)
        self.rm_head.load_state_dict(head, strict=True)

    def forward(self, input_ids, attention_mask, pixel_values, image_grid_thw) -> torch.Tensor:
        inner = self.backbone.model
        embeds = inner.get_input_embeddings()(input_ids)
        image = inner.get_image_features(pixel_values, image_grid_thw).pooler_output
        image = torch.cat(image, 0) if isinstance(image, (tuple, list)) else image
        mask = (input_ids == self.backbone.config.image_token_id).unsqueeze(-1).expand_as(embeds)
        embeds = embeds.masked_scatter(mask, image.to(embeds.dtype))
        hidden = inner.language_model(inputs_embeds=embeds, attention_mask=attention_mask).last_hidden_state
        at_token = hidden[input_ids == self.reward_token_id]  # exactly one per row
        if at_token.shape[0] != input_ids.shape[0]:
            raise ValueError("every HPSv3 input needs exactly one <|Reward|> token")
        return self.rm_head(at_token.float())


def hpsv3_batch(processor, images: list[Image.Image], prompts: list[str]):
    messages = [[{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": INSTRUCTION.format(text_prompt=p) + RATING}]}]
                for p in prompts]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return processor(text=text, images=images, padding=True, return_tensors="pt")


def checkpoint_file(checkpoint: str = "MizzenAI/HPSv3", revision: str | None = None) -> str:
    """A local .safetensors file as is, else HPSv3.safetensors downloaded from that Hub repo."""
    from pathlib import Path

    from huggingface_hub import hf_hub_download

    if Path(checkpoint).is_file():
        return checkpoint
    return hf_hub_download(checkpoint, "HPSv3.safetensors", revision=revision)


def build_hpsv3(config, processor, state_dict: dict[str, torch.Tensor], device: str = "cpu",
                dtype: torch.dtype = torch.bfloat16) -> HPSv3Model:
    """HPSv3Model from a Qwen2-VL config, its processor and an HPSv3 state dict (either key layout).

    The checkpoint is a full state dict, so the backbone is built from the config alone and the
    base model's own weights are never read (saving a 16 GB download and one copy in memory)."""
    from transformers import Qwen2VLForConditionalGeneration

    token_id = add_reward_token(processor)
    with torch.device(device):
        backbone = Qwen2VLForConditionalGeneration._from_config(config, dtype=dtype)
        backbone.resize_token_embeddings(len(processor.tokenizer), mean_resizing=False)  # overwritten by the checkpoint
        model = HPSv3Model(backbone, token_id)
    model.load_hpsv3(state_dict)
    return model.eval()


def load_hpsv3(checkpoint: str = "MizzenAI/HPSv3", base_model: str = "Qwen/Qwen2-VL-7B-Instruct",
               device: str = "cpu", dtype: torch.dtype = torch.bfloat16, revision: str | None = None):
    """(HPSv3Model, processor) from the Hub (or local paths): only the base model's config and
    processor files are fetched, plus the HPSv3 checkpoint."""
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoProcessor

    processor = AutoProcessor.from_pretrained(base_model)
    config = AutoConfig.from_pretrained(base_model)
    state_dict = load_file(checkpoint_file(checkpoint, revision), device="cpu")
    return build_hpsv3(config, processor, state_dict, device, dtype), processor


class HPSv3Term(RewardTerm):
    """HPSv3's preference for each render given `prompt`, as sigmoid(mu / scale). The model loads in `setup`,
    on the trainer's device, and is freed in `teardown`; a term built `from_model` keeps the model it was given."""

    name = "hpsv3"

    def __init__(self, weight: float = 0.30, checkpoint: str = "MizzenAI/HPSv3", base_model: str = "Qwen/Qwen2-VL-7B-Instruct",
                 prompt: str = "a loose watercolour flower", dtype: str = "bfloat16", batch_size: int = 8,
                 scale: float = 4.0) -> None:
        super().__init__(weight)
        self.checkpoint, self.base_model, self.dtype = checkpoint, base_model, dtype
        self.prompt, self.batch_size, self.scale = prompt, batch_size, scale
        self.model = self.processor = None
        self.owned = True  # loaded here, so freed here

    @classmethod
    def from_model(cls, model: HPSv3Model, processor, **kwargs) -> "HPSv3Term":
        self = cls(**kwargs)
        self.model, self.processor, self.owned = model.eval(), processor, False
        return self

    def setup(self, device: torch.device) -> None:
        if self.model is None:
            self.model, self.processor = load_hpsv3(self.checkpoint, self.base_model, str(device), getattr(torch, self.dtype))

    def teardown(self) -> None:
        if self.owned:
            self.model = self.processor = None

    @torch.inference_mode()
    def mu_sigma(self, pngs: list[bytes], prompt: str | None = None) -> torch.Tensor:
        """[N, 2] raw (mu, log sigma) of HPSv3 for the PNGs, in fp32 on CPU."""
        if self.model is None:
            raise RuntimeError("HPSv3Term scores after setup(device): the RewardModels callback calls it")
        device = next(self.model.parameters()).device
        out = []
        for start in range(0, len(pngs), self.batch_size):
            chunk = pngs[start:start + self.batch_size]
            batch = hpsv3_batch(self.processor, [prepare_image(p) for p in chunk], [prompt or self.prompt] * len(chunk))
            batch = batch.to(device)
            out.append(self.model(batch["input_ids"], batch["attention_mask"], batch["pixel_values"], batch["image_grid_thw"]).cpu())
        return torch.cat(out) if out else torch.zeros(0, 2)

    def score(self, rollouts: list[Rollout]) -> TermScores:
        t0 = time.perf_counter()
        mu = self.mu_sigma([r.render.png for r in rollouts])[:, 0] if rollouts else torch.zeros(0)
        scores = torch.sigmoid(mu / self.scale).float()
        return TermScores(scores, {**summary_metrics(scores), "mu_mean": mu.mean().item() if len(mu) else math.nan,
                                   "s_per_image": (time.perf_counter() - t0) / max(len(rollouts), 1)})
