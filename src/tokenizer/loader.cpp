// Reading tokenizer files: tokenizer.json, or vocab.json + merges.txt + tokenizer_config.json.
// Anything we do not implement exactly is refused with a message, never approximated.
#include <charconv>
#include <string>

#include "common/file.h"
#include "common/json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace pagoda {

using namespace tokenizer_internal;

namespace {

std::string type_of(const Json& obj) {
    const Json* t = obj.find("type");
    return t && t->is_string() ? t->as_string() : std::string();
}

bool flag(const Json& obj, std::string_view key, bool fallback) {
    const Json* v = obj.find(key);
    return v && v->is_bool() ? v->as_bool() : fallback;
}

Result<AddedToken> parse_added_token(const Json& obj, int64_t id, std::string_view where) {
    if (!obj.is_object()) return Status::error(std::string(where) + ": an added token is not an object");
    const Json* content = obj.find("content");
    if (!content || !content->is_string())
        return Status::error(std::string(where) + ": added token " + std::to_string(id) + " has no string \"content\"");
    if (id < 0 || id > INT32_MAX)
        return Status::error(std::string(where) + ": added token id " + std::to_string(id) + " is out of range");
    AddedToken t;
    t.content = content->as_string();
    t.id = static_cast<int32_t>(id);
    t.special = flag(obj, "special", false);
    t.lstrip = flag(obj, "lstrip", false);
    t.rstrip = flag(obj, "rstrip", false);
    t.single_word = flag(obj, "single_word", false);
    t.normalized = flag(obj, "normalized", !t.special);  // HF's default when the flag is absent
    return t;
}

Status parse_vocab(const Json& vocab, TokenizerSpec& spec, std::string_view where) {
    if (!vocab.is_object()) return Status::error(std::string(where) + ": the vocabulary is not a JSON object");
    spec.vocab.reserve(vocab.size());
    for (const auto& [token, id] : vocab.as_object()) {
        if (!id.is_int() || id.as_int() < 0 || id.as_int() > INT32_MAX)
            return Status::error(std::string(where) + ": token \"" + token + "\" has no valid integer id");
        spec.vocab.emplace_back(token, static_cast<int32_t>(id.as_int()));
    }
    return ok_status();
}

Status add_merge_line(std::string_view line, TokenizerSpec& spec, size_t number, std::string_view where) {
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
        return Status::error(std::string(where) + ": merge " + std::to_string(number) + " (\"" + std::string(line) +
                             "\") is not two tokens separated by one space");
    spec.merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
    return ok_status();
}

Status parse_normalizer(const Json* n, TokenizerSpec& spec) {
    if (!n || n->is_null()) {
        spec.nfc = false;
        return ok_status();
    }
    if (type_of(*n) == "NFC") {
        spec.nfc = true;
        return ok_status();
    }
    if (type_of(*n) == "Sequence") {
        const Json* list = n->find("normalizers");
        if (list && list->is_array() && list->size() == 1 && type_of(list->as_array()[0]) == "NFC") {
            spec.nfc = true;
            return ok_status();
        }
        if (list && list->is_array() && list->size() == 0) {
            spec.nfc = false;
            return ok_status();
        }
    }
    return Status::error("unsupported normalizer " + n->dump() + " (only NFC or none)");
}

Status parse_pre_tokenizer(const Json* p, TokenizerSpec& spec) {
    const std::string what = p ? p->dump() : std::string("null");
    auto unsupported = [&] {
        return Status::error("unsupported pre_tokenizer " + what.substr(0, 300) +
                             " (expected Sequence[Split(regex, Isolated), ByteLevel(use_regex=false)])");
    };
    if (!p || type_of(*p) != "Sequence") return unsupported();
    const Json* list = p->find("pretokenizers");
    if (!list || !list->is_array() || list->size() != 2) return unsupported();
    const Json& split = list->as_array()[0];
    const Json& byte_level = list->as_array()[1];
    if (type_of(split) != "Split" || type_of(byte_level) != "ByteLevel") return unsupported();
    const Json* behavior = split.find("behavior");
    if (!behavior || !behavior->is_string() || behavior->as_string() != "Isolated" || flag(split, "invert", false))
        return unsupported();
    const Json* pattern = split.find("pattern");
    const Json* regex = pattern ? pattern->find("Regex") : nullptr;
    if (!regex || !regex->is_string()) return unsupported();
    if (flag(byte_level, "add_prefix_space", false) || flag(byte_level, "use_regex", true)) return unsupported();
    spec.split_regex = regex->as_string();
    return ok_status();
}

Status parse_model(const Json* m, TokenizerSpec& spec) {
    if (!m || !m->is_object()) return Status::error("\"model\" is missing or not an object");
    const std::string type = type_of(*m);
    if (!type.empty() && type != "BPE") return Status::error("unsupported model type \"" + type + "\" (only BPE)");
    if (flag(*m, "byte_fallback", false)) return Status::error("unsupported BPE option byte_fallback=true");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const Json* v = m->find(key);
        if (v && v->is_string() && !v->as_string().empty())
            return Status::error(std::string("unsupported BPE option ") + key + "=\"" + v->as_string() + "\"");
    }
    if (const Json* d = m->find("dropout"); d && d->is_number() && d->as_double() > 0.0)
        return Status::error("unsupported BPE option dropout (it makes encoding random)");
    spec.ignore_merges = flag(*m, "ignore_merges", false);
    const Json* vocab = m->find("vocab");
    if (!vocab) return Status::error("model has no \"vocab\"");
    PAGODA_RETURN_IF_ERROR(parse_vocab(*vocab, spec, "model.vocab"));
    const Json* merges = m->find("merges");
    if (!merges || !merges->is_array()) return Status::error("model has no \"merges\" array");
    spec.merges.reserve(merges->size());
    size_t number = 0;
    for (const Json& e : merges->as_array()) {
        if (e.is_string()) {
            PAGODA_RETURN_IF_ERROR(add_merge_line(e.as_string(), spec, number, "model.merges"));
        } else if (e.is_array() && e.size() == 2 && e.as_array()[0].is_string() && e.as_array()[1].is_string()) {
            spec.merges.emplace_back(e.as_array()[0].as_string(), e.as_array()[1].as_string());
        } else {
            return Status::error("model.merges[" + std::to_string(number) + "] is neither \"a b\" nor [\"a\", \"b\"]");
        }
        ++number;
    }
    return ok_status();
}

Status check_passthrough(const Json* j, std::string_view key) {
    if (!j || j->is_null() || type_of(*j) == "ByteLevel") return ok_status();
    return Status::error("unsupported " + std::string(key) + " of type \"" + type_of(*j) +
                         "\" (only ByteLevel or none)");
}

// TemplateProcessing's "single" template: the special tokens around the sequence ("A"), by their ids in
// "special_tokens". Pair templates are not read (nothing here encodes pairs).
Status parse_template_processing(const Json& j, TokenizerSpec& spec) {
    const Json* single = j.find("single");
    const Json* specials = j.find("special_tokens");
    if (!single || !single->is_array()) return Status::error("TemplateProcessing has no \"single\" list");
    bool seen_sequence = false;
    for (const Json& item : single->as_array()) {
        if (item.find("Sequence")) {
            seen_sequence = true;
            continue;
        }
        const Json* special = item.find("SpecialToken");
        const Json* name = special ? special->find("id") : nullptr;
        if (!name || !name->is_string())
            return Status::error("TemplateProcessing: an item is neither Sequence nor SpecialToken");
        const Json* entry = specials && specials->is_object() ? specials->find(name->as_string()) : nullptr;
        const Json* ids = entry ? entry->find("ids") : nullptr;
        if (!ids || !ids->is_array())
            return Status::error("TemplateProcessing: no ids for \"" + name->as_string() + "\"");
        for (const Json& id : ids->as_array()) {
            if (!id.is_int()) return Status::error("TemplateProcessing: a non-integer id");
            (seen_sequence ? spec.template_suffix : spec.template_prefix).push_back(static_cast<int32_t>(id.as_int()));
        }
    }
    return ok_status();
}

// ByteLevel (offsets only: nothing to do), TemplateProcessing, or a Sequence of those.
Status parse_post_processor(const Json* j, TokenizerSpec& spec) {
    if (!j || j->is_null()) return ok_status();
    const std::string type = type_of(*j);
    if (type == "TemplateProcessing") return parse_template_processing(*j, spec);
    if (type == "Sequence") {
        const Json* list = j->find("processors");
        if (!list || !list->is_array()) return Status::error("post_processor Sequence has no \"processors\" list");
        for (const Json& p : list->as_array())
            PAGODA_RETURN_IF_ERROR(parse_post_processor(&p, spec));
        return ok_status();
    }
    return check_passthrough(j, "post_processor");
}

}  // namespace

Result<Tokenizer> Tokenizer::from_tokenizer_json(std::string_view json_text) {
    auto doc = Json::parse(json_text);
    if (!doc.ok()) return doc.status().with_context("tokenizer.json");
    const Json& root = *doc;
    if (!root.is_object()) return Status::error("tokenizer.json: the document is not a JSON object");
    TokenizerSpec spec;
    Status st = parse_model(root.find("model"), spec);
    if (st.ok()) st = parse_normalizer(root.find("normalizer"), spec);
    if (st.ok()) st = parse_pre_tokenizer(root.find("pre_tokenizer"), spec);
    if (st.ok()) st = check_passthrough(root.find("decoder"), "decoder");
    if (st.ok()) st = parse_post_processor(root.find("post_processor"), spec);
    if (st.ok()) {
        if (const Json* added = root.find("added_tokens"); added && added->is_array()) {
            for (const Json& t : added->as_array()) {
                const Json* id = t.find("id");
                if (!id || !id->is_int()) {
                    st = Status::error("an added token has no integer \"id\"");
                    break;
                }
                auto tok = parse_added_token(t, id->as_int(), "added_tokens");
                if (!tok.ok()) {
                    st = tok.status();
                    break;
                }
                spec.added.push_back(std::move(*tok));
            }
        }
    }
    if (!st.ok()) return st.with_context("tokenizer.json");
    auto impl = build_tokenizer(std::move(spec));
    if (!impl.ok()) return impl.status().with_context("tokenizer.json");
    return Tokenizer(std::move(*impl));
}

Result<Tokenizer> Tokenizer::from_vocab_and_merges(std::string_view vocab_json, std::string_view merges_txt,
                                                   std::string_view tokenizer_config_json) {
    TokenizerSpec spec;
    spec.nfc = true;
    spec.split_regex = std::string(kQwen2Pattern);
    {
        auto vocab = Json::parse(vocab_json);
        if (!vocab.ok()) return vocab.status().with_context("vocab.json");
        PAGODA_RETURN_IF_ERROR(parse_vocab(*vocab, spec, "vocab.json"));
    }
    size_t pos = 0, number = 0;
    while (pos < merges_txt.size()) {
        size_t eol = merges_txt.find('\n', pos);
        if (eol == std::string_view::npos) eol = merges_txt.size();
        std::string_view line = merges_txt.substr(pos, eol - pos);
        pos = eol + 1;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty() || line.starts_with("#version")) continue;
        PAGODA_RETURN_IF_ERROR(add_merge_line(line, spec, number++, "merges.txt"));
    }
    if (!tokenizer_config_json.empty()) {
        auto config = Json::parse(tokenizer_config_json);
        if (!config.ok()) return config.status().with_context("tokenizer_config.json");
        if (const Json* regex = config->find("pretokenize_regex"); regex && regex->is_string())
            spec.split_regex = regex->as_string();
        if (const Json* decoder = config->find("added_tokens_decoder"); decoder && decoder->is_object()) {
            for (const auto& [key, value] : decoder->as_object()) {
                int64_t id = -1;
                const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
                if (ec != std::errc() || end != key.data() + key.size() || id < 0)
                    return Status::error("tokenizer_config.json: added_tokens_decoder key \"" + key +
                                         "\" is not an id");
                PAGODA_ASSIGN_OR_RETURN(AddedToken t, parse_added_token(value, id, "tokenizer_config.json"));
                spec.added.push_back(std::move(t));
            }
        }
    }
    auto impl = build_tokenizer(std::move(spec));
    if (!impl.ok()) return impl.status();
    return Tokenizer(std::move(*impl));
}

Result<Tokenizer> Tokenizer::load_from_dir(const std::string& dir) {
    const std::string json_path = dir + "/tokenizer.json";
    if (file_exists(json_path)) {
        PAGODA_ASSIGN_OR_RETURN(std::string text, read_file(json_path));
        auto t = from_tokenizer_json(text);
        if (!t.ok()) return t.status().with_context(dir);
        return t;
    }
    const std::string vocab_path = dir + "/vocab.json", merges_path = dir + "/merges.txt";
    if (file_exists(vocab_path) && file_exists(merges_path)) {
        PAGODA_ASSIGN_OR_RETURN(std::string vocab, read_file(vocab_path));
        PAGODA_ASSIGN_OR_RETURN(std::string merges, read_file(merges_path));
        std::string config;
        if (file_exists(dir + "/tokenizer_config.json")) {
            PAGODA_ASSIGN_OR_RETURN(config, read_file(dir + "/tokenizer_config.json"));
        }
        auto t = from_vocab_and_merges(vocab, merges, config);
        if (!t.ok()) return t.status().with_context(dir);
        return t;
    }
    return Status::error(dir + ": no tokenizer.json, and no vocab.json + merges.txt");
}

}  // namespace pagoda
