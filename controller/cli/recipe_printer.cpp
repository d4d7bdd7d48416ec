#include "controller/cli/recipe_printer.h"

#include <algorithm>
#include <sstream>

namespace nibble::cli {
namespace {

using nlohmann::json;

std::string str(const json& j, const char* key) {
  if (!j.contains(key)) return "";
  const json& v = j[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

// The message of the first condition that explains a problem or a change.
std::string headline(const json& status) {
  if (!status.contains("conditions")) return "";
  for (const char* type : {"Degraded", "Progressing"}) {
    for (const json& c : status["conditions"]) {
      if (str(c, "type") == type && str(c, "status") == "True") {
        std::string m = str(c, "message");
        const auto nl = m.find('\n');
        return str(c, "reason") + (m.empty() ? "" : ": " + m.substr(0, nl));
      }
    }
  }
  return "";
}

}  // namespace

std::string format_row(const std::vector<std::string>& row, std::vector<std::size_t>& widths) {
  if (widths.size() < row.size()) widths.resize(row.size(), 0);
  std::string line;
  for (std::size_t i = 0; i < row.size(); ++i) {
    widths[i] = std::max(widths[i], row[i].size());
    line += row[i];
    if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 3, ' ');
  }
  line.erase(line.find_last_not_of(' ') + 1);  // an empty last cell leaves no trailing blanks
  return line + "\n";
}

std::string format_columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) out += format_row(row, widths);
  return out;
}

std::vector<std::vector<std::string>> recipe_table_rows(const json& items, bool wide) {
  std::vector<std::vector<std::string>> rows;
  if (wide) {
    rows.push_back(
        {"NAME", "MODEL", "PHASE", "READY", "REPLICAS", "GENERATION", "ENDPOINT", "MESSAGE"});
  } else {
    rows.push_back({"NAME", "MODEL", "PHASE", "READY", "ENDPOINT"});
  }
  for (const json& s : items) {
    const std::string ready = str(s, "readyReplicas") + "/" + str(s, "desiredReplicas");
    if (wide) {
      rows.push_back({str(s, "name"), str(s, "servedName"), str(s, "phase"), ready,
                      str(s, "replicas"), str(s, "observedGeneration") + "/" + str(s, "generation"),
                      str(s, "endpoint"), headline(s)});
    } else {
      rows.push_back(
          {str(s, "name"), str(s, "servedName"), str(s, "phase"), ready, str(s, "endpoint")});
    }
  }
  return rows;
}

std::string format_recipe_table(const json& items, bool wide) {
  const std::vector<std::vector<std::string>> rows = recipe_table_rows(items, wide);
  if (rows.size() == 1) return "No recipes found.\n";
  return format_columns(rows);
}

std::string format_recipe_description(const json& s, const std::string& spec) {
  std::ostringstream out;
  auto field = [&out](const std::string& name, const std::string& value) {
    out << name << ":" << std::string(name.size() < 19 ? 19 - name.size() : 1, ' ') << value
        << "\n";
  };
  field("Name", str(s, "name"));
  field("Served name", str(s, "servedName"));
  field("Phase", str(s, "phase"));
  field("Endpoint", str(s, "endpoint"));
  field("Generation", str(s, "generation") + " (observed " + str(s, "observedGeneration") + ")");
  field("Replicas", str(s, "desiredReplicas") + " desired | " + str(s, "replicas") + " total | " +
                        str(s, "readyReplicas") + " ready");
  field("Autoscaler", str(s, "autoscaler"));
  if (!str(s, "lastError").empty()) field("Last error", str(s, "lastError"));

  out << "Conditions:\n";
  std::vector<std::vector<std::string>> rows = {{"  Type", "Status", "Reason", "Since", "Message"}};
  if (s.contains("conditions")) {
    for (const json& c : s["conditions"]) {
      std::string message = str(c, "message");
      std::replace(message.begin(), message.end(), '\n', ';');
      rows.push_back({"  " + str(c, "type"), str(c, "status"), str(c, "reason"),
                      str(c, "lastTransitionTime"), message});
    }
  }
  out << format_columns(rows);

  out << "Engines:\n";
  if (!s.contains("engines") || s["engines"].empty()) {
    out << "  <none>\n";
  } else {
    std::vector<std::vector<std::string>> engines = {
        {"  ID", "Phase", "PID", "Port", "Up to date", "Log"}};
    for (const json& e : s["engines"]) {
      engines.push_back({"  " + str(e, "id"), str(e, "phase"), str(e, "pid"), str(e, "port"),
                         e.value("upToDate", false) ? "yes" : "no", str(e, "logFile")});
    }
    out << format_columns(engines);
  }
  if (!spec.empty()) {
    out << "Spec:\n";
    std::istringstream lines(spec);
    std::string line;
    while (std::getline(lines, line)) out << "  " << line << "\n";
  }
  return out.str();
}

}  // namespace nibble::cli
