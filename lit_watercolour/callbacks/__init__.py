"""Lightning callbacks: those that read the `StepResult` each training step returns (the gallery, the run
log `rollouts.jsonl`, the adapter checkpoints), and the two the module contributes itself
(`configure_callbacks`): the reward models' lifecycle and predict's painting writer."""
