#include "engine/tool_calls/harmony_parser.h"

#include <algorithm>
#include <array>

#include "engine/text/partial_marker.h"
#include "engine/tool_calls/tool_call_id.h"

namespace nibble::tool_calls {
namespace {

constexpr std::string_view kStartTag = "<|start|>";
constexpr std::string_view kEndTag = "<|end|>";
constexpr std::string_view kMessageTag = "<|message|>";
constexpr std::string_view kChannelTag = "<|channel|>";
constexpr std::string_view kConstrainTag = "<|constrain|>";
constexpr std::string_view kReturnTag = "<|return|>";
constexpr std::string_view kCallTag = "<|call|>";
constexpr std::string_view kFunctionsPrefix = "functions.";

// The earliest of `markers` in `text`: {position, marker}; position npos when none occurs.
std::pair<std::size_t, std::string_view> earliest(std::string_view text,
                                                  std::initializer_list<std::string_view> markers) {
  std::pair<std::size_t, std::string_view> best{std::string_view::npos, {}};
  for (std::string_view m : markers) {
    const std::size_t at = text.find(m);
    if (at < best.first) best = {at, m};
  }
  return best;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

// Whitespace-separated words of a header part.
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t begin = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > begin) out.push_back(text.substr(begin, i - begin));
  }
  return out;
}

struct Header {
  std::string channel;
  std::string recipient;
};

// [role][ to=R]<|channel|>CHANNEL[ to=R][ TYPE][<|constrain|>T]; false when malformed.
bool parse_header(std::string_view text, Header& header) {
  std::string flat(text);
  for (std::size_t at = flat.find(kConstrainTag); at != std::string::npos;
       at = flat.find(kConstrainTag, at)) {
    flat.replace(at, kConstrainTag.size(), " ");
  }
  const std::size_t channel = flat.find(kChannelTag);
  if (channel == std::string::npos) return false;
  const std::string_view role_part = std::string_view(flat).substr(0, channel);
  const std::string_view channel_part = std::string_view(flat).substr(channel + kChannelTag.size());
  if (role_part.find("<|") != std::string_view::npos ||
      channel_part.find("<|") != std::string_view::npos) {
    return false;  // another special token inside the header
  }
  const std::vector<std::string_view> role_words = words(role_part);
  const std::vector<std::string_view> channel_words = words(channel_part);
  if (channel_words.empty()) return false;
  header.channel = std::string(channel_words[0]);
  if (header.channel != "analysis" && header.channel != "commentary" && header.channel != "final")
    return false;
  for (const auto* list : {&role_words, &channel_words}) {
    for (std::string_view w : *list) {
      if (w.starts_with("to=")) header.recipient = std::string(w.substr(3));
    }
  }
  // "to=" may stick to the channel name without a space ("commentary to=functions.f" is the
  // usual form; the template writes "to=functions.f<|channel|>commentary json").
  return true;
}

}  // namespace

bool is_harmony_template(std::string_view chat_template) {
  return chat_template.find(kChannelTag) != std::string_view::npos &&
         chat_template.find(kStartTag) != std::string_view::npos;
}

void HarmonyParser::push(std::string_view text, HarmonyOutput& out) {
  buffer_ += text;
  run(out, false);
}

void HarmonyParser::finish(HarmonyOutput& out) {
  run(out, true);
  buffer_.clear();
}

void HarmonyParser::run(HarmonyOutput& out, bool final) {
  // Each step consumes bytes or changes state towards one that does: the loop ends.
  for (;;) {
    bool progressed = false;
    switch (state_) {
      case State::kStart:
        progressed = start_step(final);
        break;
      case State::kHeader:
        progressed = header_step(final, out);
        break;
      case State::kBody:
        progressed = body_step(out, final);
        break;
      case State::kSkip:
        progressed = skip_step(final);
        break;
      case State::kPlain:
        out.content += buffer_;
        buffer_.clear();
        break;
      case State::kDone:
        buffer_.clear();
        break;
    }
    if (!progressed) return;
  }
}

bool HarmonyParser::start_step(bool final) {
  // The prompt ended with "<|start|>assistant": a harmony output opens with a special token
  // ("<|channel|>") or a recipient (" to=functions.f<|channel|>...").
  static constexpr std::array<std::string_view, 2> kOpenings = {"<|", " to="};
  for (std::string_view opening : kOpenings) {
    if (std::string_view(buffer_).starts_with(opening)) {
      if (std::string_view(buffer_).starts_with(kStartTag)) buffer_.erase(0, kStartTag.size());
      state_ = State::kHeader;
      return true;
    }
  }
  const bool undecided =
      std::any_of(kOpenings.begin(), kOpenings.end(),
                  [&](std::string_view opening) { return opening.starts_with(buffer_); });
  if (undecided && !final) return false;  // (an empty buffer is undecided too)
  if (buffer_.empty()) return false;
  state_ = State::kPlain;
  return true;
}

bool HarmonyParser::header_step(bool final, HarmonyOutput& out) {
  const auto [at, marker] = earliest(buffer_, {kMessageTag, kStartTag, kReturnTag, kCallTag});
  if (at != std::string::npos && marker == kMessageTag && at <= kMaxHeaderBytes) {
    open_body(std::string_view(buffer_).substr(0, at), out);
    buffer_.erase(0, at + kMessageTag.size());
    state_ = State::kBody;
    return true;
  }
  if (at != std::string::npos && marker == kStartTag && at <= kMaxHeaderBytes) {
    ++num_malformed_;  // a new message began before this header was complete
    buffer_.erase(0, at + kStartTag.size());
    return true;
  }
  if (at != std::string::npos && (marker == kReturnTag || marker == kCallTag) &&
      at <= kMaxHeaderBytes) {
    ++num_malformed_;
    state_ = State::kDone;
    return true;
  }
  if (at != std::string::npos || buffer_.size() >= kMaxHeaderBytes + kMessageTag.size()) {
    ++num_malformed_;  // too long to be a header: resume at the next message
    buffer_.erase(0, kMaxHeaderBytes);
    state_ = State::kSkip;
    return true;
  }
  if (final && !buffer_.empty()) {
    ++num_malformed_;  // generation ended inside a header
    buffer_.clear();
  }
  return false;
}

void HarmonyParser::open_body(std::string_view header_text, HarmonyOutput& out) {
  Header header;
  if (!parse_header(header_text, header)) {
    ++num_malformed_;
    target_ = Target::kDrop;
    return;
  }
  if (header.recipient.starts_with(kFunctionsPrefix)) {
    const std::string name = header.recipient.substr(kFunctionsPrefix.size());
    const bool valid = !name.empty() && name.size() <= kMaxHeaderBytes &&
                       std::all_of(name.begin(), name.end(), is_name_char);
    if (!valid) {
      ++num_malformed_;
      target_ = Target::kDrop;
      return;
    }
    if (!calls_allowed_) {
      target_ = Target::kContent;
      return;
    }
    out.calls.push_back({num_calls_, new_tool_call_id(), name, ""});
    ++num_calls_;
    target_ = Target::kCall;
    return;
  }
  if (!header.recipient.empty() || header.channel == "analysis") {
    target_ = Target::kReasoning;
  } else {
    target_ = Target::kContent;  // final, or a commentary preamble addressed to the user
  }
}

bool HarmonyParser::body_step(HarmonyOutput& out, bool final) {
  const auto [at, marker] =
      earliest(buffer_, {kEndTag, kReturnTag, kCallTag, kStartTag, kChannelTag});
  if (at == std::string::npos) {
    const std::size_t held =
        final ? 0
              : text::partial_marker_suffix(
                    buffer_, {kEndTag, kReturnTag, kCallTag, kStartTag, kChannelTag});
    emit(std::string_view(buffer_).substr(0, buffer_.size() - held), out);
    buffer_.erase(0, buffer_.size() - held);
    return false;
  }
  emit(std::string_view(buffer_).substr(0, at), out);
  if (marker == kEndTag) {
    buffer_.erase(0, at + marker.size());
    state_ = State::kSkip;  // the next message opens with <|start|>
  } else if (marker == kStartTag) {
    buffer_.erase(0, at + marker.size());
    state_ = State::kHeader;
  } else if (marker == kChannelTag) {
    buffer_.erase(0, at);  // the header starts at its channel
    state_ = State::kHeader;
  } else {
    buffer_.clear();
    state_ = State::kDone;
  }
  return true;
}

bool HarmonyParser::skip_step(bool final) {
  const auto [at, marker] = earliest(buffer_, {kStartTag, kChannelTag, kReturnTag, kCallTag});
  if (at == std::string::npos) {
    const std::size_t held = final ? 0
                                   : text::partial_marker_suffix(
                                         buffer_, {kStartTag, kChannelTag, kReturnTag, kCallTag});
    buffer_.erase(0, buffer_.size() - held);
    return false;
  }
  if (marker == kStartTag) {
    buffer_.erase(0, at + marker.size());
    state_ = State::kHeader;
  } else if (marker == kChannelTag) {
    buffer_.erase(0, at);
    state_ = State::kHeader;
  } else {
    buffer_.clear();
    state_ = State::kDone;
  }
  return true;
}

void HarmonyParser::emit(std::string_view text, HarmonyOutput& out) {
  if (text.empty()) return;
  switch (target_) {
    case Target::kReasoning:
      out.reasoning += text;
      break;
    case Target::kContent:
      out.content += text;
      break;
    case Target::kCall:
      out.calls.push_back({num_calls_ - 1, "", "", std::string(text)});
      break;
    case Target::kDrop:
      break;
  }
}

}  // namespace nibble::tool_calls
