#pragma once
// How `nibble get recipes` and `nibble describe recipe` show the controller's status JSON
// (controller/loop/recipe_status.h), in kubectl's layout: aligned columns, then a
// description with conditions and engines. Pure, so the output is tested as text.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace nibble::cli {

// NAME MODEL PHASE READY AGE-less table; wide adds REPLICAS, GENERATION, ENDPOINT, MESSAGE.
std::string format_recipe_table(const nlohmann::json& items, bool wide);

// status: one item; spec: the stored recipe YAML ("" to omit).
std::string format_recipe_description(const nlohmann::json& status, const std::string& spec);

// The table's cells: the header, then one row per item.
std::vector<std::vector<std::string>> recipe_table_rows(const nlohmann::json& items, bool wide);

// Columns padded to their widest cell plus three spaces, as kubectl prints them.
std::string format_columns(const std::vector<std::vector<std::string>>& rows);
// One row padded to `widths` (widened where a cell is wider), as get -w adds rows to a table
// already printed.
std::string format_row(const std::vector<std::string>& row, std::vector<std::size_t>& widths);

}  // namespace nibble::cli
