#include "kernels/cuda/host/cudnn_plan.h"

#include <fmt/format.h>

namespace tune::kernels::cuda::cudnn {

namespace {

// Engine configurations asked of the heuristics; the first that finalizes is used.
constexpr std::size_t kConfigurations = 8;

}  // namespace

OperationPlan::OperationPlan(Descriptor graph, Descriptor plan, std::int64_t workspace)
    : graph_(std::move(graph)), plan_(std::move(plan)), workspace_(workspace) {}

std::unique_ptr<OperationPlan> OperationPlan::make(const CudnnApi& api, void* handle,
                                                   const std::vector<void*>& operations, std::string& why_not) {
    Descriptor graph(api, DescriptorType::operation_graph);
    graph.set_handle(Attribute::operation_graph_handle, handle).set(Attribute::operation_graph_ops, operations);
    const int graph_status = graph.try_finalize();
    if (not_supported(graph_status)) {
        why_not = fmt::format("cuDNN takes no graph of this pattern here ({})", api.get_error_string(graph_status));
        return nullptr;
    }
    check(api, graph_status, "cudnnBackendFinalize", "the operation graph");

    Descriptor heuristics(api, DescriptorType::engine_heuristics);
    heuristics.set(Attribute::heuristics_operation_graph, graph).set(Attribute::heuristics_mode, HeuristicMode::a);
    heuristics.finalize();
    std::vector<Descriptor> configs;
    std::vector<void*> raw;
    configs.reserve(kConfigurations);
    for (std::size_t i = 0; i < kConfigurations; ++i)
        raw.push_back(configs.emplace_back(api, DescriptorType::engine_config, SourceLine::here()).get());
    const std::int64_t found = heuristics.get_descriptors(Attribute::heuristics_results, raw);

    std::string refusals;
    for (std::int64_t i = 0; i < found && i < static_cast<std::int64_t>(configs.size()); ++i) {
        Descriptor plan(api, DescriptorType::execution_plan);
        plan.set_handle(Attribute::plan_handle, handle).set(Attribute::plan_engine_config, configs[i]);
        const int status = plan.try_finalize();
        if (status == kStatusSuccess) {
            const std::int64_t workspace = plan.get_int64(Attribute::plan_workspace_size);
            return std::unique_ptr<OperationPlan>(new OperationPlan(std::move(graph), std::move(plan), workspace));
        }
        if (!not_supported(status)) check(api, status, "cudnnBackendFinalize", "an execution plan");
        refusals += fmt::format("{}{}", refusals.empty() ? "" : ", ", api.get_error_string(status));
    }
    why_not = found == 0 ? std::string("cuDNN's heuristics offer no engine for this graph here")
                         : fmt::format("no engine of the {} offered finalizes here ({})", found, refusals);
    return nullptr;
}

void OperationPlan::execute(void* handle, const std::vector<std::int64_t>& uids, const std::vector<void*>& pointers,
                            void* workspace) const {
    Descriptor pack(*plan_.api(), DescriptorType::variant_pack);
    pack.set(Attribute::variant_pack_unique_ids, uids)
        .set_pointers(Attribute::variant_pack_data_pointers, pointers)
        .set_pointer(Attribute::variant_pack_workspace, workspace)
        .finalize();
    check(*plan_.api(), plan_.api()->execute(handle, plan_.get(), pack.get()), "cudnnBackendExecute",
          fmt::format("{} tensors, {} bytes of workspace", uids.size(), workspace_));
}

}  // namespace tune::kernels::cuda::cudnn
