"""What kind a checkpoint is, read from its config.json, and the transformers class that loads it.

The kind comes from the class in `architectures`, looked up in transformers' auto-class tables (so
`T5WithLMHeadModel` is seq2seq, `T5EncoderModel` an encoder, and multimodal wrappers of a text
model causal LMs), else from a suffix of the name; a config without `architectures` is read by its
`model_type`, with a note that the kind is a guess.
"""

from __future__ import annotations

from harness.core.errors import UserError
from harness.core.model_types import ModelKind

# Architecture names transformers no longer has, and the kind their checkpoints are.
_LEGACY_ARCHITECTURES = {"T5WithLMHeadModel": ModelKind.SEQ2SEQ}  # t5-small ... t5-11b on the hub

# Suffix of an architecture name transformers does not know (remote code) -> kind; first match wins.
_ARCHITECTURE_SUFFIXES = (
    ("ForCausalLM", ModelKind.CAUSAL_LM),
    ("LMHeadModel", ModelKind.CAUSAL_LM),
    ("ForMaskedLM", ModelKind.MASKED_LM),
    ("ForTokenClassification", ModelKind.TOKEN_CLASSIFIER),
    ("ForConditionalGeneration", ModelKind.SEQ2SEQ),
    ("ForSeq2SeqLM", ModelKind.SEQ2SEQ),
    ("EncoderModel", ModelKind.ENCODER),
    ("Model", ModelKind.ENCODER),
)


def _mapping_kinds() -> list[tuple[dict, ModelKind]]:
    """transformers' auto-class tables (model_type -> class name), in the order a kind is looked up:
    seq2seq before causal (BART is in both), causal before masked (BERT's decoder class is named for
    what it is), image-text-to-text wrappers of a causal text model (Llava, Qwen2-VL, Mistral3) as causal."""
    from transformers.models.auto import modeling_auto as auto

    return [(auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, ModelKind.SEQ2SEQ),
            (auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, ModelKind.CAUSAL_LM),
            (auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES, ModelKind.CAUSAL_LM),
            (auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES, ModelKind.MASKED_LM),
            (auto.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES, ModelKind.TOKEN_CLASSIFIER),
            (auto.MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES, ModelKind.ENCODER),
            (auto.MODEL_MAPPING_NAMES, ModelKind.ENCODER)]


def _class_names(value) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def architecture_kind(architecture: str, config: dict) -> ModelKind | None:
    """The kind of a checkpoint saved from class `architecture`: transformers' auto-class tables,
    then legacy names, then the name's suffix; None when nothing matches."""
    if architecture in _LEGACY_ARCHITECTURES:
        return _LEGACY_ARCHITECTURES[architecture]
    for table, kind in _mapping_kinds():
        if any(architecture in _class_names(value) for value in table.values()):
            if kind is ModelKind.CAUSAL_LM and config.get("is_encoder_decoder") is True:
                continue  # a multimodal encoder-decoder: its text side is not a causal LM
            return kind
    for suffix, kind in _ARCHITECTURE_SUFFIXES:
        if architecture.endswith(suffix):
            if kind is ModelKind.SEQ2SEQ and config.get("is_encoder_decoder") is not True:
                # `...ForConditionalGeneration` also names multimodal wrappers of a causal text model
                return ModelKind.CAUSAL_LM if "text_config" in config else None
            if kind is ModelKind.CAUSAL_LM and config.get("is_encoder_decoder") is True:
                return ModelKind.SEQ2SEQ  # `...WithLMHeadModel` of an encoder-decoder
            return kind
    return None


def model_type_kind(model_type: str, config: dict) -> ModelKind | None:
    """The kind a checkpoint of `model_type` most likely is, from the auto-class tables: seq2seq for
    an encoder-decoder type, else masked LM when the type has one (BERT, RoBERTa), else causal LM."""
    tables = {kind: set() for kind in ModelKind}
    for table, kind in _mapping_kinds():
        if model_type in table:
            tables[kind].add(model_type)
    if tables[ModelKind.SEQ2SEQ] and config.get("is_encoder_decoder", True):
        return ModelKind.SEQ2SEQ
    for kind in (ModelKind.MASKED_LM, ModelKind.CAUSAL_LM, ModelKind.ENCODER):
        if tables[kind]:
            return kind
    return None


def detect_kind_with_note(config: dict) -> tuple[ModelKind, str | None]:
    """The model kind from a checkpoint's config.json, and a warning when it is a guess.

    The first architecture named in `architectures` decides (`architecture_kind`); with none, the
    config's `model_type` (`model_type_kind`), said to be a guess; with neither, an encoder (every
    checkpoint has hidden states), also said to be a guess. `--model-kind` overrides all of it."""
    architectures = config.get("architectures")
    if architectures is not None and not (isinstance(architectures, list)
                                          and all(isinstance(a, str) for a in architectures)):
        raise UserError(f"config.json: \"architectures\" must be a list of class names, not {architectures!r}")
    for architecture in architectures or []:
        kind = architecture_kind(architecture, config)
        if kind is not None:
            return kind, None
    named = f"names the architecture {architectures[0]}, which membench does not know" if architectures else \
        "names no architecture"
    model_type = config.get("model_type")
    kind = model_type_kind(model_type, config) if isinstance(model_type, str) else None
    if kind is not None:
        return kind, (f"config.json {named}; scoring it as a {kind.value} model (the usual kind of model_type "
                      f"{model_type!r}): pass --model-kind to choose another")
    if config.get("is_encoder_decoder") is True:
        kind = ModelKind.SEQ2SEQ
    else:
        kind = ModelKind.ENCODER
    return kind, f"config.json {named} and no known model_type; scoring it as a {kind.value} model: pass --model-kind to choose"


def detect_kind(config: dict) -> ModelKind:
    """The model kind from a checkpoint's config.json dictionary (`detect_kind_with_note`)."""
    return detect_kind_with_note(config)[0]


def _auto_class(kind: ModelKind):
    import transformers

    return {
        ModelKind.CAUSAL_LM: transformers.AutoModelForCausalLM,
        ModelKind.MASKED_LM: transformers.AutoModelForMaskedLM,
        ModelKind.SEQ2SEQ: transformers.AutoModelForSeq2SeqLM,
        ModelKind.TOKEN_CLASSIFIER: transformers.AutoModelForTokenClassification,
        ModelKind.ENCODER: transformers.AutoModel,
    }[kind]


def model_class(kind: ModelKind, config: dict):
    """The class to load a checkpoint with: the one its config names when transformers has it and it
    is of `kind` (T5EncoderModel stays an encoder, not a T5Model with a random decoder), else the
    auto class of `kind` (for image-text-to-text wrappers of a causal LM: `AutoModelForImageTextToText`)."""
    import transformers
    from transformers.models.auto import modeling_auto as auto

    for architecture in config.get("architectures") or []:
        named = getattr(transformers, architecture, None)
        if isinstance(named, type) and architecture_kind(architecture, config) is kind:
            return named
    model_type = config.get("model_type")
    if (kind is ModelKind.CAUSAL_LM and model_type in auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
            and model_type not in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        return transformers.AutoModelForImageTextToText
    return _auto_class(kind)
