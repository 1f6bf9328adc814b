"""Tiny random-weight checkpoints of the model families users submit, each with its family's
special tokens, tokenizer layout (byte-level BPE, SentencePiece-style, WordPiece) and the config
layout of its hub checkpoints. Built once per test cache (`build_family`).

Each family records the kind membench must detect, the start token a causal LM must be scored
with (its BOS; None where the family defines none, so a text's first token is unscored), and
which tasks must score it (the others must be skipped with a reason).
"""

from __future__ import annotations

import json
import shutil
import string
from dataclasses import dataclass, field
from pathlib import Path

CAUSAL_TASKS = {"finetune_memorization", "mink_membership", "paywall_memorization", "privacy_extraction", "stereoset", "weat",
                "probe_memorization"}
MASKED_TASKS = {"stereoset", "weat", "probe_memorization"}
SEQ2SEQ_TASKS = {"privacy_extraction", "stereoset", "weat", "probe_memorization"}
ENCODER_TASKS = {"weat", "probe_memorization"}
NER_TASKS = {"ner_prompt_memorization"}

CORPUS = [
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "Members of parliament debated the new budget late into the night.",
    "She said that the doctor was kind, and the nurse was very helpful.",
    "The football club announced the signing of a new striker on Monday.",
    "Scientists in London found that people who sleep well live longer.",
]

# Tiny sizes shared by every family: 2 layers, width 32, 2 heads, context 1024.
WIDTH, LAYERS, HEADS, FFN, CONTEXT = 32, 2, 2, 64, 1024


@dataclass(frozen=True)
class Tokens:
    """A tokenizer layout: model ('bytebpe', 'metaspace', 'wordpiece'), its special tokens in id
    order, their roles, and the template of the special tokens around a single text."""

    model: str
    specials: tuple[str, ...]
    roles: dict = field(default_factory=dict)  # bos_token, eos_token, unk_token, pad_token, mask_token, ...
    template: str = "$A"
    extra: tuple[str, ...] = ()  # additional special tokens appended after the vocabulary (T5 sentinels)


GPT2_TOKENS = Tokens("bytebpe", ("<|endoftext|>",),
                     {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"})
OPT_TOKENS = Tokens("bytebpe", ("<s>", "<pad>", "</s>", "<unk>"),
                    {"bos_token": "</s>", "eos_token": "</s>", "unk_token": "</s>", "pad_token": "<pad>"},
                    "</s> $A")
LLAMA3_TOKENS = Tokens("bytebpe", ("<|begin_of_text|>", "<|end_of_text|>"),
                       {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>"}, "<|begin_of_text|> $A")
QWEN2_TOKENS = Tokens("bytebpe", ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
                      {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})
FALCON_TOKENS = Tokens("bytebpe", (">>TITLE<<", ">>ABSTRACT<<", "<|endoftext|>"), {"eos_token": "<|endoftext|>"})
ROBERTA_TOKENS = Tokens("bytebpe", ("<s>", "<pad>", "</s>", "<unk>"),
                        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                         "cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>"}, "<s> $A </s>",
                        extra=("<mask>",))
LLAMA2_TOKENS = Tokens("metaspace", ("<unk>", "<s>", "</s>"),
                       {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}, "<s> $A")
GEMMA_TOKENS = Tokens("metaspace", ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_image>",
                                    "<end_of_image>", "<image_soft_token>"),
                      {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>", "pad_token": "<pad>"},
                      "<bos> $A")
T5_TOKENS = Tokens("metaspace", ("<pad>", "</s>", "<unk>"),
                   {"eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}, "$A </s>",
                   extra=tuple(f"<extra_id_{i}>" for i in range(99, -1, -1)))
ALBERT_TOKENS = Tokens("metaspace", ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"),
                       {"unk_token": "<unk>", "pad_token": "<pad>", "cls_token": "[CLS]", "sep_token": "[SEP]",
                        "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"}, "[CLS] $A [SEP]")
DEBERTA_TOKENS = Tokens("metaspace", ("[PAD]", "[CLS]", "[SEP]", "[UNK]"),
                        {"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                         "mask_token": "[MASK]", "bos_token": "[CLS]", "eos_token": "[SEP]"}, "[CLS] $A [SEP]",
                        extra=("[MASK]",))
BERT_TOKENS = Tokens("wordpiece", ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),
                     {"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                      "mask_token": "[MASK]"}, "[CLS] $A [SEP]")


@dataclass(frozen=True)
class Family:
    name: str
    config_class: str
    model_class: str
    config: dict
    tokens: Tokens
    kind: str
    tasks: set
    # the start token of a causal LM's scored texts (the family's BOS), None where it has none
    start_token: str | None = None
    architectures: list | None = None  # written into config.json instead of [model_class]; [] removes it


BIO = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
IO = ["O", "PER", "LOC", "ORG", "MISC"]
IOBES = ["O"] + [f"{p}-{t}" for t in ("PER", "LOC", "ORG", "MISC") for p in "BIES"]


def _labels(names: list[str]) -> dict:
    return {"id2label": dict(enumerate(names)), "label2id": {n: i for i, n in enumerate(names)}}


_LLAMA_LIKE = dict(hidden_size=WIDTH, intermediate_size=FFN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                   num_key_value_heads=1, max_position_embeddings=CONTEXT)
_BERT_LIKE = dict(hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=FFN,
                  max_position_embeddings=CONTEXT)
_T5_LIKE = dict(d_model=WIDTH, d_kv=16, d_ff=FFN, num_layers=LAYERS, num_decoder_layers=LAYERS, num_heads=HEADS,
                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
_BART_LIKE = dict(d_model=WIDTH, encoder_layers=LAYERS, decoder_layers=LAYERS, encoder_attention_heads=HEADS,
                  decoder_attention_heads=HEADS, encoder_ffn_dim=FFN, decoder_ffn_dim=FFN,
                  max_position_embeddings=CONTEXT, bos_token_id=0, pad_token_id=1, eos_token_id=2,
                  decoder_start_token_id=2, forced_bos_token_id=0)
_GPT2 = dict(n_embd=WIDTH, n_layer=LAYERS, n_head=HEADS, n_positions=CONTEXT)

FAMILIES = [
    Family("gpt2", "GPT2Config", "GPT2LMHeadModel", _GPT2, GPT2_TOKENS, "causal-lm", CAUSAL_TASKS, "<|endoftext|>"),
    Family("llama2", "LlamaConfig", "LlamaForCausalLM", _LLAMA_LIKE, LLAMA2_TOKENS, "causal-lm", CAUSAL_TASKS, "<s>"),
    Family("llama3", "LlamaConfig", "LlamaForCausalLM", _LLAMA_LIKE, LLAMA3_TOKENS, "causal-lm", CAUSAL_TASKS,
           "<|begin_of_text|>"),
    Family("mistral", "MistralConfig", "MistralForCausalLM", _LLAMA_LIKE, LLAMA2_TOKENS, "causal-lm", CAUSAL_TASKS,
           "<s>"),
    Family("qwen2", "Qwen2Config", "Qwen2ForCausalLM", _LLAMA_LIKE, QWEN2_TOKENS, "causal-lm", CAUSAL_TASKS, None),
    Family("gpt-neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
           dict(hidden_size=WIDTH, intermediate_size=FFN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                max_position_embeddings=CONTEXT), GPT2_TOKENS, "causal-lm", CAUSAL_TASKS, "<|endoftext|>"),
    Family("opt", "OPTConfig", "OPTForCausalLM",
           dict(hidden_size=WIDTH, ffn_dim=FFN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                word_embed_proj_dim=WIDTH, max_position_embeddings=CONTEXT, pad_token_id=1, bos_token_id=2,
                eos_token_id=2), OPT_TOKENS, "causal-lm", CAUSAL_TASKS, "</s>"),
    Family("falcon", "FalconConfig", "FalconForCausalLM",
           dict(hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=HEADS, new_decoder_architecture=False,
                multi_query=True, parallel_attn=True, bias=False, alibi=False, max_position_embeddings=CONTEXT),
           FALCON_TOKENS, "causal-lm", CAUSAL_TASKS, None),
    Family("phi", "PhiConfig", "PhiForCausalLM",
           dict(hidden_size=WIDTH, intermediate_size=FFN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                max_position_embeddings=CONTEXT), GPT2_TOKENS, "causal-lm", CAUSAL_TASKS, "<|endoftext|>"),
    Family("gemma", "GemmaConfig", "GemmaForCausalLM", dict(_LLAMA_LIKE, head_dim=16), GEMMA_TOKENS, "causal-lm",
           CAUSAL_TASKS, "<bos>"),
    Family("gemma3-multimodal", "Gemma3Config", "Gemma3ForConditionalGeneration",
           dict(text_config=dict(_LLAMA_LIKE, head_dim=16, sliding_window=64, model_type="gemma3_text"),
                vision_config=dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                                   image_size=28, patch_size=14, model_type="siglip_vision_model"),
                mm_tokens_per_image=4, boi_token_index=5, eoi_token_index=6, image_token_index=7),
           GEMMA_TOKENS, "causal-lm", CAUSAL_TASKS, "<bos>"),
    Family("bert", "BertConfig", "BertForMaskedLM", _BERT_LIKE, BERT_TOKENS, "masked-lm", MASKED_TASKS),
    Family("roberta", "RobertaConfig", "RobertaForMaskedLM", dict(_BERT_LIKE, max_position_embeddings=CONTEXT + 2,
                                                                  pad_token_id=1, bos_token_id=0, eos_token_id=2),
           ROBERTA_TOKENS, "masked-lm", MASKED_TASKS),
    Family("deberta-v2", "DebertaV2Config", "DebertaV2ForMaskedLM", dict(_BERT_LIKE, pad_token_id=0),
           DEBERTA_TOKENS, "masked-lm", MASKED_TASKS),
    Family("albert", "AlbertConfig", "AlbertForMaskedLM", dict(_BERT_LIKE, embedding_size=16, pad_token_id=0),
           ALBERT_TOKENS, "masked-lm", MASKED_TASKS),
    Family("distilbert", "DistilBertConfig", "DistilBertForMaskedLM",
           dict(dim=WIDTH, n_layers=LAYERS, n_heads=HEADS, hidden_dim=FFN, max_position_embeddings=CONTEXT),
           BERT_TOKENS, "masked-lm", MASKED_TASKS),
    Family("electra", "ElectraConfig", "ElectraForMaskedLM", dict(_BERT_LIKE, embedding_size=16), BERT_TOKENS,
           "masked-lm", MASKED_TASKS),
    Family("t5", "T5Config", "T5ForConditionalGeneration", _T5_LIKE, T5_TOKENS, "seq2seq", SEQ2SEQ_TASKS),
    Family("t5-original-config", "T5Config", "T5ForConditionalGeneration", _T5_LIKE, T5_TOKENS, "seq2seq",
           SEQ2SEQ_TASKS, architectures=["T5WithLMHeadModel"]),
    Family("t5-encoder", "T5Config", "T5EncoderModel", _T5_LIKE, T5_TOKENS, "encoder", ENCODER_TASKS),
    Family("mt5", "MT5Config", "MT5ForConditionalGeneration", _T5_LIKE, T5_TOKENS, "seq2seq", SEQ2SEQ_TASKS),
    Family("bart", "BartConfig", "BartForConditionalGeneration", _BART_LIKE, ROBERTA_TOKENS, "seq2seq", SEQ2SEQ_TASKS),
    Family("bert-encoder", "BertConfig", "BertModel", _BERT_LIKE, BERT_TOKENS, "encoder", ENCODER_TASKS),
    Family("gpt2-no-architectures", "GPT2Config", "GPT2LMHeadModel", _GPT2, GPT2_TOKENS, "causal-lm", CAUSAL_TASKS,
           "<|endoftext|>", architectures=[]),
    Family("ner-bio", "BertConfig", "BertForTokenClassification", dict(_BERT_LIKE, **_labels(BIO)), BERT_TOKENS,
           "token-classifier", NER_TASKS),
    Family("ner-io", "BertConfig", "BertForTokenClassification", dict(_BERT_LIKE, **_labels(IO)), BERT_TOKENS,
           "token-classifier", NER_TASKS),
    Family("ner-iobes", "RobertaConfig", "RobertaForTokenClassification",
           dict(_BERT_LIKE, max_position_embeddings=CONTEXT + 2, pad_token_id=1, **_labels(IOBES)), ROBERTA_TOKENS,
           "token-classifier", NER_TASKS),
]


def build_tokenizer(tokens: Tokens, vocab_size: int = 400):
    """A fast tokenizer of `tokens`' layout trained on a small corpus; every ASCII character is in its
    alphabet, so English text never falls back to the unknown token."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    alphabet = list(string.ascii_letters + string.digits + string.punctuation)
    if tokens.model == "wordpiece":
        tokenizer = Tokenizer(models.WordPiece(unk_token=tokens.roles["unk_token"]))
        tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tokenizer.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=list(tokens.specials),
                                            initial_alphabet=alphabet)
    elif tokens.model == "metaspace":
        tokenizer = Tokenizer(models.BPE(unk_token=tokens.roles.get("unk_token"), fuse_unk=True))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(tokens.specials),
                                      initial_alphabet=alphabet)
    else:
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(tokens.specials),
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    if tokens.extra:
        tokenizer.add_special_tokens(list(tokens.extra))
    if tokens.template != "$A":
        pieces = [p for p in tokens.template.split() if p != "$A"]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=tokens.template, pair=tokens.template + " $B",
            special_tokens=[(p, tokenizer.token_to_id(p)) for p in dict.fromkeys(pieces)])
    extra = {"additional_special_tokens": [t for t in tokens.extra if t.startswith("<extra_id_")]} \
        if any(t.startswith("<extra_id_") for t in tokens.extra) else {}
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, model_max_length=CONTEXT, **tokens.roles, **extra)


def build_family(family: Family, root: Path) -> Path:
    """The family's checkpoint folder under `root` (built on first use, then reused)."""
    import torch
    import transformers

    folder = root / family.name
    if (folder / "config.json").is_file():
        return folder
    tokenizer = build_tokenizer(family.tokens)
    settings = dict(family.config, vocab_size=len(tokenizer))
    if "text_config" in settings:
        settings = dict(settings, text_config=dict(settings["text_config"], vocab_size=len(tokenizer)))
        settings.pop("vocab_size")
    for role in ("bos", "eos", "pad"):
        token_id = getattr(tokenizer, f"{role}_token_id")
        if token_id is not None and f"{role}_token_id" not in settings and "text_config" not in settings:
            settings[f"{role}_token_id"] = token_id
    config = getattr(transformers, family.config_class)(**settings)
    torch.manual_seed(0)
    model = getattr(transformers, family.model_class)(config).eval()
    staging = root / f".{family.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    model.save_pretrained(staging, safe_serialization=True)
    tokenizer.save_pretrained(staging)
    if family.architectures is not None:
        path = staging / "config.json"
        saved = json.loads(path.read_text())
        if family.architectures:
            saved["architectures"] = family.architectures
        else:
            saved.pop("architectures", None)
        path.write_text(json.dumps(saved, indent=2))
    staging.rename(folder)
    return folder
