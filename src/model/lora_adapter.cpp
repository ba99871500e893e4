#include "model/lora_adapter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>
#include <set>
#include <string_view>

#include "common/bounded_regex.h"
#include "common/file.h"
#include "common/json.h"
#include "model/safetensors.h"

namespace pagoda::model {

size_t LoraAdapter::bytes() const {
    size_t n = 0;
    for (const Buffer& b : owned.buffers)
        n += b.size();
    return n;
}

namespace {

constexpr std::string_view kKeyPrefix = "base_model.model.";

struct AdapterConfig {
    int64_t r = 0;
    double alpha = 8.0;  // peft's default
    bool rslora = false;
    std::vector<std::string> target_list;  // target_modules as a list, or
    std::string target_regex;              // as a regular expression (peft matches the whole module name)
};

bool empty_or_null(const Json* v) {
    return v == nullptr || v->is_null() || ((v->is_array() || v->is_object()) && v->size() == 0);
}

Result<AdapterConfig> parse_config(const std::string& path) {
    PAGODA_ASSIGN_OR_RETURN(const std::string text, read_file(path));
    PAGODA_ASSIGN_OR_RETURN(const Json j, Json::parse(text));
    if (!j.is_object()) return Status::error("adapter_config.json is not a JSON object");
    AdapterConfig c;
    if (const Json* t = j.find("peft_type"); t != nullptr && !(t->is_string() && t->as_string() == "LORA"))
        return Status::error("adapter_config.json: peft_type " + t->dump() + " is not LORA");
    const Json* r = j.find("r");
    if (r == nullptr || !r->is_int() || r->as_int() <= 0)
        return Status::error("adapter_config.json: \"r\" (the rank) must be a positive integer");
    c.r = r->as_int();
    if (const Json* a = j.find("lora_alpha"); a != nullptr && !a->is_null()) {
        if (!a->is_number()) return Status::error("adapter_config.json: \"lora_alpha\" must be a number");
        c.alpha = a->as_double();
    }
    if (const Json* v = j.find("use_rslora"); v != nullptr && v->is_bool()) c.rslora = v->as_bool();
    if (const Json* b = j.find("bias"); b != nullptr && !b->is_null() && !(b->is_string() && b->as_string() == "none"))
        return Status::error("adapter_config.json: bias " + b->dump() + " is not supported (only \"none\")");
    if (!empty_or_null(j.find("modules_to_save")))
        return Status::error("adapter_config.json: modules_to_save " + j.find("modules_to_save")->dump() +
                             " is not supported (an adapter may only add low-rank deltas to projections)");
    if (const Json* d = j.find("use_dora"); d != nullptr && d->is_bool() && d->as_bool())
        return Status::error("adapter_config.json: DoRA adapters (use_dora) are not supported");
    if (!empty_or_null(j.find("target_parameters")))
        return Status::error("adapter_config.json: target_parameters " + j.find("target_parameters")->dump() +
                             " (LoRA on parameters, such as fused MoE experts) is not supported; attention "
                             "projections, dense MLPs and shared experts are");
    for (const char* key : {"rank_pattern", "alpha_pattern"})
        if (!empty_or_null(j.find(key)))
            return Status::error(std::string("adapter_config.json: ") + key + " is not supported (one rank and alpha)");
    const Json* t = j.find("target_modules");
    if (t != nullptr && t->is_string()) {
        c.target_regex = t->as_string();
    } else if (t != nullptr && t->is_array() && t->size() > 0) {
        for (const Json& m : t->as_array()) {
            if (!m.is_string()) return Status::error("adapter_config.json: target_modules must hold strings");
            c.target_list.push_back(m.as_string());
        }
    } else {
        return Status::error("adapter_config.json: target_modules must be a non-empty list or a regular expression");
    }
    return c;
}

// peft's rule for a list entry: the module's name is the entry, or ends with "." + entry.
bool matches_entry(const std::string& module, const std::string& entry) {
    return module == entry ||
           (module.size() > entry.size() && module.ends_with(entry) && module[module.size() - entry.size() - 1] == '.');
}

std::string projection_names(const LoraTargets& targets) {
    std::set<std::string> names;
    for (const auto& [module, target] : targets)
        names.insert(module.substr(module.rfind('.') + 1));
    std::string out;
    for (const std::string& n : names)
        out += (out.empty() ? "" : ", ") + n;
    return out;
}

// target_modules as a regular expression (peft fullmatches it against module names), compiled so that no pattern can
// take the server down (common/bounded_regex.h). Lookahead, which some trainers write (^(?!.*visual).*q_proj), works.
Result<std::regex> compile_target_regex(const std::string& pattern) {
    auto re = compile_bounded_regex(pattern);
    if (re.ok()) return re;
    return Status::error("adapter_config.json: target_modules '" + pattern.substr(0, 200) +
                         (pattern.size() > 200 ? "...' " : "' ") + re.message());
}

// Every target_modules entry must name projections of this model.
Status check_targets(const AdapterConfig& c, const LoraTargets& targets) {
    if (!c.target_regex.empty()) {
        PAGODA_ASSIGN_OR_RETURN(const std::regex re, compile_target_regex(c.target_regex));
        try {
            for (const auto& [module, target] : targets)
                if (std::regex_match(module, re)) return ok_status();
        } catch (const std::regex_error& e) {
            return Status::error("adapter_config.json: target_modules could not be matched (" + std::string(e.what()) +
                                 ")");
        }
        return Status::error("adapter_config.json: target_modules '" + c.target_regex +
                             "' matches no projection of this model (its projections: " + projection_names(targets) +
                             ")");
    }
    for (const std::string& entry : c.target_list) {
        bool found = false;
        for (const auto& [module, target] : targets)
            found = found || matches_entry(module, entry);
        if (!found)
            return Status::error(
                "adapter_config.json: target module '" + entry +
                "' is not a projection this model has LoRA for (its projections: " + projection_names(targets) + ")");
    }
    return ok_status();
}

// The module a key names, spelled as the model's targets are.
std::string target_name(std::string module, const std::string& weight_prefix) {
    if (weight_prefix != "model." && module.starts_with("model.layers."))
        module = weight_prefix + module.substr(std::string_view("model.").size());
    return module;
}

struct ModuleKeys {
    std::string a, b;
};

// The adapter's tensors by module; anything but lora_A / lora_B of a projection is refused by name.
Result<std::map<std::string, ModuleKeys>> group_keys(const Checkpoint& ckpt, const LoraTargets& targets,
                                                     const std::string& weight_prefix) {
    std::map<std::string, ModuleKeys> modules;
    for (const TensorView* t : ckpt.tensors()) {
        const std::string& key = t->name;
        const bool is_a = key.ends_with(".lora_A.weight"), is_b = key.ends_with(".lora_B.weight");
        if (!key.starts_with(kKeyPrefix) || (!is_a && !is_b))
            return Status::error("adapter_model.safetensors: tensor '" + key +
                                 "' is not a LoRA A or B matrix (base_model.model.<module>.lora_A.weight / "
                                 "lora_B.weight)");
        const size_t suffix = std::string_view(".lora_A.weight").size();
        const std::string module =
            target_name(key.substr(kKeyPrefix.size(), key.size() - kKeyPrefix.size() - suffix), weight_prefix);
        if (!targets.count(module)) {
            if (module.find(".experts.") != std::string::npos)
                return Status::error("adapter_model.safetensors: '" + key +
                                     "': LoRA on MoE experts is not supported (attention projections, dense MLPs "
                                     "and shared experts are)");
            return Status::error("adapter_model.safetensors: '" + key + "': module " + module +
                                 " is not a projection of this model that LoRA applies to");
        }
        (is_a ? modules[module].a : modules[module].b) = key;
    }
    if (modules.empty()) return Status::error("adapter_model.safetensors holds no LoRA weights");
    for (const auto& [module, keys] : modules) {
        if (keys.a.empty()) return Status::error("adapter_model.safetensors: " + module + " has lora_B but no lora_A");
        if (keys.b.empty()) return Status::error("adapter_model.safetensors: " + module + " has lora_A but no lora_B");
    }
    return modules;
}

// Copies rows `rows` of b (all when empty) into a new owned tensor.
Tensor take_rows(WeightLoader& loader, const Tensor& b, const std::vector<int64_t>& rows) {
    if (rows.empty()) return b;
    const int64_t r = b.dim(1);
    Tensor out = loader.allocate(DType::F32, Shape{static_cast<int64_t>(rows.size()), r});
    for (size_t i = 0; i < rows.size(); ++i)
        std::memcpy(out.data_as<float>() + static_cast<int64_t>(i) * r, b.data_as<float>() + rows[i] * r,
                    static_cast<size_t>(r) * sizeof(float));
    return out;
}

}  // namespace

Result<std::shared_ptr<const LoraAdapter>> read_lora_adapter(const std::string& dir, const LoraTargets& targets,
                                                             const std::string& weight_prefix, int64_t max_rank) {
    const std::string config_path = dir + "/adapter_config.json";
    const std::string weights_path = dir + "/adapter_model.safetensors";
    if (!file_exists(config_path)) return Status::error(dir + ": no adapter_config.json (not a PEFT LoRA adapter)");
    if (!file_exists(weights_path)) {
        if (file_exists(dir + "/adapter_model.bin"))
            return Status::error(dir + ": adapter_model.bin (pickle) is not read; save with safe_serialization=True");
        return Status::error(dir + ": no adapter_model.safetensors");
    }
    auto config = parse_config(config_path);
    if (!config.ok()) return config.status().with_context(dir);
    const AdapterConfig& c = *config;
    if (c.r > max_rank)
        return Status::error(dir + ": rank " + std::to_string(c.r) + " exceeds --max-lora-rank " +
                             std::to_string(max_rank));
    if (Status s = check_targets(c, targets); !s.ok()) return s.with_context(dir);
    auto ckpt = Checkpoint::open_files({weights_path});
    if (!ckpt.ok()) return ckpt.status().with_context(dir);
    auto modules = group_keys(*ckpt, targets, weight_prefix);
    if (!modules.ok()) return modules.status().with_context(dir);

    auto adapter = std::make_shared<LoraAdapter>();
    adapter->path = dir;
    adapter->rank = c.r;
    adapter->scale = static_cast<float>(c.rslora ? c.alpha / std::sqrt(static_cast<double>(c.r)) : c.alpha / c.r);
    WeightLoader loader(*ckpt, adapter->owned);
    for (const auto& [module, keys] : *modules) {
        const LoraTarget& target = targets.at(module);
        auto a = loader.f32(keys.a, Shape{c.r, target.in_features});
        auto b = a.ok() ? loader.f32(keys.b, Shape{target.out_features, c.r}) : Result<Tensor>(a.status());
        if (!b.ok())
            return b.status().with_context(dir + ": " + module + " (rank " + std::to_string(c.r) + ", " +
                                           std::to_string(target.out_features) + " x " +
                                           std::to_string(target.in_features) + ")");
        for (const LoraTargetPart& part : target.parts)
            adapter->modules.push_back(LoraModule{part.weight, *a, take_rows(loader, *b, part.b_rows)});
    }
    return std::shared_ptr<const LoraAdapter>(std::move(adapter));
}

}  // namespace pagoda::model
