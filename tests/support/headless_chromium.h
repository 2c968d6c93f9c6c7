// Loads a local page in headless Debian Chromium and collects what the tests
// look at: the DOM after the page's scripts ran (--dump-dom), the browser's
// log (every console message appears there as ":CONSOLE"), the requests the
// page started (from a netlog), or a screenshot.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/report_files.h"
#include "tests/support/run_command.h"

namespace tune::test {

// $TUNE_CHROMIUM, else /usr/bin/chromium; empty when neither exists.
inline std::string chromium_path() {
    if (const char* env = std::getenv("TUNE_CHROMIUM"); env && *env) return env;
    return std::filesystem::exists("/usr/bin/chromium") ? "/usr/bin/chromium" : "";
}

struct BrowserRun {
    int exit_code = -1;
    std::string dom;
    std::string log;
    std::filesystem::path netlog;
};

// A fresh profile per run, background services off, nothing left behind.
inline std::string chromium_command(const std::filesystem::path& work, const std::string& extra) {
    std::filesystem::create_directories(work / "profile");
    return "timeout 180 " + chromium_path() +
           " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking"
           " --disable-component-update --disable-sync --user-data-dir='" +
           (work / "profile").string() + "' " + extra;
}

// `fragment` ("#measure") is appended to the page's URL; `window` ("1400,900") sets the window's size.
inline BrowserRun load_page(const std::filesystem::path& page, const std::filesystem::path& work,
                            const std::string& fragment = "", const std::string& window = "") {
    BrowserRun run;
    run.netlog = work / "netlog.json";
    const auto dom = work / "dom.html", log = work / "browser.log";
    const std::string size = window.empty() ? "" : " --window-size=" + window;
    run.exit_code =
        run_command(chromium_command(work, "--enable-logging=stderr --v=0 --log-net-log='" + run.netlog.string() + "'" +
                                               size + " --virtual-time-budget=15000 --dump-dom 'file://" +
                                               page.string() + fragment + "' >'" + dom.string() + "' 2>'" +
                                               log.string() + "'"))
            .exit_code;
    run.dom = read_text_file(dom);
    run.log = read_text_file(log);
    return run;
}

inline int screenshot(const std::filesystem::path& page, const std::filesystem::path& png,
                      const std::filesystem::path& work, int width, int height) {
    return run_command(chromium_command(work, "--hide-scrollbars --window-size=" + std::to_string(width) + "," +
                                                  std::to_string(height) +
                                                  " --virtual-time-budget=15000 --screenshot='" + png.string() +
                                                  "' 'file://" + page.string() + "' >/dev/null 2>&1"))
        .exit_code;
}

// URLs the page itself asked for. The browser's own background requests carry
// the initiator "not an origin"; a file:// page's carry its opaque origin.
inline std::vector<std::string> page_requests(const std::filesystem::path& netlog) {
    std::string text = read_text_file(netlog);
    auto log = nlohmann::json::parse(text, nullptr, false);
    if (log.is_discarded())
        log = nlohmann::json::parse(text + "]}", nullptr, false);  // killed before it closed the file
    if (log.is_discarded()) throw std::runtime_error("unreadable netlog " + netlog.string());
    const int start_job = log["constants"]["logEventTypes"].value("URL_REQUEST_START_JOB", -1);
    std::vector<std::string> urls;
    for (const auto& e : log["events"]) {
        if (e.value("type", -2) != start_job || !e.contains("params")) continue;
        const auto& p = e["params"];
        if (p.contains("url") && p.value("initiator", "") != "not an origin")
            urls.push_back(p["url"].get<std::string>());
    }
    return urls;
}

// The value of attribute `name` on the dumped page's <body>, or "" when absent.
inline std::string body_attribute(const std::string& dom, const std::string& name) {
    const std::size_t body = dom.find("<body");
    if (body == std::string::npos) return "";
    const std::string tag = dom.substr(body, dom.find('>', body) - body);
    const std::size_t at = tag.find(" " + name + "=\"");
    if (at == std::string::npos) return "";
    const std::size_t from = at + name.size() + 3;
    return tag.substr(from, tag.find('"', from) - from);
}

}  // namespace tune::test
