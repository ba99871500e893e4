#include "cli/serve_lora_flags.h"

#include <algorithm>
#include <cstdlib>

#include "common/json.h"
#include "runtime/lora.h"

namespace pagoda::cli {

void add_lora_flags(ArgParser& p) {
    p.add_switch("enable-lora",
                 "serve LoRA adapters (PEFT format): requests name them as their model; also routes "
                 "/v1/load_lora_adapter and /v1/unload_lora_adapter");
    p.add_option("lora-modules", "NAME=PATH",
                 "adapters served from the start (several after one flag, or the flag repeated; vLLM's JSON form "
                 "{\"name\":..,\"path\":..} too)",
                 true);
    p.add_option("max-loras", "N", "adapters one step may use, each in a device slot (default 1)");
    p.add_option("max-lora-rank", "R", "the largest adapter rank accepted (default 16, at most 512)");
    p.add_option("max-cpu-loras", "N", "adapters kept in host memory (default: --max-loras)");
}

std::vector<std::string> split_lora_modules(std::vector<std::string> args) {
    std::vector<std::string> out;
    for (size_t i = 0; i < args.size(); ++i) {
        out.push_back(args[i]);
        if (args[i] != "--lora-modules") continue;
        out.back() = "--lora-modules=" + (i + 1 < args.size() ? args[++i] : std::string());
        // Further values: words that are not flags and look like NAME=PATH or a JSON object.
        while (i + 1 < args.size() && !args[i + 1].starts_with("-") &&
               (args[i + 1].find('=') != std::string::npos || args[i + 1].starts_with("{")))
            out.push_back("--lora-modules=" + args[++i]);
    }
    return out;
}

namespace {

Result<std::pair<std::string, std::string>> parse_module(const std::string& text) {
    std::string name, path;
    if (text.starts_with("{")) {
        auto j = Json::parse(text);
        const Json* n = j.ok() ? j->find("name") : nullptr;
        const Json* p = j.ok() ? j->find("path") : nullptr;
        if (n == nullptr || p == nullptr || !n->is_string() || !p->is_string())
            return Status::error("--lora-modules " + text + ": the JSON form needs string \"name\" and \"path\"");
        name = n->as_string(), path = p->as_string();
    } else if (const size_t eq = text.find('='); eq != std::string::npos) {
        name = text.substr(0, eq), path = text.substr(eq + 1);
    }
    if (name.empty() || path.empty()) return Status::error("--lora-modules " + text + ": expected NAME=PATH");
    return std::pair{name, path};
}

Status int_flag(const ArgParser& p, const char* flag, int64_t lo, int64_t hi, int32_t& out) {
    const auto v = p.get(flag);
    if (!v) return ok_status();
    char* end = nullptr;
    const long long n = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || n < lo || n > hi)
        return Status::error("--" + std::string(flag) + ": '" + *v + "' is not an integer in [" + std::to_string(lo) +
                             ", " + std::to_string(hi) + "]");
    out = static_cast<int32_t>(n);
    return ok_status();
}

}  // namespace

Status apply_lora_flags(const ArgParser& p, const std::vector<std::string>& served_names, executor::EngineOptions& o) {
    o.enable_lora = p.has("enable-lora");
    if (!o.enable_lora) {
        for (const char* flag : {"lora-modules", "max-loras", "max-lora-rank", "max-cpu-loras"})
            if (p.has(flag)) return Status::error("--" + std::string(flag) + " needs --enable-lora");
        return ok_status();
    }
    PAGODA_RETURN_IF_ERROR(int_flag(p, "max-loras", 1, 1024, o.max_loras));
    PAGODA_RETURN_IF_ERROR(int_flag(p, "max-lora-rank", 1, kMaxLoraRank, o.max_lora_rank));
    PAGODA_RETURN_IF_ERROR(int_flag(p, "max-cpu-loras", 1, 1 << 20, o.max_cpu_loras));
    if (p.has("max-cpu-loras") && o.max_cpu_loras < o.max_loras)
        return Status::error("--max-cpu-loras (" + std::to_string(o.max_cpu_loras) +
                             ") must be at least --max-loras (" + std::to_string(o.max_loras) + ")");
    o.lora_reserved_names = served_names;
    for (const std::string& text : p.get_all("lora-modules")) {
        PAGODA_ASSIGN_OR_RETURN(auto module, parse_module(text));
        const auto taken = [&](const std::string& name) {
            return std::find(served_names.begin(), served_names.end(), name) != served_names.end() ||
                   std::any_of(o.lora_modules.begin(), o.lora_modules.end(),
                               [&](const auto& m) { return m.first == name; });
        };
        if (taken(module.first))
            return Status::error("--lora-modules: the name '" + module.first + "' is given twice (adapters and " +
                                 "--served-model-name share one namespace)");
        o.lora_modules.push_back(std::move(module));
    }
    return ok_status();
}

}  // namespace pagoda::cli
