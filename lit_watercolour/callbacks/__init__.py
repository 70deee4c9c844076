"""Lightning callbacks that read the `StepResult` each training step returns: the gallery, the run
log (`rollouts.jsonl`) and the adapter checkpoints."""
