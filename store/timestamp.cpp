#include "store/timestamp.h"

#include <charconv>

#include <fmt/format.h>

namespace tune {
namespace {

// Reads exactly `width` digits at `pos`; nullopt otherwise.
std::optional<int> digits(std::string_view text, std::size_t pos, std::size_t width) {
    if (pos + width > text.size()) return std::nullopt;
    int value = 0;
    auto [end, ec] = std::from_chars(text.data() + pos, text.data() + pos + width, value);
    if (ec != std::errc() || end != text.data() + pos + width) return std::nullopt;
    return value;
}

}  // namespace

Timestamp now_timestamp() { return std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now()); }

std::string format_timestamp(Timestamp t) {
    using namespace std::chrono;
    const auto day = floor<days>(t);
    const year_month_day ymd{day};
    const hh_mm_ss hms{t - day};
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", static_cast<int>(ymd.year()),
                       static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()), hms.hours().count(),
                       hms.minutes().count(), hms.seconds().count(), hms.subseconds().count());
}

std::optional<Timestamp> parse_timestamp(std::string_view text) {
    using namespace std::chrono;
    // YYYY-MM-DDTHH:MM:SS.mmmZ
    if (text.size() != 24 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
        text[16] != ':' || text[19] != '.' || text[23] != 'Z')
        return std::nullopt;
    auto y = digits(text, 0, 4), mo = digits(text, 5, 2), d = digits(text, 8, 2);
    auto h = digits(text, 11, 2), mi = digits(text, 14, 2), s = digits(text, 17, 2), ms = digits(text, 20, 3);
    if (!y || !mo || !d || !h || !mi || !s || !ms) return std::nullopt;
    const year_month_day ymd{year{*y}, month{static_cast<unsigned>(*mo)}, day{static_cast<unsigned>(*d)}};
    if (!ymd.ok() || *h > 23 || *mi > 59 || *s > 60) return std::nullopt;
    return Timestamp{sys_days{ymd} + hours{*h} + minutes{*mi} + seconds{*s} + milliseconds{*ms}};
}

}  // namespace tune
