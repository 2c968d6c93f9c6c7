// This machine's name as the hostname syscall gives it ("unknown" when it fails):
// what a lease, a probe record and a sweep record name the host by.
#pragma once

#include <string>

namespace tune {

std::string host_name();

}  // namespace tune
