#include "model/quantization.h"

#include <algorithm>
#include <memory>
#include <regex>
#include <unordered_map>

#include "common/bounded_regex.h"
#include "common/log.h"

namespace pagoda::model {

namespace {

constexpr const char* kServed =
    "pagoda serves fp8 e4m3 checkpoints (quant_method fp8, or compressed-tensors float-quantized 8-bit float weights) "
    "and int4 / int8 weight-only ones (awq gemm, gptq 4- or 8-bit (act-order too, on dense layers), compressed-tensors "
    "pack-quantized W4A16 / W8A16, symmetric or with zero points, auto-round int weights packed as auto_gptq, "
    "gptqmodel or auto_awq; modules' own bits and groups by gptq dynamic rules, auto-round extra_config or "
    "compressed-tensors config groups of integer weights)";

Status not_served(const QuantizationSpec& q, const std::string& why) {
    return Status::error("quantized checkpoint (" + q.describe() + "): " + why + "; " + kServed);
}

Result<std::optional<CheckpointQuantization>> fp8(const QuantizationSpec& q) {
    if (!q.fmt.empty() && q.fmt != "e4m3") return not_served(q, "fp8 format '" + q.fmt + "' is not served yet");
    if (q.activation_scheme == "static") {
        // Static activation scales change the numbers (activations are quantized with the checkpoint's scale);
        // serving them weight-only would not compute what the checkpoint was calibrated for.
        return not_served(q, "static activation scales are not served yet");
    }
    CheckpointQuantization c;
    c.scale_suffix = "weight_scale_inv";
    if (q.weight_block_size.empty()) {
        c.layout = ScaleLayout::kPerTensor;
    } else if (q.weight_block_size.size() == 2 && q.weight_block_size[0] > 0 && q.weight_block_size[1] > 0) {
        c.layout = ScaleLayout::kBlock;
        c.block_rows = q.weight_block_size[0], c.block_cols = q.weight_block_size[1];
    } else {
        return not_served(q, "weight_block_size must be two positive sizes");
    }
    return std::optional<CheckpointQuantization>(c);
}

// An int4 weight-only checkpoint (GPTQ: or int8, `bits`) with groups of `group_size` inputs (<= 0: per channel).
Result<std::optional<CheckpointQuantization>> int4(const QuantizationSpec& q, Int4Packing packing, int64_t group_size,
                                                   bool zero_points, int32_t zero_offset, int bits = 4) {
    if (group_size > 0 && group_size % 2 != 0) return not_served(q, "odd group sizes are not served");
    CheckpointQuantization c;
    c.format = bits == 8 ? WeightFormat::kInt8 : WeightFormat::kInt4;
    c.layout = ScaleLayout::kGroup;
    c.packing = packing;
    c.group_size = std::max<int64_t>(group_size, 0);
    c.zero_points = zero_points;
    c.zero_offset = zero_offset;
    return std::optional<CheckpointQuantization>(c);
}

Result<std::optional<CheckpointQuantization>> awq(const QuantizationSpec& q) {
    if (q.bits != 4) return not_served(q, std::to_string(q.bits) + "-bit AWQ weights are not served");
    if (!q.version.empty() && q.version != "gemm") {
        return not_served(q, "AWQ version '" + q.version + "' packing is not served (version gemm is)");
    }
    if (!q.zero_point) return not_served(q, "AWQ without zero points is not served");
    if (q.group_size <= 0) return not_served(q, "AWQ without groups is not served");
    return int4(q, Int4Packing::kAwqGemm, q.group_size, true, 0);
}

Result<std::optional<CheckpointQuantization>> gptq(const QuantizationSpec& q) {
    if (q.bits != 4 && q.bits != 8) {
        return not_served(q, std::to_string(q.bits) + "-bit GPTQ weights are not served (4- and 8-bit are)");
    }
    const std::string& format = q.checkpoint_format.empty() ? q.format : q.checkpoint_format;
    if (!format.empty() && format != "gptq" && format != "gptq_v2") {
        return not_served(q, "GPTQ checkpoint format '" + format + "' is not served (gptq and gptq_v2 are)");
    }
    // The v1 format stores each zero point minus one (AutoGPTQ's historical off-by-one), v2 as is.
    return int4(q, Int4Packing::kGptq, q.group_size, true, format == "gptq_v2" ? 0 : 1, q.bits);
}

// Intel's AutoRound (quant_method auto-round; Intel/*-int4-AutoRound and many Qwen3.5 / 3.6 quantizations): integer
// weights packed as GPTQ or AWQ lay them out, named by packing_format. The auto_gptq packing stores each zero point
// minus one (GPTQ's v1 convention), the plain auto_round and gptqmodel packings store it as is (auto-round's own
// packer says so; the golden checkpoints made by it hold pagoda to it). Modules it leaves in 16 bits (extra_config,
// or outside block_name_to_quantize) are stored as plain weights.
Result<std::optional<CheckpointQuantization>> auto_round(const QuantizationSpec& q) {
    if (QuantizationSpec::data_type_or_int(q.data_type) != "int")
        return not_served(q, "auto-round data_type '" + q.data_type + "' is not served (int is)");
    if (q.act_bits > 0 && q.act_bits < 16) {
        return not_served(q, "auto-round act_bits " + std::to_string(q.act_bits) +
                                 " (quantized activations) is not served (weight-only is)");
    }
    const std::string packing = q.packing_format.empty() ? "auto_round:auto_gptq" : q.packing_format;
    const bool gptq_v1 = packing == "auto_round:auto_gptq" || packing == "auto_gptq";
    if (gptq_v1 || packing == "auto_round" || packing == "auto_round:gptqmodel") {
        if (q.bits != 4 && q.bits != 8) {
            return not_served(q, std::to_string(q.bits) + "-bit auto-round weights are not served (4- and 8-bit are)");
        }
        return int4(q, Int4Packing::kGptq, q.group_size, true, gptq_v1 ? 1 : 0, static_cast<int>(q.bits));
    }
    if (packing == "auto_round:auto_awq" || packing == "auto_awq") {
        if (q.bits != 4) return not_served(q, std::to_string(q.bits) + "-bit AWQ-packed weights are not served");
        if (q.group_size <= 0) return not_served(q, "AWQ-packed weights without groups are not served");
        return int4(q, Int4Packing::kAwqGemm, q.group_size, true, 0);
    }
    return not_served(q, "auto-round packing_format '" + packing +
                             "' is not served (auto_round:auto_gptq, auto_round, auto_round:gptqmodel and "
                             "auto_round:auto_awq are)");
}

Result<std::optional<CheckpointQuantization>> compressed_tensors(const QuantizationSpec& q) {
    if (q.format == "pack-quantized") {
        // llm-compressor's W4A16 / W8A16 presets, symmetric or with zero points (the _ASYM ones).
        if (q.weight_type != "int" || (q.bits != 4 && q.bits != 8)) {
            return not_served(q, "this pack-quantized variant is not served (int weights of 4 or 8 bits are)");
        }
        if (q.input_bits != 0) {
            return not_served(q, std::to_string(q.input_bits) + "-bit " + q.input_type +
                                     " activations are not served (W4A16 and W8A16: weight-only is)");
        }
        if (q.strategy != "group" && q.strategy != "channel") {
            return not_served(
                q, "weight scale strategy '" + q.strategy + "' is not served for int weights (group, " + "channel)");
        }
        // pack_to_int32 stores each value and each zero point plus 2^(bits-1) (unsigned), so the stored zero is the
        // layout's zero as it is.
        return int4(q, Int4Packing::kPackQuantized, q.strategy == "group" ? q.group_size : 0, !q.sym, 0,
                    static_cast<int>(q.bits));
    }
    if (q.format != "float-quantized" || q.weight_type != "float" || q.bits != 8) {
        return not_served(q, "this variant is not served yet");
    }
    if (!q.sym) return not_served(q, "asymmetric fp8 weights are not served");
    if (q.input_bits != 0 && (q.input_bits != 8 || q.input_type != "float")) {
        return not_served(q, std::to_string(q.input_bits) + "-bit " + q.input_type + " activations are not served");
    }
    CheckpointQuantization c;
    c.scale_suffix = "weight_scale";
    if (q.strategy == "channel") {
        c.layout = ScaleLayout::kPerChannel;
    } else if (q.strategy == "tensor") {
        c.layout = ScaleLayout::kPerTensor;
    } else if (q.strategy == "block" && q.weight_block_size.size() == 2 && q.weight_block_size[0] > 0 &&
               q.weight_block_size[1] > 0) {
        c.layout = ScaleLayout::kBlock;
        c.block_rows = q.weight_block_size[0], c.block_cols = q.weight_block_size[1];
    } else {
        return not_served(q, "weight scale strategy '" + q.strategy + "' is not served yet");
    }
    return std::optional<CheckpointQuantization>(c);
}

// Python's \A and \Z (string start and end), which ECMAScript reads as the letters, as ^ and $.
std::string ecmascript_anchors(const std::string& pattern) {
    std::string out;
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] == '\\' && i + 1 < pattern.size()) {
            const char next = pattern[++i];
            if (next == 'A' || next == 'Z') {
                out += next == 'A' ? '^' : '$';
            } else {
                out += '\\';
                out += next;
            }
        } else {
            out += pattern[i];
        }
    }
    return out;
}

constexpr size_t kMaxExpressionRules = 256;  // (each is tried on every packed module's name)

}  // namespace

struct CheckpointQuantization::ModuleOverrides {
    std::unordered_map<std::string, ModuleOverride> exact;  // auto-round's exact module names
    struct Expression {
        std::regex re;
        bool from_start = false;  // re.match (GPTQModel), else re.search (auto-round)
        ModuleOverride settings;
    };
    std::vector<Expression> expressions;  // in the order they apply

    const ModuleOverride* find(const std::string& module) const {
        if (const auto it = exact.find(module); it != exact.end()) return &it->second;
        return nullptr;
    }
    const ModuleOverride* match(const std::string& module) const {
        std::smatch m;
        for (const Expression& e : expressions)
            if (std::regex_search(
                    module, m, e.re,
                    e.from_start ? std::regex_constants::match_continuous : std::regex_constants::match_default))
                return &e.settings;
        return nullptr;
    }
};

namespace {

// The overrides of `q`'s module rules. A rule pagoda cannot serve (other bits, a data type, desc_act or activation
// bits of its own) is kept with its refusal, said only if it decides a module stored packed (as vLLM, which looks at a
// rule when a layer asks); a key that is not an expression std::regex reads is skipped with a warning (vLLM skips the
// keys Python's re refuses). The GPTQ and AWQ packings store zero points either way, so there a rule's symmetry
// changes nothing; a compressed-tensors group's decides whether its modules store them.
Status add_overrides(const QuantizationSpec& q, CheckpointQuantization& c) {
    using Rule = QuantizationSpec::ModuleRule;
    auto overrides = std::make_shared<CheckpointQuantization::ModuleOverrides>();
    for (const Rule& r : q.module_rules) {
        const std::string what = "the rule for '" + r.pattern + "'";
        CheckpointQuantization::ModuleOverride o;
        o.format = r.bits == 8 ? WeightFormat::kInt8 : WeightFormat::kInt4;
        o.group_size = std::max<int64_t>(r.group_size, 0);
        o.zero_points = c.zero_points;
        std::string why;
        if (r.group) {  // a compressed-tensors config group: its own format, weights and activations
            const auto own = compressed_tensors(*r.group);
            if (!own.ok()) {
                o.refusal = what + ": " + own.message();
            } else if ((*own)->bits() == 0) {
                why = " stores fp8 weights beside the integer ones, which is not served";
            } else {
                o.format = (*own)->format, o.group_size = (*own)->group_size, o.zero_points = (*own)->zero_points;
            }
        } else if (QuantizationSpec::data_type_or_int(r.data_type) != QuantizationSpec::data_type_or_int(q.data_type)) {
            why = " gives data_type '" + r.data_type + "', which is not served";
        } else if (r.desc_act != q.desc_act) {
            why = std::string(" gives desc_act ") + (r.desc_act ? "true" : "false") + ", which is not served";
        } else if (r.act_bits > 0 && r.act_bits < 16) {
            why = " gives " + std::to_string(r.act_bits) + "-bit activations, which are not served (weight-only is)";
        } else if (r.bits != 4 && (r.bits != 8 || c.packing == Int4Packing::kAwqGemm)) {
            why = " gives " + std::to_string(r.bits) + "-bit weights, which are not served (4" +
                  (c.packing == Int4Packing::kAwqGemm ? "" : " and 8") + " are)";
        } else if (r.group_size < -1 || (r.group_size > 0 && r.group_size % 2 != 0)) {
            why = " gives group size " + std::to_string(r.group_size) + ", which is not served";
        } else if (c.packing == Int4Packing::kAwqGemm && r.group_size <= 0) {
            why = " gives AWQ-packed weights without groups, which are not served";
        }
        if (!why.empty()) o.refusal = not_served(q, what + why).message();
        if (r.match == Rule::Match::kExact) {
            overrides->exact.emplace(r.pattern, std::move(o));  // (the first of equal keys: JSON's last wins in
            continue;                                           // Python, but a config has no duplicate keys)
        }
        if (overrides->expressions.size() == kMaxExpressionRules) {
            return not_served(
                q, "more than " + std::to_string(kMaxExpressionRules) + " module rules are regular expressions");
        }
        auto compiled = compile_bounded_regex(ecmascript_anchors(r.pattern));  // (its matching time polynomial)
        if (!compiled.ok() && r.group) {
            // A config group's target says how the modules it matches were stored: skipping it would read them with
            // another group's settings.
            return not_served(q, "the config group target 're:" + r.pattern + "' is an expression this server " +
                                     "does not read (" + compiled.message() + ")");
        }
        if (!compiled.ok()) {
            PAGODA_LOG_WARNING("quantization_config: " + what + " is skipped: the expression " + compiled.message());
            continue;
        }
        // re.search of ".*X" is re.match of it, which the executor does in a fraction of the time.
        const bool from_start = r.match == Rule::Match::kFromStart || r.pattern.rfind(".*", 0) == 0;
        overrides->expressions.push_back({std::move(compiled).value(), from_start, std::move(o)});
    }
    c.overrides = std::move(overrides);
    return ok_status();
}

}  // namespace

std::string CheckpointQuantization::describe() const {
    if (bits() != 0) {
        const char* packings[] = {"", "AWQ GEMM packing", "GPTQ packing", "compressed-tensors pack-quantized"};
        return std::string(format_name(format)) + " (" +
               (group_size > 0 ? "group " + std::to_string(group_size) : "per-channel") +
               (zero_points ? ", zero points" : ", symmetric") + "), " + packings[static_cast<int>(packing)];
    }
    LinearWeight w;
    w.format = format, w.scale_layout = layout, w.block_rows = block_rows, w.block_cols = block_cols;
    return w.describe();
}

Result<std::optional<CheckpointQuantization>> checkpoint_quantization(const QuantizationSpec& q) {
    if (!q.quantized()) return std::optional<CheckpointQuantization>();
    Result<std::optional<CheckpointQuantization>> c =
        not_served(q, "quant_method '" + q.method + "' is not served yet");
    if (q.method == "fp8") c = fp8(q);
    if (q.method == "compressed-tensors") c = compressed_tensors(q);
    if (q.method == "awq") c = awq(q);
    if (q.method == "gptq") c = gptq(q);
    if (q.method == "auto-round") c = auto_round(q);
    if (!c.ok() || q.module_rules.empty()) return c;
    if (q.method != "gptq" && q.method != "auto-round" && q.method != "compressed-tensors") {
        return not_served(q,
                          "modules with their own quantization settings are served for gptq, auto-round and "
                          "compressed-tensors only");
    }
    if ((*c)->bits() == 0) {
        return not_served(q,
                          "config groups of their own beside fp8 weights are not served (beside integer weights "
                          "they are)");
    }
    PAGODA_RETURN_IF_ERROR(add_overrides(q, **c));
    return c;
}

Result<CheckpointQuantization> CheckpointQuantization::for_module(const std::string& name) const {
    if (!overrides) return *this;
    std::string module = module_prefix(name);
    if (!module.empty()) module.pop_back();  // (the "." before the tensor's own name)
    std::string text_module = module;
    if (const size_t at = text_module.find("language_model."); at != std::string::npos)
        text_module.erase(at, std::string_view("language_model.").size());
    const bool nested = text_module != module;
    // Exact names first, then the expressions in order (vLLM's precedence for auto-round and GPTQ rules,
    // compressed-tensors' own for its config groups: model_spec.cpp).
    const ModuleOverride* o = overrides->find(module);
    if (o == nullptr && nested) o = overrides->find(text_module);
    if (o == nullptr) o = overrides->match(module);
    if (o == nullptr && nested) o = overrides->match(text_module);
    if (o == nullptr) return *this;
    if (!o->refusal.empty()) return Status::error(module + ": " + o->refusal);
    CheckpointQuantization c = *this;
    c.format = o->format, c.group_size = o->group_size, c.zero_points = o->zero_points;
    c.overrides = nullptr;
    return c;
}

Result<QuantizationPlan> plan_quantization(const QuantizationSpec& q, std::string_view requested) {
    QuantizationPlan plan;
    if (q.quantized()) {
        // vLLM's names of its Marlin kernels for these formats name the same checkpoints: commands written for vLLM
        // pass them.
        if (requested == "awq_marlin" || requested == "gptq_marlin")
            requested = requested.substr(0, requested.find('_'));
        if (requested == "inc" && q.method == "auto-round") requested = q.method;  // (vLLM's newer name for it)
        if (!requested.empty() && requested != q.method) {
            return Status::error("--quantization " + std::string(requested) +
                                 " does not match the checkpoint's quantization_config (" + q.describe() +
                                 "); leave it out or pass --quantization " + q.method);
        }
        PAGODA_ASSIGN_OR_RETURN(plan.stored, checkpoint_quantization(q));
        return plan;
    }
    if (requested.empty()) return plan;
    if (requested != "fp8") {
        return Status::error("--quantization " + std::string(requested) +
                             ": the checkpoint is not quantized (config.json has no quantization_config), and only fp8 "
                             "quantizes an unquantized checkpoint at load");
    }
    plan.fp8_at_load = true;
    return plan;
}

int64_t dynamic_activation_group(const QuantizationSpec& q, const LinearWeight& w) {
    if (w.format != WeightFormat::kFp8E4M3) return 0;
    if (q.method == "fp8") {
        // The checkpoint's block width, not the weight's: a tensor-parallel cut through a block leaves one scale a
        // column (block_cols 1), and the inputs are still rounded in the checkpoint's groups.
        if (q.activation_scheme != "dynamic") return 0;
        return q.weight_block_size.size() == 2 ? q.weight_block_size[1] : -1;
    }
    if (q.method == "compressed-tensors") {
        if (q.input_bits != 8 || q.input_type != "float" || !q.input_dynamic) return 0;
        if (q.input_strategy == "token") return -1;
        if (q.input_strategy == "group" && q.input_group_size > 0) return q.input_group_size;
    }
    return 0;
}

std::string module_prefix(const std::string& weight_name) {
    constexpr std::string_view kWeight = "weight";
    std::string module = weight_name;
    if (module.size() >= kWeight.size() && module.compare(module.size() - kWeight.size(), kWeight.size(), kWeight) == 0)
        module.resize(module.size() - kWeight.size());
    else
        module += ".";
    return module;
}

std::string packed_name(const std::string& weight_name, const CheckpointQuantization& q) {
    return module_prefix(weight_name) + (q.packing == Int4Packing::kPackQuantized ? "weight_packed" : "qweight");
}

std::string scale_name(const std::string& weight_name, const CheckpointQuantization& q) {
    return module_prefix(weight_name) + q.scale_suffix;
}

}  // namespace pagoda::model
