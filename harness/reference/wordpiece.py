"""The cased WordPiece tokenizer of the BERT reference builds (the NER token classifier and the
masked LM), built by counting so that its vocabulary is the same in every process."""

from __future__ import annotations

from collections import Counter

from tokenizers import BertWordPieceTokenizer, pre_tokenizers
from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_wordpiece_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A cased WordPiece tokenizer with BERT's special tokens and [CLS] ... [SEP] framing.

    Its vocabulary, in id order: the special tokens, every character of the texts (alone and as a
    `##` continuation), then whole words by falling count (ties alphabetical) up to `vocab_size`;
    rarer words are spelled with characters. Built by counting because the `tokenizers` WordPiece
    trainer breaks count ties differently in every process, so its vocabulary is not reproducible.
    """
    counts = Counter(word for text in texts for word, _ in pre_tokenizers.BertPreTokenizer().pre_tokenize_str(text))
    characters = sorted({ch for word in counts for ch in word})
    vocab = SPECIAL_TOKENS + characters + ["##" + ch for ch in characters]
    known = set(vocab)
    words = [w for w, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])) if w not in known]
    vocab += words[: max(0, vocab_size - len(vocab))]
    wordpiece = BertWordPieceTokenizer({token: i for i, token in enumerate(vocab)}, lowercase=False,
                                       strip_accents=False)
    return PreTrainedTokenizerFast(tokenizer_object=wordpiece, unk_token="[UNK]", pad_token="[PAD]",
                                   cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]", model_max_length=512)
