#include "train/comm/comm.h"
#include "train/comm/comm_rules.h"

namespace tune::train {

void SingleRankComm::send_recv(std::span<const P2POp> ops) { check_p2p(ops, 0, 1); }

}  // namespace tune::train
