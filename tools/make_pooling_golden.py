#!/usr/bin/env python3
"""Build a tiny random Qwen3 checkpoint shaped as Qwen3-Embedding / Qwen3-Reranker and record the references of the
pooling endpoints: sentence-transformers' embeddings and the reranker score of transformers' logits.

Needs torch, transformers and sentence-transformers (a throwaway venv: pip install torch transformers
sentence-transformers). Runs on the CPU in fp32.

It writes OUT/ (copied to tests/golden/qwen3_pooling/):
  config.json, model.safetensors       Qwen3ForCausalLM, bf16, tied embeddings, vocab 384
  tokenizer.json, tokenizer_config.json a byte-level BPE of 256 bytes + a few merges ("yes", "no", " the", ...) and
                                        the Qwen specials, with Qwen3-Embedding's post-processor: ByteLevel, then
                                        TemplateProcessing appending <|endoftext|> to every sequence
  modules.json, 1_Pooling/config.json, 2_Normalize/, config_sentence_transformers.json, sentence_bert_config.json
                                        as Qwen3-Embedding ships them (last-token pooling, then Normalize)
  reference.json                        inputs, their token ids, sentence-transformers' embeddings (and cut to
                                        `dimensions` and renormalised), the rerank query and documents as the
                                        client formats them, the pairs' lengths and scores

Usage: python3 tools/make_pooling_golden.py OUT_DIR
"""
import gzip
import json
import os
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_tiny_models import randomise  # noqa: E402

QWEN_TOKENIZER = os.environ.get("QWEN_TOKENIZER_JSON",
                                 os.path.join(os.path.dirname(__file__), "..", "..", "shared", "qwen-tokenizers",
                                              "qwen3-4b", "tokenizer.json.gz"))
# Words that become single tokens (byte-level spellings: Ġ is a space), so "yes" and "no" are tokens as in Qwen's
# vocabulary and texts are not all single bytes.
WORDS = ["yes", "no", "the", "Ġthe", "is", "Ġis", "Ġof", "Ġa", "in", "Ġin", "Ġcapital", "ĠParis", "ĠFrance", "Query",
         "Document", "Instruct", "Ġquery", "Ġdocument", "Ġwhat", "ĠWhat"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB = 384  # embedding rows; the tokenizer's ids stop below (as Qwen's 151,669 tokens in 151,936 rows)

EMBED_INPUTS = ["Hello world", "What is the capital of France?", "The capital of France is Paris.", "no", "yes"]
EMBED_DIMENSIONS = 16
# Qwen3-Reranker's prompt as vLLM's example and the model card write it: the client formats query and documents.
RERANK_PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the "
                 "Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
RERANK_SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
RERANK_INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"
RERANK_QUERY = "What is the capital of France?"
RERANK_DOCUMENTS = ["The capital of France is Paris.", "Reranking is fun!", "no", "yes yes yes"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def tokenizer_json():
    base = json.load(gzip.open(QWEN_TOKENIZER))
    vocab = {c: i for i, c in enumerate(bytes_to_unicode())}
    merges = []
    for w in WORDS:  # left to right: "yes" = (y e) then (ye s)
        left = w[0]
        for ch in w[1:]:
            merged = left + ch
            if merged not in vocab:
                merges.append([left, ch])
                vocab[merged] = len(vocab)
            left = merged
    base["model"]["vocab"] = vocab
    base["model"]["merges"] = merges
    first = len(vocab)
    base["added_tokens"] = [dict(id=first + k, content=s, single_word=False, lstrip=False, rstrip=False,
                                 normalized=False, special=True) for k, s in enumerate(SPECIALS)]
    eot = {"id": "<|endoftext|>", "ids": [first], "tokens": ["<|endoftext|>"]}
    base["post_processor"] = {"type": "Sequence", "processors": [
        base["post_processor"],
        {"type": "TemplateProcessing",
         "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
         "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                  {"SpecialToken": {"id": "<|endoftext|>", "type_id": 1}}],
         "special_tokens": {"<|endoftext|>": eot}}]}
    return base, first


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f, indent=2, ensure_ascii=False)
        f.write("\n")


def write_checkpoint(out, eot):
    kw = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, rms_norm_eps=1e-6,
              max_position_embeddings=512, rope_parameters={"rope_type": "default", "rope_theta": 1e6},
              bos_token_id=eot, eos_token_id=eot + 2, pad_token_id=eot)
    cfg = AutoConfig.for_model("qwen3", **kw)
    cfg.architectures = ["Qwen3ForCausalLM"]
    model = AutoModelForCausalLM.from_config(cfg)
    randomise(model, torch.Generator().manual_seed(20261204))
    model.to(torch.bfloat16).save_pretrained(out)


def write_sentence_transformers_files(out):
    write_json(os.path.join(out, "modules.json"), [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])
    write_json(os.path.join(out, "1_Pooling", "config.json"), {
        "word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True})
    os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    write_json(os.path.join(out, "config_sentence_transformers.json"), {
        "prompts": {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\n"
                             "Query:", "document": ""},
        "default_prompt_name": None, "similarity_fn_name": "cosine"})
    write_json(os.path.join(out, "sentence_bert_config.json"), {"max_seq_length": 512, "do_lower_case": False})


def rounded(values):
    """8 significant digits: far below the tests' tolerance, and a reference.json of a few KB."""
    if isinstance(values, list):
        return [rounded(v) for v in values]
    return float(f"{values:.8g}")


@torch.no_grad()
def main(out):
    os.makedirs(out, exist_ok=True)
    tok_json, eot = tokenizer_json()
    write_json(os.path.join(out, "tokenizer.json"), tok_json)
    write_json(os.path.join(out, "tokenizer_config.json"), {
        "tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "padding_side": "left", "model_max_length": 512, "clean_up_tokenization_spaces": False,
        "add_bos_token": False, "bos_token": None, "unk_token": None})
    write_checkpoint(out, eot)
    write_sentence_transformers_files(out)

    from sentence_transformers import SentenceTransformer
    import sentence_transformers
    tok = AutoTokenizer.from_pretrained(out)
    st = SentenceTransformer(out, device="cpu", model_kwargs={"dtype": torch.float32})
    embeddings = st.encode(EMBED_INPUTS, convert_to_numpy=True, batch_size=1)
    ids = [tok(t)["input_ids"] for t in EMBED_INPUTS]
    assert all(i[-1] == eot for i in ids), "the post-processor did not append <|endoftext|>"
    # The same by hand: transformers' last hidden state of the last token, normalised.
    base = AutoModel.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    for i, e in zip(ids, embeddings):
        h = base(input_ids=torch.tensor([i])).last_hidden_state[0, -1]
        h = torch.nn.functional.normalize(h, dim=0).numpy()
        assert abs(h - e).max() < 1e-5, abs(h - e).max()
    cut = torch.nn.functional.normalize(torch.tensor(embeddings[:, :EMBED_DIMENSIONS]), dim=1).numpy()

    lm = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    no, yes = tok.convert_tokens_to_ids("no"), tok.convert_tokens_to_ids("yes")
    query = f"{RERANK_PREFIX}<Instruct>: {RERANK_INSTRUCTION}\n<Query>: {RERANK_QUERY}\n"
    documents = [f"<Document>: {d}{RERANK_SUFFIX}" for d in RERANK_DOCUMENTS]
    pairs, scores = [], []
    for d in documents:
        pair = tok(query, add_special_tokens=False)["input_ids"] + tok(d, add_special_tokens=False)["input_ids"]
        logits = lm(input_ids=torch.tensor([pair])).logits[0, -1]
        p = torch.softmax(torch.stack([logits[no], logits[yes]]), dim=0)[1].item()  # the model card's formula
        pairs.append(pair)
        scores.append(p)

    write_json(os.path.join(out, "reference.json"), {
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "sentence_transformers": sentence_transformers.__version__},
        "embed": {"inputs": EMBED_INPUTS, "ids": ids, "embeddings": rounded(embeddings.tolist()),
                  "dimensions": EMBED_DIMENSIONS, "embeddings_cut": rounded(cut.tolist())},
        "rerank": {"query": query, "documents": documents, "no_id": no, "yes_id": yes,
                   "pair_lengths": [len(p) for p in pairs], "scores": rounded(scores)},
    })
    print("scores", scores)


if __name__ == "__main__":
    main(sys.argv[1])
