// Jinja syntax tree: expressions and statements, each with the template line it came from.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace pagoda::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
    enum class Kind {
        kLiteral,    // value
        kName,       // name
        kList,       // children
        kTuple,      // children
        kDict,       // children as key, value pairs
        kGetAttr,    // children[0] . name
        kGetItem,    // children[0] [ children[1] ]
        kSlice,      // children[0] [ children[1] : children[2] : children[3] ] (null children allowed)
        kCall,       // children[0] ( args )
        kFilter,     // children[0] | name ( args )   (children[0] null for {% filter %} blocks)
        kTest,       // children[0] is name ( args ), negated
        kUnary,      // op children[0]: "-", "+", "not"
        kBinary,     // children[0] op children[1]: + - * / // % ** ~ and or
        kCompare,    // children[0] (ops[i] children[i+1])*
        kCondition,  // children[0] if children[1] else children[2] (null: undefined)
    };
    Kind kind;
    int line = 0;
    int depth = 1;  // height of this subtree: evaluation recursion is bounded by the parser's limit on it
    Value value;
    std::string name;  // name / attribute / filter / test / operator
    std::vector<ExprPtr> children;
    std::vector<std::string> ops;  // comparison operators
    // Call, filter and test arguments.
    std::vector<ExprPtr> args;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    bool negated = false;
};

struct MacroDef;

struct Stmt {
    enum class Kind {
        kOutput,       // text
        kPrint,        // expr
        kIf,           // branches: (cond, body)...; else_body
        kFor,          // targets, expr (iterable), filter, body, else_body
        kSet,          // targets (names, or one "ns.attr"), expr
        kSetBlock,     // targets[0], body, filter (optional Filter expr applied to the body)
        kMacro,        // macro
        kFilterBlock,  // filter, body
        kWith,         // with_targets, body
        kBreak,
        kContinue,
        kInclude,  // expr: always fails when run (no template loader)
    };
    Kind kind;
    int line = 0;
    std::string text;
    ExprPtr expr;
    ExprPtr filter;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body;
    Body else_body;
    std::vector<std::string> targets;
    std::string attr;  // for `set ns.attr = ...`
    std::vector<std::pair<std::string, ExprPtr>> with_targets;
    std::shared_ptr<MacroDef> macro;
};

struct MacroDef {
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // aligned to params; null when none
    Body body;
    int line = 0;
};

}  // namespace pagoda::jinja
