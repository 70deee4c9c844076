"""A small vLLM-like OpenAI /v1/completions server on 127.0.0.1 for the vllm-server sampler tests.

It serves a real transformers model: `/v1/load_lora_adapter` loads the peft folder it is given
on top of the base model (as `vllm serve` does with runtime LoRA updating), and a completion
names the adapter to sample with in `model`. Replies carry the sampled token ids
(`token_id:<id>`, vLLM's `return_tokens_as_token_ids`) and each token's log-prob under
log_softmax(logits / temperature). Every request body is recorded.

`hold_first`: the first completions request is answered only after another one has been, so
a test can see that the client had both in flight and reports them as they finish.
"""

from __future__ import annotations

import copy
import json
import threading
from http.server import BaseHTTPRequestHandler

import torch
from peft import PeftModel

from loopback import LoopbackServer


class CompletionsServer(LoopbackServer):
    def __init__(self, base_model: torch.nn.Module, tokenizer, hold_first: bool = False) -> None:
        self.base, self.tokenizer, self.hold_first = base_model.eval(), tokenizer, hold_first
        self.adapters: dict[str, torch.nn.Module] = {}
        self.loaded: list[dict] = []  # load_lora_adapter bodies
        self.unloaded: list[str] = []
        self.completion_requests: list[dict] = []
        self.answered: list[list[int]] = []  # prompts, in the order their replies were sent
        self.held: list[int] | None = None  # the prompt that was held back
        self._answered_one = threading.Event()
        self._lock = threading.Lock()
        self._generate_lock = threading.Lock()  # one generate at a time on the shared model
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                route = {"/v1/completions": server.complete, "/v1/load_lora_adapter": server.load,
                         "/v1/unload_lora_adapter": server.unload}.get(self.path)
                status, reply = (404, {"error": self.path}) if route is None else route(body)
                data = json.dumps(reply).encode()
                if self.path == "/v1/completions":
                    with server._lock:  # recorded before the client can see the reply
                        server.answered.append(body["prompt"])
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                if self.path == "/v1/completions":
                    server._answered_one.set()

        super().__init__(Handler)

    def load(self, body: dict):
        model = PeftModel.from_pretrained(copy.deepcopy(self.base), body["lora_path"]).eval()
        with self._lock:
            self.loaded.append(body)
            self.adapters[body["lora_name"]] = model
        return 200, {"status": "ok"}

    def unload(self, body: dict):
        with self._lock:
            self.unloaded.append(body["lora_name"])
            found = self.adapters.pop(body["lora_name"], None) is not None
        return (200, {"status": "ok"}) if found else (404, {"error": "not loaded"})

    def complete(self, body: dict):
        with self._lock:
            self.completion_requests.append(body)
            hold = self.hold_first and self.held is None
            if hold:
                self.held = body["prompt"]
            model = self.adapters.get(body["model"])
        if model is None:
            return 404, {"error": f"model {body['model']!r} is not loaded"}
        if hold and not self._answered_one.wait(timeout=30):
            return 504, {"error": "no other request arrived while this one was held"}
        return 200, {"choices": self.generate(model, body)}

    @torch.no_grad()
    def generate(self, model, body: dict) -> list[dict]:
        n, temperature, stop = body["n"], body["temperature"], body["stop_token_ids"]
        ids = torch.tensor([body["prompt"]] * n)
        with self._generate_lock:
            out = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True, temperature=temperature,
                top_p=body["top_p"], top_k=max(0, body["top_k"]), max_new_tokens=body["max_tokens"],
                eos_token_id=stop, pad_token_id=self.tokenizer.pad_token_id,
                output_logits=True, return_dict_in_generate=True,
            )
        tokens = out.sequences[:, ids.shape[1] :]
        logps = torch.stack(out.logits, 1).float().div(temperature).log_softmax(-1).gather(-1, tokens[..., None])[..., 0]
        choices = []
        for k in range(n):
            row = tokens[k].tolist()
            end = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
            choices.append({
                "index": k,
                "text": self.tokenizer.decode(row[:end]),
                "finish_reason": "stop" if end < len(row) or row[end - 1] in stop else "length",
                "logprobs": {"tokens": [f"token_id:{t}" for t in row[:end]],
                             "token_logprobs": logps[k, :end].tolist(), "top_logprobs": None, "text_offset": []},
            })
        return choices
