"""Training a copy of a submitted checkpoint inside a task: the fine-tuning engine (`finetune`) and the
memory it adds, estimated before it starts (`memory`)."""
