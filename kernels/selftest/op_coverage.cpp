#include "kernels/selftest/op_coverage.h"

#include <algorithm>
#include <set>

#include "kernels/backend.h"

namespace tune::kernels::selftest {
namespace {

std::set<std::string, std::less<>> checked(const std::vector<Case>& cases) {
    std::set<std::string, std::less<>> ops;
    for (const Case& c : cases)
        for (std::string& op : c.checked_ops()) ops.insert(std::move(op));
    return ops;
}

}  // namespace

std::vector<std::string_view> uncovered_ops(const std::vector<Case>& cases) {
    const auto ops = checked(cases);
    std::vector<std::string_view> out;
    for (std::string_view op : kBackendOps)
        if (!ops.contains(op)) out.push_back(op);
    return out;
}

std::vector<std::string> unknown_ops(const std::vector<Case>& cases) {
    std::vector<std::string> out;
    for (const std::string& op : checked(cases))
        if (std::ranges::find(kBackendOps, op) == std::end(kBackendOps)) out.push_back(op);
    return out;
}

}  // namespace tune::kernels::selftest
