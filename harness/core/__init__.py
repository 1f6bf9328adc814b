"""The contract every other part of membench builds on, and the file primitives it needs.

Holds: the task contract and registry (`task`), the results-file schema (`results`), the model
types a task sees (`model_types`), the keys that tell models apart on the board (`board_keys`),
user errors (`errors`), safe reading, atomic writing and hashing of files (`io`), Ctrl-C handling
(`interrupts`) and progress bars (`progress`).

May import: nothing else of membench (third-party libraries only). The leaderboard imports only this.
"""
