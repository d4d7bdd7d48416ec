#pragma once
// Binds a call's positional and keyword arguments to parameter names, Python style.
#include <initializer_list>
#include <string>

#include "engine/chat/template_builtins.h"
#include "engine/chat/template_error.h"

namespace nibble::chat {

class BoundArgs {
 public:
  // params: parameter names in positional order. Throws on too many or unknown arguments.
  BoundArgs(const std::string& callee, const CallArgs& args,
            std::initializer_list<const char*> params, int line)
      : callee_(callee), line_(line) {
    if (args.positional.size() > params.size())
      throw TemplateError(callee + "() takes at most " + std::to_string(params.size()) +
                              " arguments, got " + std::to_string(args.positional.size()),
                          line);
    for (const char* p : params) names_.push_back(p);
    values_.resize(names_.size());
    for (size_t i = 0; i < args.positional.size(); ++i) values_[i] = &args.positional[i];
    for (const auto& [k, v] : args.keyword) {
      size_t i = 0;
      while (i < names_.size() && names_[i] != k) ++i;
      if (i == names_.size())
        throw TemplateError(callee + "() got an unexpected keyword argument '" + k + "'", line);
      values_[i] = &v;
    }
  }
  // nullptr when not passed.
  const Value* get(size_t i) const { return values_[i]; }
  const Value& required(size_t i) const {
    if (!values_[i])
      throw TemplateError(callee_ + "() missing required argument '" + names_[i] + "'", line_);
    return *values_[i];
  }
  const std::string& string_arg(size_t i) const {
    const Value& v = required(i);
    if (!v.is_string())
      throw TemplateError(
          callee_ + "() argument '" + names_[i] + "' must be str, not " + v.type_name(), line_);
    return v.as_string();
  }

 private:
  std::string callee_;
  int line_;
  std::vector<std::string> names_;
  std::vector<const Value*> values_;
};

}  // namespace nibble::chat
