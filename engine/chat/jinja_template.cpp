#include "engine/chat/jinja_template.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "engine/chat/template_builtins.h"
#include "engine/chat/template_error.h"
#include "engine/chat/template_parser.h"
#include "engine/text/utf8.h"

namespace nibble::chat {
namespace {

using K = Value::Kind;

enum class Flow { Normal, Break, Continue };

[[noreturn]] void type_error(const std::string& op, const Value& a, const Value& b, int line) {
  throw TemplateError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" +
                          b.type_name() + "'",
                      line);
}

bool is_int_like(const Value& v) {
  return v.kind() == K::Int || v.kind() == K::Bool;
}
int64_t int_of(const Value& v) {
  return v.kind() == K::Bool ? int64_t{v.as_bool()} : v.as_int();
}

// Python integers do not overflow; ours are 64-bit, so overflow is an error, not a wrong number.
Value checked(bool overflowed, int64_t result, int line) {
  if (overflowed) throw TemplateError("integer overflow (beyond 64 bits)", line);
  return Value::integer(result);
}

constexpr uint64_t kMaxRepeatedSize = uint64_t{1} << 26;

Value arithmetic(const std::string& op, const Value& a, const Value& b, int line) {
  int64_t result = 0;
  if (a.is_undefined()) fail_undefined(a, line);
  if (b.is_undefined()) fail_undefined(b, line);
  const bool nums =
      (a.is_number() || a.kind() == K::Bool) && (b.is_number() || b.kind() == K::Bool);
  const bool ints = is_int_like(a) && is_int_like(b);
  if (op == "+") {
    if (ints) {
      const bool overflowed = __builtin_add_overflow(int_of(a), int_of(b), &result);
      return checked(overflowed, result, line);
    }
    if (nums) return Value::floating(a.as_number() + b.as_number());
    if (a.is_string() && b.is_string()) return Value::string(a.as_string() + b.as_string());
    if (a.is_list() && b.is_list()) {
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::list(std::move(out));
    }
    type_error(op, a, b, line);
  }
  if (op == "*") {
    if (ints) {
      const bool overflowed = __builtin_mul_overflow(int_of(a), int_of(b), &result);
      return checked(overflowed, result, line);
    }
    if (nums) return Value::floating(a.as_number() * b.as_number());
    const Value* seq = a.is_string() || a.is_list()   ? &a
                       : b.is_string() || b.is_list() ? &b
                                                      : nullptr;
    const Value* count = seq == &a ? &b : &a;
    if (seq && is_int_like(*count)) {
      const int64_t n = int_of(*count);
      const size_t unit = seq->is_string() ? seq->as_string().size() : seq->as_list().size();
      if (n > 0 && unit > 0 && static_cast<uint64_t>(n) > kMaxRepeatedSize / unit)
        throw TemplateError("sequence repetition larger than a chat template can need", line);
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->as_string();
        return Value::string(out);
      }
      ValueList out;
      for (int64_t i = 0; i < n; ++i)
        out.insert(out.end(), seq->as_list().begin(), seq->as_list().end());
      return Value::list(std::move(out));
    }
    type_error(op, a, b, line);
  }
  if (!nums) type_error(op, a, b, line);
  if (op == "-") {
    if (ints) {
      const bool overflowed = __builtin_sub_overflow(int_of(a), int_of(b), &result);
      return checked(overflowed, result, line);
    }
    return Value::floating(a.as_number() - b.as_number());
  }
  if (op == "**") {
    if (ints && int_of(b) >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < int_of(b); ++i)
        if (__builtin_mul_overflow(r, int_of(a), &r)) return checked(true, 0, line);
      return Value::integer(r);
    }
    return Value::floating(std::pow(a.as_number(), b.as_number()));
  }
  if (b.as_number() == 0) throw TemplateError("division by zero", line);
  if (op == "/") return Value::floating(a.as_number() / b.as_number());
  if (ints) {
    const int64_t x = int_of(a), y = int_of(b);
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      --q;
      r += y;
    }
    return Value::integer(op == "//" ? q : r);
  }
  const double x = a.as_number(), y = b.as_number();
  const double q = std::floor(x / y);
  if (op == "//") return Value::floating(q);
  double r = std::fmod(x, y);
  if (r != 0 && ((r < 0) != (y < 0))) r += y;
  return Value::floating(r);
}

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    if (item.is_undefined()) fail_undefined(item, line);
    if (!item.is_string())
      throw TemplateError("'in <string>' requires string as left operand, not " + item.type_name(),
                          line);
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.find(item.as_string());
  for (const Value& v : iterate(container, line))
    if (equals(v, item)) return true;
  return false;
}

// Python slice semantics over n elements.
std::vector<int64_t> slice_indices(int64_t n, const Value* start, const Value* stop,
                                   const Value* step, int line) {
  auto as_opt = [&](const Value* v) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (!is_int_like(*v)) throw TemplateError("slice indices must be integers or None", line);
    return int_of(*v);
  };
  const int64_t st = as_opt(step).value_or(1);
  if (st == 0) throw TemplateError("slice step cannot be zero", line);
  auto adjust = [&](std::optional<int64_t> i, int64_t def) {
    if (!i) return def;
    int64_t x = *i;
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = adjust(as_opt(start), st > 0 ? 0 : n - 1);
  const int64_t e = adjust(as_opt(stop), st > 0 ? n : -1);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  return idx;
}

class Renderer {
 public:
  explicit Renderer(const ValueDict& globals) {
    scopes_.emplace_back();
    for (const auto& [k, v] : globals) scopes_.back()[k] = v;
  }

  std::string run(const Body& body) {
    if (exec(body) != Flow::Normal) throw TemplateError("'break' or 'continue' outside a loop", 0);
    return std::move(out_);
  }

 private:
  Flow exec(const Body& body) {
    for (const auto& s : body) {
      const Flow f = exec(*s);
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::Text:
        out_ += s.text;
        return Flow::Normal;
      case Stmt::Kind::Output:
        out_ += to_str(eval(*s.expr));
        return Flow::Normal;
      case Stmt::Kind::If:
        for (size_t i = 0; i < s.conditions.size(); ++i)
          if (truthy(eval(*s.conditions[i]))) return exec(s.bodies[i]);
        if (s.bodies.size() > s.conditions.size()) return exec(s.bodies.back());
        return Flow::Normal;
      case Stmt::Kind::For:
        exec_for(s);
        return Flow::Normal;
      case Stmt::Kind::Set:
        exec_set(s, eval(*s.expr));
        return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        std::string saved = std::move(out_);
        out_.clear();
        const Flow f = exec(s.bodies[0]);
        std::string captured = std::move(out_);
        out_ = std::move(saved);
        if (f != Flow::Normal)
          throw TemplateError("'break' or 'continue' inside a set block", s.line);
        scopes_.back()[s.targets[0]] = Value::string(std::move(captured));
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: {
        // Closure: the enclosing loop/macro names as they are now; top-level names stay live.
        auto& closure = macro_closures_[&s];
        closure.clear();
        for (size_t i = 1; i < scopes_.size(); ++i)
          for (const auto& [k, v] : scopes_[i]) closure[k] = v;
        scopes_.back()[s.targets[0]] = Value::macro(&s, s.targets[0]);
        return Flow::Normal;
      }
      case Stmt::Kind::Break:
        return Flow::Break;
      case Stmt::Kind::Continue:
        return Flow::Continue;
    }
    return Flow::Normal;
  }

  void assign(const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      scopes_.back()[targets[0]] = v;
      return;
    }
    if (v.is_undefined()) fail_undefined(v, line);
    const ValueList items = iterate(v, line);
    if (items.size() != targets.size())
      throw TemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                              std::to_string(targets.size()) + " names",
                          line);
    for (size_t i = 0; i < targets.size(); ++i) scopes_.back()[targets[i]] = items[i];
  }

  void exec_set(const Stmt& s, const Value& v) {
    if (s.attribute.empty()) return assign(s.targets, v, s.line);
    const Value target = lookup(s.targets[0]);
    if (!target.is_namespace())
      throw TemplateError("cannot assign attribute on non-namespace object '" + s.targets[0] + "'",
                          s.line);
    for (auto& [k, val] : target.namespace_attrs())
      if (k == s.attribute) {
        val = v;
        return;
      }
    target.namespace_attrs().emplace_back(s.attribute, v);
  }

  void exec_for(const Stmt& s) {
    const Value seq = eval(*s.expr);
    if (seq.is_none()) throw TemplateError("'NoneType' object is not iterable", s.line);
    ValueList items = iterate(seq, s.line);
    if (!s.conditions.empty()) {  // {% for x in y if cond %}: filter first, loop.* sees the rest
      ValueList kept;
      for (const Value& item : items) {
        scopes_.emplace_back();
        assign(s.targets, item, s.line);
        const bool keep = truthy(eval(*s.conditions[0]));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      scopes_.back()["loop"] = Value::dict({
          {"index0", Value::integer(i)},
          {"index", Value::integer(i + 1)},
          {"revindex0", Value::integer(n - i - 1)},
          {"revindex", Value::integer(n - i)},
          {"first", Value::boolean(i == 0)},
          {"last", Value::boolean(i == n - 1)},
          {"length", Value::integer(n)},
          {"depth", Value::integer(1)},
          {"depth0", Value::integer(0)},
          {"previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item")},
          {"nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item")},
      });
      assign(s.targets, items[i], s.line);
      const Flow f = exec(s.bodies[0]);
      scopes_.pop_back();
      if (f == Flow::Break) break;
    }
    if (n == 0 && s.bodies.size() > 1) exec(s.bodies[1]);
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  CallArgs eval_args(const Expr& e, size_t first) {
    CallArgs args;
    for (size_t i = first; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i]));
    for (size_t i = 0; i < e.kwargs.size(); ++i)
      args.keyword.emplace_back(e.kwarg_names[i], eval(*e.kwargs[i]));
    return args;
  }

  Value get_attribute(const Value& obj, const std::string& name, int line) {
    if (obj.is_undefined()) fail_undefined(obj, line);
    if (const Value* v = obj.find(name)) return *v;
    return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + name + "'");
  }

  Value get_item(const Value& obj, const Value& key, int line) {
    if (obj.is_undefined()) fail_undefined(obj, line);
    if (key.is_undefined()) fail_undefined(key, line);
    const std::string missing =
        "'" + obj.type_name() + " object' has no attribute '" + to_str(key) + "'";
    if (obj.is_dict() || obj.is_namespace()) {
      if (key.is_string())
        if (const Value* v = obj.find(key.as_string())) return *v;
      return Value::undefined(missing);
    }
    if ((obj.is_list() || obj.is_string()) && is_int_like(key)) {
      int64_t i = int_of(key);
      if (obj.is_list()) {
        const int64_t n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        return i >= 0 && i < n ? obj.as_list()[i] : Value::undefined(missing);
      }
      const std::u32string cps = nibble::text::to_code_points(obj.as_string());
      const int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? Value::string(nibble::text::from_code_points(cps.substr(i, 1)))
                             : Value::undefined(missing);
    }
    if ((obj.is_list() || obj.is_string()) && !key.is_string())
      throw TemplateError(obj.type_name() + " indices must be integers, not " + key.type_name(),
                          line);
    return Value::undefined(missing);
  }

  Value eval_slice(const Expr& e) {
    const Value obj = eval(*e.items[0]);
    if (obj.is_undefined()) fail_undefined(obj, e.line);
    Value parts[3];
    const Value* ptr[3] = {nullptr, nullptr, nullptr};
    for (int i = 0; i < 3; ++i)
      if (e.items[i + 1]) {
        parts[i] = eval(*e.items[i + 1]);
        ptr[i] = &parts[i];
      }
    if (obj.is_string()) {
      const std::u32string cps = nibble::text::to_code_points(obj.as_string());
      std::u32string out;
      for (int64_t i :
           slice_indices(static_cast<int64_t>(cps.size()), ptr[0], ptr[1], ptr[2], e.line))
        out.push_back(cps[i]);
      return Value::string(nibble::text::from_code_points(out));
    }
    if (obj.is_list()) {
      ValueList out;
      for (int64_t i : slice_indices(static_cast<int64_t>(obj.as_list().size()), ptr[0], ptr[1],
                                     ptr[2], e.line))
        out.push_back(obj.as_list()[i]);
      return Value::list(std::move(out));
    }
    throw TemplateError("'" + obj.type_name() + "' object is not subscriptable", e.line);
  }

  Value eval_call(const Expr& e) {
    const Expr& callee = *e.items[0];
    if (callee.kind == Expr::Kind::Attribute) {
      const Value obj = eval(*callee.items[0]);
      if (obj.is_undefined()) fail_undefined(obj, e.line);
      if (has_method(obj, callee.name))
        return call_method(obj, callee.name, eval_args(e, 1), e.line);
      throw TemplateError("'" + obj.type_name() + "' object has no method '" + callee.name + "'",
                          e.line);
    }
    if (callee.kind == Expr::Kind::Name) {
      const Value v = lookup(callee.name);
      if (v.is_undefined() && is_global_function(callee.name))
        return call_global(callee.name, eval_args(e, 1), e.line);
      if (v.is_macro()) return call_macro(v, eval_args(e, 1), e.line);
      if (v.is_undefined()) fail_undefined(v, e.line);
      throw TemplateError("'" + callee.name + "' (" + v.type_name() + ") is not callable", e.line);
    }
    throw TemplateError("unsupported call expression", e.line);
  }

  // A macro sees its arguments and the template's top-level names, not the caller's locals.
  Value call_macro(const Value& macro, const CallArgs& args, int line) {
    // Recursion limit: a self-calling macro must get an error, not a stack overflow.
    if (macro_depth_ >= kMaxMacroDepth)
      throw TemplateError("macro calls nest deeper than " + std::to_string(kMaxMacroDepth), line);
    ++macro_depth_;
    struct DepthRestore {
      int& depth;
      ~DepthRestore() { --depth; }
    } restore{macro_depth_};
    const Stmt& def = *static_cast<const Stmt*>(macro.macro_definition());
    const size_t n_params = def.targets.size() - 1;
    if (args.positional.size() > n_params)
      throw TemplateError("macro '" + def.targets[0] + "' takes not more than " +
                              std::to_string(n_params) + " argument(s)",
                          line);
    std::unordered_map<std::string, Value> locals;
    for (size_t i = 0; i < n_params; ++i) {
      const std::string& param = def.targets[i + 1];
      if (i < args.positional.size()) {
        locals[param] = args.positional[i];
      } else if (def.conditions[i]) {
        locals[param] = eval(*def.conditions[i]);
      } else {
        locals[param] = Value::undefined("parameter '" + param + "' was not provided");
      }
    }
    for (const auto& [k, v] : args.keyword) {
      auto it = std::find(def.targets.begin() + 1, def.targets.end(), k);
      if (it == def.targets.end())
        throw TemplateError("macro '" + def.targets[0] + "' has no parameter named '" + k + "'",
                            line);
      locals[k] = v;
    }
    std::vector<std::unordered_map<std::string, Value>> saved_scopes = {
        scopes_[0], macro_closures_[&def], std::move(locals)};
    std::swap(saved_scopes, scopes_);
    std::string saved_out = std::move(out_);
    out_.clear();
    Flow flow;
    try {
      flow = exec(def.bodies[0]);
    } catch (...) {
      std::swap(saved_scopes, scopes_);
      out_ = std::move(saved_out);
      throw;
    }
    std::swap(saved_scopes, scopes_);
    std::string result = std::move(out_);
    out_ = std::move(saved_out);
    if (flow != Flow::Normal) throw TemplateError("'break' or 'continue' outside a loop", def.line);
    return Value::string(std::move(result));
  }

  Value eval_binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value l = eval(*e.items[0]);
      return truthy(l) ? eval(*e.items[1]) : l;
    }
    if (op == "or") {
      Value l = eval(*e.items[0]);
      return truthy(l) ? l : eval(*e.items[1]);
    }
    const Value l = eval(*e.items[0]);
    const Value r = eval(*e.items[1]);
    if (op == "~") return Value::string(to_str(l) + to_str(r));
    return arithmetic(op, l, r, e.line);
  }

  // a < b < c is (a < b) and (b < c), each operand evaluated once, stopping at the first false.
  Value eval_compare(const Expr& e) {
    Value l = eval(*e.items[0]);
    for (size_t i = 0; i < e.ops.size(); ++i) {
      Value r = eval(*e.items[i + 1]);
      if (!compare(e.ops[i], l, r, e.line)) return Value::boolean(false);
      l = std::move(r);
    }
    return Value::boolean(true);
  }

  static bool compare(const std::string& op, const Value& l, const Value& r, int line) {
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "in") return contains(r, l, line);
    if (op == "not in") return !contains(r, l, line);
    if (l.is_undefined()) fail_undefined(l, line);
    if (r.is_undefined()) fail_undefined(r, line);
    const bool swap = op == ">" || op == "<=";
    const auto lt = swap ? less_than(r, l) : less_than(l, r);
    if (!lt)
      throw TemplateError("'" + op + "' not supported between instances of '" + l.type_name() +
                              "' and '" + r.type_name() + "'",
                          line);
    return op == "<=" || op == ">=" ? !*lt : *lt;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::Literal:
        return e.value;
      case Expr::Kind::Name:
        return lookup(e.name);
      case Expr::Kind::List:
      case Expr::Kind::Tuple: {
        ValueList items;
        for (const auto& i : e.items) items.push_back(eval(*i));
        return e.kind == Expr::Kind::Tuple ? Value::tuple(std::move(items))
                                           : Value::list(std::move(items));
      }
      case Expr::Kind::Dict: {
        ValueDict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          const Value k = eval(*e.items[i]);
          if (!k.is_string()) throw TemplateError("unsupported: non-string dict keys", e.line);
          const Value v = eval(*e.items[i + 1]);
          bool replaced = false;
          for (auto& [key, val] : d)
            if (key == k.as_string()) {
              val = v;
              replaced = true;
            }
          if (!replaced) d.emplace_back(k.as_string(), v);
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::Attribute:
        return get_attribute(eval(*e.items[0]), e.name, e.line);
      case Expr::Kind::Subscript:
        return get_item(eval(*e.items[0]), eval(*e.items[1]), e.line);
      case Expr::Kind::Slice:
        return eval_slice(e);
      case Expr::Kind::Call:
        return eval_call(e);
      case Expr::Kind::Filter: {
        const Value v = eval(*e.items[0]);
        return apply_filter(e.name, v, eval_args(e, 1), e.line);
      }
      case Expr::Kind::Test: {
        const Value v = eval(*e.items[0]);
        return Value::boolean(apply_test(e.name, v, eval_args(e, 1), e.line) != e.negated);
      }
      case Expr::Kind::Unary: {
        const Value v = eval(*e.items[0]);
        if (e.name == "not") return Value::boolean(!truthy(v));
        if (v.is_undefined()) fail_undefined(v, e.line);
        if (v.kind() == K::Int || v.kind() == K::Bool)
          return Value::integer(e.name == "-" ? -int_of(v) : int_of(v));
        if (v.kind() == K::Float)
          return Value::floating(e.name == "-" ? -v.as_number() : v.as_number());
        throw TemplateError("bad operand type for unary " + e.name + ": '" + v.type_name() + "'",
                            e.line);
      }
      case Expr::Kind::Binary:
        return eval_binary(e);
      case Expr::Kind::Compare:
        return eval_compare(e);
      case Expr::Kind::Conditional:
        if (truthy(eval(*e.items[0]))) return eval(*e.items[1]);
        if (e.items[2]) return eval(*e.items[2]);
        return Value::undefined(
            "the inline if-expression evaluated to false and no else section was defined.");
    }
    throw TemplateError("unknown expression", e.line);
  }

  std::vector<std::unordered_map<std::string, Value>> scopes_;
  std::unordered_map<const Stmt*, std::unordered_map<std::string, Value>> macro_closures_;
  std::string out_;
  static constexpr int kMaxMacroDepth = 100;
  int macro_depth_ = 0;
};

}  // namespace

JinjaTemplate::JinjaTemplate(std::string_view source)
    : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string JinjaTemplate::render(const ValueDict& variables) const {
  return Renderer(variables).run(*body_);
}

}  // namespace nibble::chat
