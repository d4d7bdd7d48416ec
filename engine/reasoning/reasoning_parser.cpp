#include "engine/reasoning/reasoning_parser.h"

#include "engine/text/partial_marker.h"

namespace nibble::reasoning {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim_right(std::string_view s) {
  const std::size_t end = s.find_last_not_of(kSpace);
  return end == std::string_view::npos ? std::string_view() : s.substr(0, end + 1);
}

}  // namespace

std::optional<ReasoningFormat> reasoning_format_from_name(std::string_view name) {
  if (name == "qwen3") return ReasoningFormat::kQwen3;
  if (name == "deepseek_r1") return ReasoningFormat::kDeepSeekR1;
  return std::nullopt;
}

const char* reasoning_format_name(ReasoningFormat format) {
  return format == ReasoningFormat::kQwen3 ? "qwen3" : "deepseek_r1";
}

const char* reasoning_format_names() {
  return "qwen3, deepseek_r1";
}

ReasoningStart reasoning_start_from_prompt(std::string_view prompt) {
  const std::string_view end = trim_right(prompt);
  if (end.ends_with(kClose)) return ReasoningStart::kAnswer;
  if (end.ends_with(kOpen)) return ReasoningStart::kThinking;
  return ReasoningStart::kOpen;
}

ReasoningParser::ReasoningParser(ReasoningFormat format, ReasoningStart start)
    : thinks_by_default_(format == ReasoningFormat::kDeepSeekR1 ||
                         start == ReasoningStart::kThinking),
      state_(start == ReasoningStart::kAnswer ? State::kAnswer : State::kStart),
      strip_answer_(start == ReasoningStart::kAnswer) {}

void ReasoningParser::push(std::string_view text, ReasoningOutput& out) {
  held_ += text;
  run(out, false);
}

void ReasoningParser::finish(ReasoningOutput& out) {
  run(out, true);
}

void ReasoningParser::run(ReasoningOutput& out, bool final) {
  if (state_ == State::kStart) {
    // The output may open with whitespace and then <think>: hold both until decided.
    const std::size_t first = held_.find_first_not_of(kSpace);
    const std::string_view body =
        first == std::string::npos ? std::string_view() : std::string_view(held_).substr(first);
    if (body.starts_with(kOpen)) {
      held_.erase(0, first + kOpen.size());
      state_ = State::kThinking;
    } else if (!final && (body.empty() || kOpen.starts_with(body))) {
      return;
    } else {
      state_ = thinks_by_default_ ? State::kThinking : State::kAnswer;
    }
  }
  if (state_ == State::kThinking) {
    if (!reasoning_started_) {
      const std::size_t first = held_.find_first_not_of(kSpace);
      held_.erase(0, first == std::string::npos ? held_.size() : first);
      reasoning_started_ = !held_.empty();
    }
    const std::size_t close = held_.find(kClose);
    if (close != std::string::npos) {
      out.reasoning += trim_right(std::string_view(held_).substr(0, close));
      held_.erase(0, close + kClose.size());
      state_ = State::kAnswer;
      strip_answer_ = true;
    } else {
      // Hold a possible "</think>" start and trailing whitespace (dropped if </think> follows).
      std::size_t keep =
          final ? held_.size() : held_.size() - text::partial_marker_suffix(held_, kClose);
      const std::size_t last = std::string_view(held_).substr(0, keep).find_last_not_of(kSpace);
      const std::size_t release = last == std::string::npos ? 0 : last + 1;
      out.reasoning += std::string_view(held_).substr(0, release);
      held_.erase(0, final ? held_.size() : release);
      return;
    }
  }
  emit_answer(held_, out);
  held_.clear();
}

void ReasoningParser::emit_answer(std::string_view text, ReasoningOutput& out) {
  if (strip_answer_ && !answer_started_) {
    const std::size_t first = text.find_first_not_of(kSpace);
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
  }
  answer_started_ = answer_started_ || !text.empty();
  out.content += text;
}

}  // namespace nibble::reasoning
