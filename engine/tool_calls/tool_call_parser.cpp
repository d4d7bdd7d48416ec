#include "engine/tool_calls/tool_call_parser.h"

#include "engine/text/partial_marker.h"
#include "engine/tool_calls/tool_call_id.h"

namespace nibble::tool_calls {
namespace {

constexpr std::string_view kHermesStart = "<tool_call>";
constexpr std::string_view kHermesEnd = "</tool_call>";
constexpr std::string_view kMistralStart = "[TOOL_CALLS]";
constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::size_t kMaxNameBytes = 256;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Text that is, or may still grow into, `marker`: 1 = it is, 0 = it cannot, -1 = undecided.
int marker_at(std::string_view text, std::string_view marker) {
  if (text.starts_with(marker)) return 1;
  return marker.starts_with(text) ? -1 : 0;
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format_from_name(std::string_view name) {
  if (name == "hermes") return ToolCallFormat::kHermes;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (name == "mistral") return ToolCallFormat::kMistral;
  return std::nullopt;
}

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
  }
  return "unknown";
}

const char* tool_call_format_names() {
  return "hermes, llama3_json, mistral";
}

std::optional<ToolCallFormat> detect_tool_call_format(std::string_view chat_template) {
  if (chat_template.find(kHermesStart) != std::string_view::npos) return ToolCallFormat::kHermes;
  if (chat_template.find(kMistralStart) != std::string_view::npos) return ToolCallFormat::kMistral;
  if (chat_template.find(kPythonTag) != std::string_view::npos ||
      chat_template.find("\"parameters\": dictionary of argument name") != std::string_view::npos) {
    return ToolCallFormat::kLlama3Json;
  }
  return std::nullopt;
}

bool format_needs_special_tokens(ToolCallFormat format) {
  return format == ToolCallFormat::kMistral;  // [TOOL_CALLS] and [ARGS] are control tokens
}

ToolCallParser::ToolCallParser(ToolCallMode mode, ToolCallFormat format, std::string function_name)
    : mode_(mode), format_(format), function_name_(std::move(function_name)) {
  // The forced shapes are the whole output, from its first byte.
  if (mode_ == ToolCallMode::kRequired) begin_markup(JsonCallScanner::Shape::kCallArray);
  if (mode_ == ToolCallMode::kNamed) {
    begin_markup(JsonCallScanner::Shape::kArguments, function_name_);
  }
}

void ToolCallParser::push(std::string_view text, ToolCallOutput& out, bool announce) {
  input_ += text;
  run(out);
  if (announce) sync(out);
}

void ToolCallParser::finish(ToolCallOutput& out) {
  run(out);
  switch (state_) {
    case State::kText:
    case State::kTextOnly:
      emit_content(input_, out);  // a partial marker, or leading whitespace, was all it was
      break;
    case State::kMarkup:
    case State::kMistralName:
      abandon_markup(out);
      break;
    case State::kAfterCall:
      break;  // whitespace or a partial end marker after a complete call
  }
  input_.clear();
}

void ToolCallParser::run(ToolCallOutput& out) {
  std::size_t i = 0;
  while (i < input_.size()) {
    const State before = state_;
    std::size_t next = i;
    switch (state_) {
      case State::kText:
        next = text_step(i, out);
        break;
      case State::kTextOnly:
        emit_content(std::string_view(input_).substr(i), out);
        next = input_.size();
        break;
      case State::kMarkup:
        next = markup_step(i, out);
        break;
      case State::kMistralName:
        next = mistral_name_step(i, out);
        break;
      case State::kAfterCall:
        next = after_call_step(i);
        break;
    }
    if (next == i && state_ == before) break;  // the rest waits for more text
    i = next;
  }
  input_.erase(0, i);
}

std::size_t ToolCallParser::text_step(std::size_t i, ToolCallOutput& out) {
  const std::string_view rest = std::string_view(input_).substr(i);
  if (format_ == ToolCallFormat::kLlama3Json) {
    if (seen_content_) {
      state_ = State::kTextOnly;
      return i;
    }
    // Calls only open the output: hold its leading whitespace until the first other byte.
    std::size_t j = 0;
    while (j < rest.size() && is_space(rest[j])) ++j;
    if (j == rest.size()) return i;
    const std::string_view body = rest.substr(j);
    const int tag = marker_at(body, kPythonTag);
    if (tag < 0) return i;
    if (tag > 0) {
      markup_ = std::string(rest.substr(0, j + kPythonTag.size()));
      begin_markup(JsonCallScanner::Shape::kCallObject);
      return i + j + kPythonTag.size();
    }
    if (body[0] == '{') {
      markup_ = std::string(rest.substr(0, j));
      begin_markup(JsonCallScanner::Shape::kCallObject);
      return i + j;
    }
    seen_content_ = true;
    state_ = State::kTextOnly;
    return i;
  }
  const std::string_view marker = format_ == ToolCallFormat::kHermes ? kHermesStart : kMistralStart;
  if (const std::size_t pos = rest.find(marker); pos != std::string_view::npos) {
    emit_content(rest.substr(0, pos), out);
    markup_ = std::string(marker);
    if (format_ == ToolCallFormat::kHermes) {
      begin_markup(JsonCallScanner::Shape::kCallObject);
    } else {
      mistral_name_.clear();
      state_ = State::kMistralName;
    }
    return i + pos + marker.size();
  }
  const std::size_t held = text::partial_marker_suffix(rest, marker);
  emit_content(rest.substr(0, rest.size() - held), out);
  return i + rest.size() - held;
}

std::size_t ToolCallParser::mistral_name_step(std::size_t i, ToolCallOutput& out) {
  const char c = input_[i];
  if (mistral_name_.empty()) {
    if (is_space(c)) {
      markup_ += c;
      return i + 1;
    }
    if (c == '[' || c == '{') {  // the JSON form: the scanner reads this byte
      begin_markup(c == '[' ? JsonCallScanner::Shape::kCallArray
                            : JsonCallScanner::Shape::kCallObject);
      return i;
    }
  }
  const int args = marker_at(std::string_view(input_).substr(i), kMistralArgs);
  if (args < 0) return i;
  if (args > 0 && !mistral_name_.empty()) {
    markup_ += kMistralArgs;
    begin_markup(JsonCallScanner::Shape::kArguments, mistral_name_);
    return i + kMistralArgs.size();
  }
  if (args == 0 && is_name_char(c) && mistral_name_.size() < kMaxNameBytes) {
    mistral_name_ += c;
    markup_ += c;
    return i + 1;
  }
  abandon_markup(out);  // not a call: this byte is read again as text
  return i;
}

std::size_t ToolCallParser::after_call_step(std::size_t i) {
  const char c = input_[i];
  if (is_space(c)) return i + 1;
  if (mode_ != ToolCallMode::kAuto) {
    state_ = State::kTextOnly;  // text after the forced calls is content
    return i;
  }
  switch (format_) {
    case ToolCallFormat::kHermes: {
      const int end = marker_at(std::string_view(input_).substr(i), kHermesEnd);
      if (end < 0) return i;
      state_ = State::kText;
      return end > 0 ? i + kHermesEnd.size() : i;
    }
    case ToolCallFormat::kLlama3Json:
      if (c == ';') {
        state_ = State::kText;
        return i + 1;
      }
      seen_content_ = true;
      state_ = State::kTextOnly;
      return i;
    case ToolCallFormat::kMistral:
      state_ = State::kText;
      return i;
  }
  return i;
}

std::size_t ToolCallParser::markup_step(std::size_t i, ToolCallOutput& out) {
  for (std::size_t j = i; j < input_.size(); ++j) {
    markup_ += input_[j];
    const JsonCallScanner::Status status = scanner_->push(input_[j]);
    if (status == JsonCallScanner::Status::kError) {
      abandon_markup(out);
      return j + 1;
    }
    if (status == JsonCallScanner::Status::kDone) {
      sync(out);
      end_markup(int(announced_.size()));
      after_call_ = true;
      state_ = State::kAfterCall;
      return j + 1;
    }
  }
  return input_.size();
}

void ToolCallParser::begin_markup(JsonCallScanner::Shape shape, std::optional<std::string> name) {
  scanner_.emplace(shape);
  scanner_name_ = std::move(name);
  announced_.clear();
  state_ = State::kMarkup;
}

void ToolCallParser::end_markup(int calls) {
  num_calls_ += calls;
  first_index_ += calls;
  scanner_.reset();
  scanner_name_.reset();
  announced_.clear();
  markup_.clear();
  mistral_name_.clear();
}

void ToolCallParser::sync(ToolCallOutput& out) {
  if (!scanner_) return;
  const auto& calls = scanner_->calls();
  if (announced_.size() < calls.size()) announced_.resize(calls.size());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    const JsonCallScanner::Call& call = calls[k];
    const std::optional<std::string>& name = scanner_name_ ? scanner_name_ : call.name;
    if (!name) break;  // calls are announced in order
    Announced& a = announced_[k];
    const int index = first_index_ + int(k);
    if (!a.header) {
      out.calls.push_back({index, new_id(), *name, ""});
      a.header = true;
    }
    const std::string_view args = scanner_->arguments(call);
    if (args.size() > a.arguments_sent) {
      out.calls.push_back({index, "", "", std::string(args.substr(a.arguments_sent))});
      a.arguments_sent = args.size();
    }
  }
}

void ToolCallParser::abandon_markup(ToolCallOutput& out) {
  int announced = 0;
  for (const Announced& a : announced_) announced += a.header ? 1 : 0;
  if (announced == 0) {
    ++num_malformed_;
    emit_content(markup_, out);
  } else {
    // The client already has these calls; the broken rest of the markup is dropped.
  }
  end_markup(announced);
  if (format_ == ToolCallFormat::kLlama3Json) seen_content_ = true;
  state_ = (mode_ == ToolCallMode::kAuto && format_ != ToolCallFormat::kLlama3Json)
               ? State::kText
               : State::kTextOnly;
}

void ToolCallParser::emit_content(std::string_view text, ToolCallOutput& out) {
  if (after_call_) {
    const std::size_t k = text.find_first_not_of(" \t\r\n");
    if (k == std::string_view::npos) return;
    text.remove_prefix(k);
    after_call_ = false;
  }
  out.content += text;
}

std::string ToolCallParser::new_id() {
  const bool mistral = mode_ == ToolCallMode::kAuto && format_ == ToolCallFormat::kMistral;
  return mistral ? random_alphanumeric(9) : new_tool_call_id();
}

}  // namespace nibble::tool_calls
