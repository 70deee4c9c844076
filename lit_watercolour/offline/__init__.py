"""Stand-ins for what a real run loads: tiny random-init models, a scripted replay sampler, the corpus the
shipped tiny policy was trained on, and loopback servers (an OpenAI-compatible judge). Tests, benchmarks and
the recipe rehearsal build with them; the runtime imports none of them by an import statement, and loads by name
only `tiny_models`, for `PolicyConfig.tiny`, and `corpus`, for `sft`'s `data.source: corpus`."""
