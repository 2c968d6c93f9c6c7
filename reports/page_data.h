// What the HTML report hands its script besides the markup: the chart specs
// and the rows of the big tables, serialized once into #report-data.
#pragma once

#include <nlohmann/json.hpp>

namespace tune {

struct PageData {
    nlohmann::json charts = nlohmann::json::array();   // one spec per <canvas>, see html_chart.h
    nlohmann::json tables = nlohmann::json::object();  // paged tables by id, see html_table.h
};

}  // namespace tune
