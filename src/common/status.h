// Status and Result<T>: expected failures as values, with a message a person can act on.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace pagoda {

class [[nodiscard]] Status {
public:
    Status() = default;
    static Status error(std::string message) { return Status(std::move(message)); }

    bool ok() const { return !failed_; }
    const std::string& message() const { return message_; }

    // Prepends context ("reading config.json: ") to an error; ok stays ok.
    Status with_context(std::string_view context) const {
        if (ok()) return *this;
        return Status(std::string(context) + ": " + message_);
    }

private:
    explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
    bool failed_ = false;
    std::string message_;
};

inline Status ok_status() { return Status(); }

template <typename T>
class [[nodiscard]] Result {
public:
    Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
    Result(Status status) : value_(std::move(status)) {}  // NOLINT

    bool ok() const { return std::holds_alternative<T>(value_); }
    const Status& status() const& {
        static const Status kOk;
        return ok() ? kOk : std::get<Status>(value_);
    }
    // A temporary's status by value: a reference into a Result about to be destroyed would dangle (as in
    // PAGODA_RETURN_IF_ERROR(f().status()), whose reference outlives f()'s Result).
    Status status() && { return status(); }
    const std::string& message() const { return status().message(); }

    T& value() & { return std::get<T>(value_); }
    const T& value() const& { return std::get<T>(value_); }
    T&& value() && { return std::get<T>(std::move(value_)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }
    const T& operator*() const& { return value(); }

private:
    std::variant<T, Status> value_;
};

inline const Status& status_of(const Status& s) { return s; }
template <typename T>
const Status& status_of(const Result<T>& r) { return r.status(); }

}  // namespace pagoda

// Returns early from a function returning Status or Result<U> when `expr` failed.
#define PAGODA_RETURN_IF_ERROR(expr)                              \
    do {                                                          \
        const auto& _pagoda_status = (expr);                      \
        if (!_pagoda_status.ok()) return ::pagoda::status_of(_pagoda_status); \
    } while (0)

// Assigns the value of a Result to `lhs`, or returns its error.
#define PAGODA_ASSIGN_OR_RETURN(lhs, expr) PAGODA_ASSIGN_OR_RETURN_IMPL(PAGODA_CONCAT(_pagoda_r, __LINE__), lhs, expr)
#define PAGODA_CONCAT_INNER(a, b) a##b
#define PAGODA_CONCAT(a, b) PAGODA_CONCAT_INNER(a, b)
#define PAGODA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
    auto tmp = (expr);                               \
    if (!tmp.ok()) return tmp.status();              \
    lhs = std::move(tmp).value()
