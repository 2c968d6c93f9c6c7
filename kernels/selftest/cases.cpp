// The standard case list.
#include "kernels/selftest/cases.h"

namespace tune::kernels::selftest {

std::vector<Case> standard_cases() {
    std::vector<Case> out;
    add_gemm_cases(out);
    add_graph_cases(out);
    add_side_work_cases(out);
    add_attention_cases(out);
    add_layer_cases(out);
    add_elementwise_cases(out);
    add_optimizer_cases(out);
    add_nf4_cases(out);
    return out;
}

}  // namespace tune::kernels::selftest
