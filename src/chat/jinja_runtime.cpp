// Jinja's evaluator: statements, macros and calls, operators, subscripts and slices, expressions.
#include "jinja_runtime.h"

#include <algorithm>
#include <cmath>

namespace qkv::jinja {

void Renderer::run(const Body& b) {
  for (const auto& s : b) {
    exec(*s);
    if (jump_ != Stmt::T::Text) return;
  }
}

Value Renderer::made(Value v) {
  if (v.k == Value::K::Str) charge(v.s.size());
  else if (v.k == Value::K::List) charge_items(*v.l);
  return v;
}

Value Renderer::read(Value v) {
  charge(v.k == Value::K::Str ? v.s.size() : 16);
  return v;
}

void Renderer::charge_items(const List& l) {
  uint64_t units = kItemCost * (uint64_t)l.size();
  for (const Value& x : l)
    if (x.k == Value::K::Str) units += x.s.size();
  charge(units);
}

void Renderer::emit(const std::string& s) {
  if (out_.size() + s.size() > kMaxOutput) too_much("the rendered prompt is too long");
  out_ += s;
}

Value Renderer::lookup(const std::string& n) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto f = it->find(n);
    if (f != it->end()) return f->second;
  }
  return Value();
}

std::string Renderer::capture(const Body& b) {
  std::string saved;
  std::swap(saved, out_);
  run(b);
  std::string r = std::move(out_);
  out_ = std::move(saved);
  return r;
}

void Renderer::assign(const std::vector<std::string>& target, Value v) {
  if (target.size() == 1) {
    scopes_.back()[target[0]] = std::move(v);
    return;
  }
  Value ns = lookup(target[0]);
  if (ns.k != Value::K::Dict || !ns.is_ns)
    bad_template("cannot set an attribute of '" + target[0] + "', which is not a namespace");
  if (v.has_ns)
    bad_template("a namespace cannot hold a namespace or a macro defined inside a block (" + target[0] + "." +
                 target[1] + ")");
  ns.put(target[1], std::move(v));
}

Value Renderer::call_macro(const Value& f, const Expr& e, const Stmt* caller_body) {
  const Stmt& m = *f.macro;
  const std::string name = m.t == Stmt::T::Macro ? m.text : "caller";
  const std::vector<Value> a = args(e);
  Scope local;
  List extra;
  Dict kw;
  if (a.size() > m.params.size() && !m.varargs)
    bad_template("macro '" + name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
  for (size_t i = 0; i < a.size(); i++) {
    if (i < m.params.size()) local[m.params[i].first] = a[i];
    else extra.push_back(a[i]);
  }
  for (const auto& kv : e.kw) {
    size_t i = 0;
    while (i < m.params.size() && m.params[i].first != kv.first) i++;
    if (i < m.params.size()) {
      if (i < a.size()) bad_template("macro '" + name + "' got multiple values for argument '" + kv.first + "'");
      local[kv.first] = eval(*kv.second);
    } else if (m.kwargs) {
      kw.emplace_back(kv.first, eval(*kv.second));
    } else {
      bad_template("macro '" + name + "' takes no keyword argument '" + kv.first + "'");
    }
  }
  // The scopes the body sees: a macro's stack is the globals alone (the caller's scopes wait
  // in `away`); a caller body gets back the scopes of its {% call %} site.
  std::vector<Scope> away(std::make_move_iterator(scopes_.begin() + 1), std::make_move_iterator(scopes_.end()));
  scopes_.resize(1);
  Frame* site = nullptr;
  if (m.t == Stmt::T::CallBlock) {
    for (Frame* fr : frames_)
      if (fr->serial == (uint64_t)f.i) site = fr;
    if (!site) bad_template("caller() used outside its macro call");
    for (auto& sc : site->scopes) scopes_.push_back(std::move(sc));
  }
  if (f.closure)
    for (const Scope& sc : f.closure->scopes) scopes_.push_back(sc);
  if (m.t == Stmt::T::CallBlock) local["caller"] = Value();   // a caller body has no caller of its own
  if (m.t == Stmt::T::Macro && f.closure) local[m.text] = f;  // its own name (not in the closure: no cycle)
  scopes_.push_back(std::move(local));
  for (const auto& pr : m.params) {
    Scope& top = scopes_.back();
    if (top.count(pr.first)) continue;
    top[pr.first] = pr.second ? eval(*pr.second) : Value();  // defaults see the earlier parameters
  }
  if (m.varargs) scopes_.back()["varargs"] = Value::list(std::move(extra));
  if (m.kwargs) scopes_.back()["kwargs"] = Value::dict(std::move(kw));
  Frame frame{++frame_serial_, std::move(away)};
  if (m.t == Stmt::T::Macro) {
    if (caller_body) {  // called by a {% call %} block: its body, as caller()
      Value c = Value::func("caller", caller_body);
      c.i = (int64_t)frame.serial;
      scopes_.back()["caller"] = c;
    }
    frames_.push_back(&frame);
  }
  std::string r = capture(m.body);
  if (m.t == Stmt::T::Macro) frames_.pop_back();
  if (site) {  // the {% call %} site's scopes go back to their frame
    site->scopes.clear();
    for (size_t i = 1; i + 1 < scopes_.size(); i++) site->scopes.push_back(std::move(scopes_[i]));
  }
  // (a closure's scopes are copies: what the body set there is dropped with them)
  scopes_.resize(1);
  for (auto& sc : frame.scopes) scopes_.push_back(std::move(sc));
  return Value::str(std::move(r));
}

void Renderer::exec(const Stmt& s) {
  Nest guard(this);
  tick();
  switch (s.t) {
    case Stmt::T::Text: emit(s.text); break;
    case Stmt::T::Out: emit(to_text(eval(*s.e))); break;
    case Stmt::T::If:
      for (const auto& arm : s.arms)
        if (!arm.first || truthy(eval(*arm.first))) {
          run(arm.second);
          break;
        }
      break;
    case Stmt::T::Set: assign(s.vars, eval(*s.e)); break;
    case Stmt::T::Break:
    case Stmt::T::Continue: jump_ = s.t; break;
    case Stmt::T::SetBlock: assign(s.vars, made(Value::str(capture(s.body)))); break;
    case Stmt::T::FilterBlock: {
      scopes_.emplace_back();  // what the body sets stays inside it, as in Jinja2
      Value text = made(Value::str(capture(s.body)));
      scopes_.back().clear();
      scopes_.back()[kFilterInput] = std::move(text);
      const std::string r = to_text(eval(*s.e));
      scopes_.pop_back();
      emit(r);
      break;
    }
    case Stmt::T::Generation:
      scopes_.emplace_back();
      run(s.body);
      scopes_.pop_back();
      break;
    case Stmt::T::Macro: {
      Value f = Value::func(s.text, &s);
      if (scopes_.size() > 1) {
        // The names where it is defined, copied (and charged as copies). Such a macro may not go
        // into a namespace (has_ns): a closure holding a namespace that holds the macro would
        // be a cycle, and chains of them would nest without bound.
        auto c = std::make_shared<Closure>(Closure{{scopes_.begin() + 1, scopes_.end()}});
        for (const auto& sc : c->scopes)
          for (const auto& kv : sc)
            charge(16 + kv.first.size() + (kv.second.k == Value::K::Str ? kv.second.s.size() : 0));
        f.closure = std::move(c);
        f.has_ns = true;
      }
      scopes_.back()[s.text] = std::move(f);
      break;
    }
    case Stmt::T::CallBlock: {
      Value f = lookup(s.e->name);
      if (f.k != Value::K::Func || !f.macro || f.macro->t != Stmt::T::Macro)
        bad_template("{% call %} of '" + s.e->name + "', which is not a macro");
      emit(call_macro(f, *s.e, &s).s);
      break;
    }
    case Stmt::T::For: {
      const Value it = eval(*s.e);
      List items;
      if (it.k == Value::K::List) items = *it.l, charge_items(items);
      else if (it.k == Value::K::Dict)
        for (const auto& kv : *it.d) items.push_back(key_value(kv));
      else if (it.k == Value::K::Str)
        for (char c : it.s) items.push_back(Value::str(std::string(1, c)));
      else if (it.defined() && it.k != Value::K::None)
        bad_template("a for loop over " + brief(it) + ", which is not a list");
      scopes_.emplace_back();
      if (s.filter) {  // the filter sees each item under the loop's names
        List kept;
        for (const Value& v : items) {
          bind(s.vars, v);
          if (truthy(eval(*s.filter))) kept.push_back(v);
        }
        items = std::move(kept);
      }
      const int64_t n = (int64_t)items.size();
      for (int64_t k = 0; k < n; k++) {
        scopes_.back().clear();  // as in Jinja, what one pass sets is gone in the next
        bind(s.vars, items[(size_t)k]);
        Value loop = Value::dict({{"index", Value::integer(k + 1)},
                                  {"index0", Value::integer(k)},
                                  {"first", Value::boolean(k == 0)},
                                  {"last", Value::boolean(k == n - 1)},
                                  {"length", Value::integer(n)},
                                  {"revindex", Value::integer(n - k)},
                                  {"revindex0", Value::integer(n - k - 1)},
                                  {"previtem", k > 0 ? items[(size_t)k - 1] : Value()},
                                  {"nextitem", k + 1 < n ? items[(size_t)k + 1] : Value()}});
        loop.is_loop = true;
        scopes_.back()["loop"] = loop;
        run(s.body);
        const Stmt::T jump = jump_;
        jump_ = Stmt::T::Text;
        if (jump == Stmt::T::Break) break;
      }
      if (n == 0) run(s.else_body);
      scopes_.pop_back();
      break;
    }
  }
}

void Renderer::bind(const std::vector<std::string>& vars, const Value& v) {
  if (vars.size() == 1) {
    scopes_.back()[vars[0]] = v;
    return;
  }
  if (v.k != Value::K::List || v.l->size() != vars.size())
    bad_template("cannot unpack " + brief(v) + " into " + std::to_string(vars.size()) + " names");
  for (size_t i = 0; i < vars.size(); i++) scopes_.back()[vars[i]] = (*v.l)[i];
}

int64_t Renderer::as_int(const Value& v, const char* what) {
  if (v.k == Value::K::Int || v.k == Value::K::Bool) return v.k == Value::K::Int ? v.i : v.b;
  if (v.k == Value::K::Float && std::isfinite(v.f) && std::fabs(v.f) < 9e18) return (int64_t)v.f;
  bad_template(std::string() + what + " needs an integer, not " + brief(v));
}

std::string Renderer::as_str(const Value& v, const char* what) {
  if (v.k != Value::K::Str) bad_template(std::string() + what + " needs a string, not " + brief(v));
  return v.s;
}

Value Renderer::arith(const std::string& op, const Value& a, const Value& b) {
  if (op == "+" && a.k == Value::K::Str && b.k == Value::K::Str) {
    if (a.s.size() + b.s.size() > kMaxOutput) too_much("a string grows too long");
    return Value::str(a.s + b.s);
  }
  if (op == "+" && a.k == Value::K::List && b.k == Value::K::List && !a.lazy && !b.lazy) {
    List l = *a.l;
    l.insert(l.end(), b.l->begin(), b.l->end());
    return Value::list(std::move(l));
  }
  if (op == "*" && a.k == Value::K::Str && (b.k == Value::K::Int)) {
    if (a.s.empty() || b.i <= 0) return Value::str("");
    if (b.i > 0 && !a.s.empty() && (uint64_t)b.i > kMaxOutput / a.s.size()) too_much("a string grows too long");
    std::string r;
    for (int64_t k = 0; k < b.i; k++) r += a.s;
    return Value::str(std::move(r));
  }
  if (!a.number() || !b.number()) bad_template("cannot apply '" + op + "' to " + brief(a) + " and " + brief(b));
  const bool ints = a.k != Value::K::Float && b.k != Value::K::Float;
  if (op == "/") {
    if (b.num() == 0) bad_template("division by zero");
    return Value::real(a.num() / b.num());
  }
  if (ints) {
    const int64_t x = a.k == Value::K::Int ? a.i : a.b, y = b.k == Value::K::Int ? b.i : b.b;
    int64_t r = 0;
    // Python's integers do not overflow; past 64 bits this is an error, not a wrapped value.
    const bool over = op == "+"   ? __builtin_add_overflow(x, y, &r)
                      : op == "-" ? __builtin_sub_overflow(x, y, &r)
                      : op == "*" ? __builtin_mul_overflow(x, y, &r)
                                  : (x == INT64_MIN && y == -1);
    if (over) bad_template("integer overflow in " + std::to_string(x) + " " + op + " " + std::to_string(y));
    if (op == "+" || op == "-" || op == "*") return Value::integer(r);
    if (y == 0) bad_template("division by zero");
    const int64_t q = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));  // Python's floor division
    if (op == "//") return Value::integer(q);
    return Value::integer(x - q * y);
  }
  const double x = a.num(), y = b.num();
  if (op == "+") return Value::real(x + y);
  if (op == "-") return Value::real(x - y);
  if (op == "*") return Value::real(x * y);
  if (y == 0) bad_template("division by zero");
  if (op == "//") return Value::real(std::floor(x / y));
  return Value::real(x - std::floor(x / y) * y);
}

bool Renderer::less(const Value& a, const Value& b) {
  if (a.number() && b.number()) return a.num() < b.num();
  if (a.k == Value::K::Str && b.k == Value::K::Str) return a.s < b.s;
  bad_template("cannot order " + brief(a) + " and " + brief(b));
}

bool Renderer::contains(const Value& hay, const Value& needle) {
  if (hay.k == Value::K::Str) {
    if (needle.k != Value::K::Str) bad_template("'in <string>' needs a string on the left, not " + brief(needle));
    return find_text(hay.s, needle.s) != std::string::npos;
  }
  if (hay.k == Value::K::List) {
    for (const Value& v : *hay.l) {
      charge(16);
      if (equal(v, needle)) return true;
    }
    return false;
  }
  if (hay.k == Value::K::Dict) return hay.get(needle) != nullptr;
  if (!hay.defined() || hay.k == Value::K::None) return false;
  bad_template("'in' needs a string, list or dict, not " + brief(hay));
}

std::vector<Value> Renderer::args(const Expr& e) {
  std::vector<Value> v;
  for (size_t i = 1; i < e.a.size(); i++) v.push_back(eval(*e.a[i]));
  return v;
}

Value Renderer::index(const Expr& e) {
  const Value o = eval(*e.a[0]);
  const Value k = eval(*e.a[1]);
  if (o.lazy) return Value();  // a generator has no items by index
  if (o.k == Value::K::Dict || (o.group && k.k == Value::K::Str)) {
    const Value* v = o.get(k);
    return v ? *v : Value();
  }
  if (o.k == Value::K::List || o.k == Value::K::Str) {
    if (!k.number()) return Value();
    const std::vector<size_t> at = o.k == Value::K::Str ? char_starts(o.s) : std::vector<size_t>();
    const int64_t n = o.k == Value::K::List ? (int64_t)o.l->size()
                      : at.empty()          ? (int64_t)o.s.size()
                                            : (int64_t)at.size() - 1;
    int64_t i = as_int(k, "an index");
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value();
    return o.k == Value::K::List ? (*o.l)[(size_t)i] : Value::str(char_at(o.s, at, i));
  }
  return Value();
}

std::vector<size_t> Renderer::char_starts(const std::string& s) {
  std::vector<size_t> at;
  bool ascii = true;
  for (const char c : s) ascii = ascii && (unsigned char)c < 0x80;
  charge(s.size());
  if (ascii) return at;
  for (size_t i = 0; i < s.size(); i += utf8_len(s, i)) at.push_back(i);
  at.push_back(s.size());
  return at;
}

std::string Renderer::char_at(const std::string& s, const std::vector<size_t>& at, int64_t k) {
  if (at.empty()) return std::string(1, s[(size_t)k]);
  return s.substr(at[(size_t)k], at[(size_t)k + 1] - at[(size_t)k]);
}

Value Renderer::slice(const Expr& e) {
  const Value o = eval(*e.a[0]);
  if (o.lazy) return Value();
  if (o.k != Value::K::List && o.k != Value::K::Str) bad_template("slicing " + brief(o));
  const std::vector<size_t> at = o.k == Value::K::Str ? char_starts(o.s) : std::vector<size_t>();
  const int64_t n = o.k == Value::K::List ? (int64_t)o.l->size()
                    : at.empty()          ? (int64_t)o.s.size()
                                          : (int64_t)at.size() - 1;
  const int64_t step = e.a[3] ? as_int(eval(*e.a[3]), "a slice step") : 1;
  if (step == 0) bad_template("a slice step of 0");
  auto bound = [&](const ExprP& x, int64_t dflt) {
    if (!x) return dflt;
    const Value v = eval(*x);
    if (v.k == Value::K::None) return dflt;
    int64_t i = as_int(v, "a slice bound");
    if (i < 0) i += n;
    return step > 0 ? std::min(std::max<int64_t>(i, 0), n) : std::min(std::max<int64_t>(i, -1), n - 1);
  };
  const int64_t lo = bound(e.a[1], step > 0 ? 0 : n - 1), hi = bound(e.a[2], step > 0 ? n : -1);
  List l;
  std::string s;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi;) {
    if (o.k == Value::K::List) l.push_back((*o.l)[(size_t)i]);
    else if (at.empty()) s += o.s[(size_t)i];
    else s.append(o.s, at[(size_t)i], at[(size_t)i + 1] - at[(size_t)i]);
    if (__builtin_add_overflow(i, step, &i)) break;  // past either end
  }
  if (o.k == Value::K::List) {
    Value r = Value::list(std::move(l));
    r.tuple = o.tuple;
    return r;
  }
  return Value::str(std::move(s));
}

Value Renderer::eval(const Expr& e) {
  Nest guard(this);
  tick();
  switch (e.t) {
    case Expr::T::Lit: return read(e.lit);
    // Values are copied out (strings by value): what a copy costs is charged.
    case Expr::T::Var: return read(lookup(e.name));
    case Expr::T::Attr: {
      const Value o = eval(*e.a[0]);
      const Value* v = o.get(e.name);
      return v ? read(*v) : Value();
    }
    case Expr::T::Index: return read(index(e));
    case Expr::T::Call: return made(call(e));
    case Expr::T::Slice: return made(slice(e));
    case Expr::T::Filter: return made(filter(e));
    case Expr::T::Test: return Value::boolean(test(e) != e.negate);
    case Expr::T::Neg: {
      const Value v = eval(*e.a[0]);
      if (v.k == Value::K::Int) {
        if (v.i == INT64_MIN) bad_template("integer overflow in -(" + std::to_string(v.i) + ")");
        return Value::integer(-v.i);
      }
      if (v.number()) return Value::real(-v.num());
      bad_template("cannot negate " + brief(v));
    }
    case Expr::T::Not: return Value::boolean(!truthy(eval(*e.a[0])));
    case Expr::T::Cond: return truthy(eval(*e.a[0])) ? eval(*e.a[1]) : eval(*e.a[2]);
    case Expr::T::ListLit: {
      List l;
      for (const auto& x : e.a) l.push_back(eval(*x));
      Value v = Value::list(std::move(l));
      v.tuple = e.negate;
      return v;
    }
    case Expr::T::DictLit: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.a.size(); i += 2) {
        const Value k = eval(*e.a[i]);
        if (k.k == Value::K::Int || k.k == Value::K::Bool)
          d.put(std::to_string(k.k == Value::K::Int ? k.i : (int64_t)k.b), eval(*e.a[i + 1]), true);
        else d.put(as_str(k, "a dict key"), eval(*e.a[i + 1]));
      }
      return d;
    }
    case Expr::T::Bin: {
      const std::string& op = e.name;
      if (op == "and") {
        Value l = eval(*e.a[0]);
        return truthy(l) ? eval(*e.a[1]) : l;
      }
      if (op == "or") {
        Value l = eval(*e.a[0]);
        return truthy(l) ? l : eval(*e.a[1]);
      }
      const Value l = eval(*e.a[0]), r = eval(*e.a[1]);
      if (op == "~") {
        const std::string s = to_text(l) + to_text(r);
        if (s.size() > kMaxOutput) too_much("a string grows too long");
        return made(Value::str(s));
      }
      if (op == "==") return Value::boolean(equal(l, r));
      if (op == "!=") return Value::boolean(!equal(l, r));
      if (op == "<") return Value::boolean(less(l, r));
      if (op == ">") return Value::boolean(less(r, l));
      if (op == "<=") return Value::boolean(!less(r, l));
      if (op == ">=") return Value::boolean(!less(l, r));
      if (op == "in") return Value::boolean(contains(r, l));
      if (op == "not in") return Value::boolean(!contains(r, l));
      return made(arith(op, l, r));
    }
  }
  return Value();
}

}  // namespace qkv::jinja
