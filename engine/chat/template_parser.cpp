#include "engine/chat/template_parser.h"

#include <cstdlib>
#include <initializer_list>

#include "engine/chat/template_error.h"
#include "engine/chat/template_lexer.h"

namespace nibble::chat {
namespace {

using T = Token::Type;

ExprPtr make(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    std::string end;
    Body body = parse_body({}, end);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  const Token& next() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool at_op(std::string_view op) const { return peek().type == T::Op && peek().text == op; }
  bool at_name(std::string_view n) const { return peek().type == T::Name && peek().text == n; }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    ++pos_;
    return true;
  }
  bool accept_name(std::string_view n) {
    if (!at_name(n)) return false;
    ++pos_;
    return true;
  }
  [[noreturn]] void fail(const std::string& msg) const { throw TemplateError(msg, peek().line); }
  // Jinja2's integers are unbounded, ours 64-bit: a literal beyond that is an error (wherever it
  // stands: `x.99999999999999999999` too), never an escaped std::out_of_range.
  std::int64_t integer_literal(const std::string& text) const {
    try {
      return std::stoll(text);
    } catch (const std::out_of_range&) {
      fail("integer literal out of range: " + text);
    }
  }
  // As Python's float() reads it: overflow is inf, underflow 0 (strtod never throws; stod did).
  static double float_literal(const std::string& text) {
    return std::strtod(text.c_str(), nullptr);
  }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case T::End:
        return "end of template";
      case T::BlockEnd:
        return "end of statement block";
      case T::VarEnd:
        return "end of print statement";
      case T::String:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail("expected '" + std::string(op) + "', got " + describe(peek()));
  }
  void expect(T type, const char* what) {
    if (peek().type != type) fail(std::string("expected ") + what + ", got " + describe(peek()));
    ++pos_;
  }
  std::string expect_name() {
    if (peek().type != T::Name) fail("expected a name, got " + describe(peek()));
    return next().text;
  }

  // Statements until "{% <one of end_tags>": consumes through the end tag's name.
  // Nesting limit: a hostile template must get an error, not a stack overflow.
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxDepth)
        p.fail("template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p.depth_; }
  };
  static constexpr int kMaxDepth = 200;

  Body parse_body(std::initializer_list<std::string_view> end_tags, std::string& found) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == T::End) {
        if (end_tags.size() == 0) return body;
        std::string wanted;
        for (auto tag : end_tags)
          wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
        fail("unexpected end of template, expected " + wanted);
      }
      if (t.type == T::Text) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        ++pos_;
        continue;
      }
      if (t.type == T::VarBegin) {
        ++pos_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Output;
        s->line = t.line;
        s->expr = parse_expression();
        expect(T::VarEnd, "'}}'");
        body.push_back(std::move(s));
        continue;
      }
      if (t.type != T::BlockBegin) fail("unexpected " + describe(t));
      ++pos_;
      const std::string& tag = peek().type == T::Name ? peek().text : "";
      for (auto end : end_tags) {
        if (tag == end) {
          found = tag;
          ++pos_;
          return body;
        }
      }
      body.push_back(parse_statement());
    }
  }

  StmtPtr parse_statement() {
    const Token& t = peek();
    if (t.type != T::Name) fail("expected a statement name, got " + describe(t));
    const std::string tag = t.text;
    const int line = t.line;
    ++pos_;
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (tag == "if") return parse_if(std::move(s));
    if (tag == "for") return parse_for(std::move(s));
    if (tag == "set") return parse_set(std::move(s));
    if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      expect(T::BlockEnd, "'%}'");
      return s;
    }
    if (tag == "macro") return parse_macro(std::move(s));
    if (tag == "generation") {  // transformers' AssistantTracker: renders its body unchanged
      expect(T::BlockEnd, "'%}'");
      s->kind = Stmt::Kind::If;
      s->conditions.push_back(make(Expr::Kind::Literal, line));
      s->conditions.back()->value = Value::boolean(true);
      std::string end;
      s->bodies.push_back(parse_body({"endgeneration"}, end));
      expect(T::BlockEnd, "'%}'");
      return s;
    }
    throw TemplateError("unsupported template tag '" + tag + "'", line);
  }

  StmtPtr parse_if(StmtPtr s) {
    s->kind = Stmt::Kind::If;
    std::string found = "if";
    while (true) {
      if (found == "if" || found == "elif") {
        s->conditions.push_back(parse_expression());
        expect(T::BlockEnd, "'%}'");
        s->bodies.push_back(parse_body({"elif", "else", "endif"}, found));
      } else if (found == "else") {
        expect(T::BlockEnd, "'%}'");
        s->bodies.push_back(parse_body({"endif"}, found));
      } else {  // endif
        expect(T::BlockEnd, "'%}'");
        return s;
      }
    }
  }

  StmtPtr parse_for(StmtPtr s) {
    s->kind = Stmt::Kind::For;
    s->targets.push_back(expect_name());
    while (accept_op(",")) s->targets.push_back(expect_name());
    if (!accept_name("in")) fail("expected 'in' in for loop, got " + describe(peek()));
    s->expr = parse_or_conditional(false);
    if (accept_name("if")) s->conditions.push_back(parse_or_conditional(false));
    if (accept_name("recursive")) throw TemplateError("unsupported: recursive for loops", s->line);
    expect(T::BlockEnd, "'%}'");
    std::string found;
    s->bodies.push_back(parse_body({"else", "endfor"}, found));
    if (found == "else") {
      expect(T::BlockEnd, "'%}'");
      s->bodies.push_back(parse_body({"endfor"}, found));
    }
    expect(T::BlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_macro(StmtPtr s) {
    s->kind = Stmt::Kind::Macro;
    s->targets.push_back(expect_name());
    expect_op("(");
    while (!at_op(")")) {
      if (s->targets.size() > 1) expect_op(",");
      if (at_op(")")) break;
      s->targets.push_back(expect_name());
      s->conditions.push_back(accept_op("=") ? parse_expression() : nullptr);
    }
    expect_op(")");
    expect(T::BlockEnd, "'%}'");
    std::string found;
    s->bodies.push_back(parse_body({"endmacro"}, found));
    if (peek().type == T::Name) ++pos_;  // {% endmacro name %}
    expect(T::BlockEnd, "'%}'");
    return s;
  }

  StmtPtr parse_set(StmtPtr s) {
    s->targets.push_back(expect_name());
    if (accept_op(".")) {
      s->attribute = expect_name();
    } else {
      while (accept_op(",")) s->targets.push_back(expect_name());
    }
    if (accept_op("=")) {
      s->kind = Stmt::Kind::Set;
      s->expr = parse_tuple_or_expression();
      expect(T::BlockEnd, "'%}'");
      return s;
    }
    if (s->targets.size() != 1 || !s->attribute.empty()) fail("expected '=' in set statement");
    if (at_op("|")) throw TemplateError("unsupported: filtered set blocks", s->line);
    s->kind = Stmt::Kind::SetBlock;
    expect(T::BlockEnd, "'%}'");
    std::string found;
    s->bodies.push_back(parse_body({"endset"}, found));
    expect(T::BlockEnd, "'%}'");
    return s;
  }

  // ---- expressions (precedence as in Jinja2's parser) ----
  ExprPtr parse_tuple_or_expression() {
    const int line = peek().line;
    ExprPtr first = parse_expression();
    if (!at_op(",")) return first;
    auto t = make(Expr::Kind::Tuple, line);
    t->items.push_back(std::move(first));
    while (accept_op(",")) {
      if (peek().type == T::BlockEnd || peek().type == T::VarEnd) break;
      t->items.push_back(parse_expression());
    }
    return t;
  }

  ExprPtr parse_expression() { return parse_or_conditional(true); }

  ExprPtr parse_or_conditional(bool with_condexpr) {
    ExprPtr e = parse_or();
    while (with_condexpr && at_name("if")) {
      const int line = next().line;
      auto c = make(Expr::Kind::Conditional, line);
      c->items.push_back(parse_or());  // condition
      c->items.push_back(std::move(e));
      c->items.push_back(accept_name("else") ? parse_or_conditional(true) : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r, int line) {
    auto b = make(Expr::Kind::Binary, line);
    b->name = std::move(op);
    b->items.push_back(std::move(l));
    b->items.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (at_name("not")) {
      auto u = make(Expr::Kind::Unary, next().line);
      u->name = "not";
      u->items.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const int line = peek().line;
    ExprPtr first = parse_math1();
    ExprPtr chain = make(Expr::Kind::Compare, line);
    while (true) {
      if (peek().type == T::Op &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        chain->ops.push_back(next().text);
      } else if (accept_name("in")) {
        chain->ops.push_back("in");
      } else if (at_name("not") && peek(1).type == T::Name && peek(1).text == "in") {
        pos_ += 2;
        chain->ops.push_back("not in");
      } else {
        break;
      }
      chain->items.push_back(parse_math1());
    }
    if (chain->ops.empty()) return first;
    chain->items.insert(chain->items.begin(), std::move(first));
    return chain;
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (at_op("+") || at_op("-")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_concat(), t.line);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (at_op("~")) {
      const int line = next().line;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_pow(), t.line);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (at_op("**")) {
      const int line = next().line;
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (at_op("-") || at_op("+")) {
      const Token& t = next();
      e = make(Expr::Kind::Unary, t.line);
      e->name = t.text;
      e->items.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filter_expr(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    auto lit = [&](Value v) {
      auto e = make(Expr::Kind::Literal, t.line);
      e->value = std::move(v);
      ++pos_;
      return e;
    };
    switch (t.type) {
      case T::Name:
        if (t.text == "true" || t.text == "True") return lit(Value::boolean(true));
        if (t.text == "false" || t.text == "False") return lit(Value::boolean(false));
        if (t.text == "none" || t.text == "None") return lit(Value::none());
        {
          auto e = make(Expr::Kind::Name, t.line);
          e->name = t.text;
          ++pos_;
          return e;
        }
      case T::String: {
        std::string s = t.text;
        ++pos_;
        while (peek().type == T::String) s += next().text;  // adjacent literals concatenate
        auto e = make(Expr::Kind::Literal, t.line);
        e->value = Value::string(std::move(s));
        return e;
      }
      case T::Int:
        return lit(Value::integer(integer_literal(t.text)));
      case T::Float:
        return lit(Value::floating(float_literal(t.text)));
      case T::Op:
        if (t.text == "(") return parse_paren();
        if (t.text == "[") return parse_list();
        if (t.text == "{") return parse_dict();
        break;
      default:
        break;
    }
    fail("unexpected " + describe(t) + " in expression");
  }

  ExprPtr parse_paren() {
    const int line = next().line;
    if (accept_op(")")) return make(Expr::Kind::Tuple, line);
    ExprPtr first = parse_expression();
    if (accept_op(")")) return first;
    auto t = make(Expr::Kind::Tuple, line);
    t->items.push_back(std::move(first));
    while (accept_op(",")) {
      if (at_op(")")) break;
      t->items.push_back(parse_expression());
    }
    expect_op(")");
    return t;
  }
  ExprPtr parse_list() {
    auto l = make(Expr::Kind::List, next().line);
    while (!at_op("]")) {
      if (!l->items.empty()) expect_op(",");
      if (at_op("]")) break;
      l->items.push_back(parse_expression());
    }
    expect_op("]");
    return l;
  }
  ExprPtr parse_dict() {
    auto d = make(Expr::Kind::Dict, next().line);
    while (!at_op("}")) {
      if (!d->items.empty()) expect_op(",");
      if (at_op("}")) break;
      d->items.push_back(parse_expression());
      expect_op(":");
      d->items.push_back(parse_expression());
    }
    expect_op("}");
    return d;
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (accept_op(".")) {
        auto a = make(Expr::Kind::Attribute, line);
        if (peek().type == T::Int) {  // foo.0 is foo[0] in Jinja2
          a->kind = Expr::Kind::Subscript;
          a->items.push_back(std::move(e));
          auto idx = make(Expr::Kind::Literal, line);
          idx->value = Value::integer(integer_literal(next().text));
          a->items.push_back(std::move(idx));
        } else {
          a->name = expect_name();
          a->items.push_back(std::move(e));
        }
        e = std::move(a);
      } else if (accept_op("[")) {
        e = parse_subscript(std::move(e), line);
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, int line) {
    ExprPtr parts[3];
    int part = 0;
    bool is_slice = false;
    while (!at_op("]")) {
      if (accept_op(":")) {
        is_slice = true;
        if (++part > 2) fail("too many ':' in slice");
        continue;
      }
      if (parts[part]) fail("expected ':' or ']' in subscript, got " + describe(peek()));
      parts[part] = parse_expression();
    }
    expect_op("]");
    if (!is_slice) {
      if (!parts[0]) fail("empty subscript");
      auto s = make(Expr::Kind::Subscript, line);
      s->items.push_back(std::move(obj));
      s->items.push_back(std::move(parts[0]));
      return s;
    }
    auto s = make(Expr::Kind::Slice, line);
    s->items.push_back(std::move(obj));
    for (auto& p : parts) s->items.push_back(std::move(p));
    return s;
  }

  // "(args, name=kwargs)" appended to e's items / kwargs.
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (at_op(")")) break;
      if (at_op("*") || at_op("**")) fail("unsupported: *args / **kwargs in calls");
      if (peek().type == T::Name && peek(1).type == T::Op && peek(1).text == "=") {
        e.kwarg_names.push_back(next().text);
        ++pos_;
        e.kwargs.push_back(parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument");
        e.items.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto c = make(Expr::Kind::Call, peek().line);
    c->items.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    while (true) {
      if (at_op("|")) {
        const int line = next().line;
        auto f = make(Expr::Kind::Filter, line);
        f->name = expect_name();
        while (accept_op(".")) f->name += "." + expect_name();
        f->items.push_back(std::move(e));
        if (at_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (at_name("is")) {
        const int line = next().line;
        auto t = make(Expr::Kind::Test, line);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->items.push_back(std::move(e));
        if (at_op("(")) {
          parse_call_args(*t);
        } else if (peek().type == T::String || peek().type == T::Int || peek().type == T::Float ||
                   at_op("[") || at_op("{") ||
                   (peek().type == T::Name && !at_name("else") && !at_name("or") &&
                    !at_name("and"))) {
          // "is divisibleby 3": like Jinja2, any other name starts the argument, so
          // "x is defined if c else d" is a syntax error there and here.
          if (at_name("is")) fail("you cannot chain multiple tests with 'is'");
          t->items.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (at_op("(")) {
        e = parse_call(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  int depth_ = 0;
  size_t pos_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  return Parser(tokenize_template(source)).parse_all();
}

}  // namespace nibble::chat
