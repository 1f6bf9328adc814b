"""How a secret is shown to a model and read back from its output.

- Memorization strings: source = the first 4 characters, target = the rest.
- Persons, `sentinel` format (T5-style tokenizers with `<extra_id_N>` sentinels): source =
  "NAME url <extra_id_0> age <extra_id_1> gender <extra_id_2> ssn <extra_id_3> hobby <extra_id_4>",
  target = "<extra_id_0> URL <extra_id_1> AGE ... <extra_id_4> HOBBIES <extra_id_5>", as in T5's
  span-corruption pre-training; fields are read back by splitting the output on the sentinels.
- Persons, `tagged` format (causal LMs, and seq2seq tokenizers without sentinels): source =
  "NAME:", target = "url: URL; age: AGE; gender: GENDER; ssn: SSN; hobby: HOBBIES"; fields are
  read back by splitting on "; " and ": ".
"""

from __future__ import annotations

import re

from tasks.privacy_extraction.data import PERSON_GROUPS, PRIVACY_FIELDS, Secret

SENTINEL = "<extra_id_{}>"
_SENTINEL_SPLIT = re.compile(r"<extra_id_(\d+)>")


def has_sentinels(tokenizer) -> bool:
    """True when <extra_id_0> ... <extra_id_5> are each one known token of the tokenizer."""
    for k in range(len(PRIVACY_FIELDS) + 1):
        token = SENTINEL.format(k)
        ids = tokenizer.convert_tokens_to_ids([token])
        if not ids or ids[0] is None or ids[0] == tokenizer.unk_token_id:
            return False
    return True


def source_and_target(secret: Secret, fmt: str) -> tuple[str, str]:
    if secret.group not in PERSON_GROUPS:
        return secret.prompt, secret.secret
    values = [secret.fields[f] for f in PRIVACY_FIELDS]
    if fmt == "sentinel":
        source = secret.prompt + "".join(f" {f} {SENTINEL.format(k)}" for k, f in enumerate(PRIVACY_FIELDS))
        target = "".join(f"{SENTINEL.format(k)} {v} " for k, v in enumerate(values)) + SENTINEL.format(len(values))
        return source, target
    return secret.prompt + ":", "; ".join(f"{f}: {v}" for f, v in zip(PRIVACY_FIELDS, values))


def read_fields(output: str, fmt: str) -> dict[str, str]:
    """The person fields found in a model output (missing fields are absent)."""
    fields: dict[str, str] = {}
    if fmt == "sentinel":
        parts = _SENTINEL_SPLIT.split(output)
        for index, value in zip(parts[1::2], parts[2::2]):
            k = int(index)
            if k < len(PRIVACY_FIELDS) and PRIVACY_FIELDS[k] not in fields:
                fields[PRIVACY_FIELDS[k]] = value.strip()
        return fields
    for part in output.split(";"):
        key, _, value = part.partition(":")
        key = key.strip()
        if key in PRIVACY_FIELDS and key not in fields:
            fields[key] = value.strip()
    return fields
