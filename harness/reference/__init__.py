"""Reference checkpoints: the models the project trains itself, the positive and negative controls.

`recipes` (the registry of builds), `train` (training code the builds share), one module per build
(`build`: the causal GPT-2s; `ner_build`, `t5_build`, `mlm_build`), their data and corpora
(`corpus`, `japanese`, `ner_data`, `wordpiece`), the real pretrained encoder (`pretrained`),
`reference:<checkpoint>` names (`checkpoints`) and the controls' declared directions and
tolerances (`controls`).

May import: `harness.run` and everything below it.
"""
