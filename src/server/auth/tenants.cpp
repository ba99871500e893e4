// Tenants: the key file parser, the table and its lookups (see tenants.h).
#include "server/auth/tenants.h"

#include <algorithm>
#include <set>

#include "common/json.h"

namespace pagoda::server::auth {

struct TenantRegistry::Table {
    std::vector<std::pair<std::string, std::shared_ptr<const Tenant>>> keys;  // key -> tenant
};

bool constant_time_equal(std::string_view a, std::string_view b) {
    // Over the longer length, reading the shorter one modulo its size, so neither length cuts the loop short.
    const size_t n = std::max(a.size(), b.size());
    unsigned diff = a.size() == b.size() ? 0u : 1u;
    for (size_t i = 0; i < n; ++i) {
        const auto x = a.empty() ? 0 : static_cast<unsigned char>(a[i % a.size()]);
        const auto y = b.empty() ? 0 : static_cast<unsigned char>(b[i % b.size()]);
        diff |= x ^ y;
    }
    return diff == 0;
}

namespace {

Result<int64_t> limit_field(const Json& v, const std::string& where) {
    if (!v.is_int() || v.as_int() < 0) return Status::error(where + " must be a non-negative integer (0: no limit)");
    return v.as_int();
}

Result<std::vector<std::string>> string_list(const Json& v, const std::string& where) {
    if (!v.is_array()) return Status::error(where + " must be a list of strings");
    std::vector<std::string> out;
    for (const Json& item : v.as_array()) {
        if (!item.is_string() || item.as_string().empty()) return Status::error(where + " must hold non-empty strings");
        out.push_back(item.as_string());
    }
    return out;
}

Result<TenantSpec> parse_tenant(const Json& t, const std::string& where) {
    if (!t.is_object()) return Status::error(where + " must be an object");
    TenantSpec spec;
    for (const auto& [field, value] : t.as_object()) {
        const std::string at = where + "." + field;
        if (field == "name") {
            if (!value.is_string() || value.as_string().empty())
                return Status::error(at + " must be a non-empty string");
            spec.name = value.as_string();
        } else if (field == "keys") {
            PAGODA_ASSIGN_OR_RETURN(spec.keys, string_list(value, at));
        } else if (field == "models") {
            PAGODA_ASSIGN_OR_RETURN(spec.models, string_list(value, at));
        } else if (field == "requests_per_minute") {
            PAGODA_ASSIGN_OR_RETURN(spec.requests_per_minute, limit_field(value, at));
        } else if (field == "tokens_per_minute") {
            PAGODA_ASSIGN_OR_RETURN(spec.tokens_per_minute, limit_field(value, at));
        } else if (field == "admin") {
            if (!value.is_bool()) return Status::error(at + " must be true or false");
            spec.admin = value.as_bool();
        } else {
            return Status::error(at +
                                 ": unknown field (name, keys, models, requests_per_minute, "
                                 "tokens_per_minute, admin)");
        }
    }
    if (spec.name.empty()) return Status::error(where + " has no \"name\"");
    if (spec.keys.empty()) return Status::error(where + " (" + spec.name + ") has no \"keys\"");
    return spec;
}

}  // namespace

Result<std::vector<TenantSpec>> parse_tenants_file(std::string_view json_text) {
    auto j = Json::parse(json_text);
    if (!j.ok()) return j.status();
    const Json* list = j->is_object() ? j->find("tenants") : nullptr;
    if (!list || !list->is_array() || j->as_object().size() != 1)
        return Status::error("the file must be a JSON object {\"tenants\": [...]}");
    std::vector<TenantSpec> out;
    std::set<std::string> names, keys;
    for (size_t i = 0; i < list->as_array().size(); ++i) {
        const std::string where = "tenants[" + std::to_string(i) + "]";
        PAGODA_ASSIGN_OR_RETURN(TenantSpec spec, parse_tenant(list->as_array()[i], where));
        if (!names.insert(spec.name).second) return Status::error(where + ": the name " + spec.name + " is taken");
        for (const std::string& k : spec.keys)
            if (!keys.insert(k).second) return Status::error(where + " (" + spec.name + "): a key is listed twice");
        out.push_back(std::move(spec));
    }
    return out;
}

bool Tenant::may_use(std::string_view model) const {
    return !spec.models || std::find(spec.models->begin(), spec.models->end(), model) != spec.models->end();
}

double Tenant::admit_request() const {
    const double wait = usage->request_bucket.try_take(1.0);
    if (wait > 0.0) {
        usage->rate_limited.fetch_add(1, std::memory_order_relaxed);
        return wait;
    }
    usage->requests.fetch_add(1, std::memory_order_relaxed);
    return 0.0;
}

double Tenant::admit_prompt(int64_t prompt_tokens) const {
    const double wait = usage->token_bucket.try_take(static_cast<double>(prompt_tokens));
    if (wait > 0.0) {
        usage->rate_limited.fetch_add(1, std::memory_order_relaxed);
        return wait;
    }
    usage->prompt_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
    return 0.0;
}

void Tenant::charge_generated(int64_t tokens) const {
    usage->token_bucket.take(static_cast<double>(tokens));
    usage->generation_tokens.fetch_add(tokens, std::memory_order_relaxed);
}

Status TenantRegistry::load(const std::vector<std::string>& api_keys, std::vector<TenantSpec> specs) {
    if (!api_keys.empty() &&
        std::none_of(specs.begin(), specs.end(), [](const TenantSpec& s) { return s.name == "default"; })) {
        TenantSpec d;
        d.name = "default";
        d.keys = api_keys;
        d.admin = true;
        specs.insert(specs.begin(), std::move(d));  // first: a key also in the file belongs to the file's tenant
    }
    auto table = std::make_shared<Table>();
    std::lock_guard lock(mu_);
    for (TenantSpec& spec : specs) {
        auto it = std::find_if(usage_.begin(), usage_.end(), [&](const auto& u) { return u->name == spec.name; });
        std::shared_ptr<TenantUsage> usage = it != usage_.end() ? *it : nullptr;
        if (!usage) {
            usage = std::make_shared<TenantUsage>(spec.name);
            usage_.push_back(usage);
        }
        usage->request_bucket.set_rate(static_cast<double>(spec.requests_per_minute));
        usage->token_bucket.set_rate(static_cast<double>(spec.tokens_per_minute));
        auto tenant = std::make_shared<const Tenant>(Tenant{spec, usage});
        for (const std::string& key : spec.keys)
            table->keys.emplace_back(key, tenant);
    }
    table_ = std::move(table);
    return ok_status();
}

bool TenantRegistry::enabled() const {
    std::lock_guard lock(mu_);
    return table_ && !table_->keys.empty();
}

std::shared_ptr<const Tenant> TenantRegistry::find(std::string_view key) const {
    std::shared_ptr<const Table> table;
    {
        std::lock_guard lock(mu_);
        table = table_;
    }
    if (!table) return nullptr;
    std::shared_ptr<const Tenant> found;
    for (const auto& [k, tenant] : table->keys)  // no early exit: the time does not say which key matched
        if (constant_time_equal(k, key)) found = tenant;
    return found;
}

std::vector<std::shared_ptr<TenantUsage>> TenantRegistry::usage() const {
    std::lock_guard lock(mu_);
    return usage_;
}

}  // namespace pagoda::server::auth
