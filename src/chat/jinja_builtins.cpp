// Jinja's built-ins: global functions, filters and tests, as Jinja2 defines them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "jinja_runtime.h"

namespace qkv::jinja {

namespace {

// Python's printf-style `fmt % args` (the format filter): %s %r %d %i %f %F %e %E %g %G %x %X %o
// and %% with flags, width and precision.
std::string percent_format(const std::string& fmt, const std::vector<Value>& args) {
  std::string o;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); i++) {
    if (fmt[i] != '%') {
      o += fmt[i];
      continue;
    }
    size_t j = i + 1;
    std::string flags;
    while (j < fmt.size() && std::strchr("-+ #0", fmt[j])) flags += fmt[j++];
    std::string width, prec;
    while (j < fmt.size() && std::isdigit((unsigned char)fmt[j])) width += fmt[j++];
    bool has_prec = false;
    if (j < fmt.size() && fmt[j] == '.') {
      has_prec = true;
      j++;
      while (j < fmt.size() && std::isdigit((unsigned char)fmt[j])) prec += fmt[j++];
    }
    if (j >= fmt.size()) bad_template("format: an incomplete format");
    const char c = fmt[j];
    i = j;
    if (c == '%') {
      o += '%';
      continue;
    }
    if (width.size() > 4 || prec.size() > 3) too_much("format: a width or precision past 9999");
    if (!std::strchr("srdifFeEgGxXo", c)) unsupported(std::string("format: the conversion %") + c);
    if (next >= args.size()) bad_template("format: not enough arguments for the format string");
    const Value& x = args[next++];
    std::string piece;
    if (c == 's' || c == 'r') {
      piece = c == 's' ? to_text(x) : repr(x);
      if (has_prec) {  // at most prec characters
        const int64_t p = prec.empty() ? 0 : std::stoll(prec);
        size_t b = 0;
        for (int64_t k = 0; k < p && b < piece.size(); k++) {
          b++;
          while (b < piece.size() && ((unsigned char)piece[b] & 0xc0) == 0x80) b++;
        }
        piece.resize(b);
      }
      const int64_t w = width.empty() ? 0 : std::stoll(width);
      int64_t n = 0;
      for (unsigned char ch : piece) n += (ch & 0xc0) != 0x80;
      if (n < w)
        piece = flags.find('-') != std::string::npos ? piece + std::string((size_t)(w - n), ' ')
                                                     : std::string((size_t)(w - n), ' ') + piece;
    } else {
      if (!x.number()) bad_template(std::string("format: %") + c + " needs a number, not " + brief(x));
      const std::string spec = "%" + flags + width + (has_prec ? "." + prec : "");
      char buf[10100];
      if (std::strchr("dixXo", c)) {
        if (x.k == Value::K::Float && !std::isfinite(x.f))
          bad_template("format: cannot convert " + brief(x) + " to an integer");
        const long long n = x.k == Value::K::Float  ? (long long)std::trunc(x.f)
                            : x.k == Value::K::Bool ? (long long)x.b
                                                    : (long long)x.i;
        std::snprintf(buf, sizeof buf, (spec + "ll" + (c == 'i' ? 'd' : c)).c_str(), n);
      } else {
        std::snprintf(buf, sizeof buf, (spec + c).c_str(), x.num());
      }
      piece = buf;
    }
    o += piece;
    if (o.size() > kMaxOutput) too_much("a string grows too long");
  }
  if (next < args.size()) bad_template("format: not all arguments converted during string formatting");
  return o;
}

}  // namespace

Value Renderer::call(const Expr& e) {
  if (e.a[0]) return method(e);
  const std::string& f = e.name;
  {
    const Value fv = lookup(f);
    if (fv.k == Value::K::Func && fv.macro) return call_macro(fv, e);
    if (f == "caller") bad_template("caller() outside a {% call %} block");
  }
  const std::vector<Value> a = args(e);
  if (f == "raise_exception") {
    // The template's own verdict on the conversation (roles that do not alternate, ...): the caller's error.
    fail(ErrorCode::BadArgument,
         "chat template: " + (a.empty() ? std::string("raise_exception()") : message_text(a[0])));
  }
  if (f == "namespace") {
    Value ns = Value::dict();
    ns.has_ns = true;
    ns.is_ns = true;
    for (const auto& kv : e.kw) ns.put(kv.first, eval(*kv.second));
    return ns;
  }
  if (f == "dict") {
    Value d = Value::dict();
    for (const auto& kv : e.kw) d.put(kv.first, eval(*kv.second));
    return d;
  }
  if (f == "range") {
    if (a.empty() || a.size() > 3) bad_template("range takes 1 to 3 integers");
    int64_t lo = 0, hi, step = 1;
    if (a.size() == 1) hi = as_int(a[0], "range");
    else lo = as_int(a[0], "range"), hi = as_int(a[1], "range");
    if (a.size() == 3) step = as_int(a[2], "range");
    if (step == 0) bad_template("range with a step of 0");
    // Its length, charged before anything is made (a long range is refused without building it).
    const long double len = step > 0 ? (hi > lo ? ((long double)hi - lo + step - 1) / step : 0)
                                     : (lo > hi ? ((long double)lo - hi - step - 1) / -step : 0);
    if (len > 1000000) too_much("range is too long");
    charge(kItemCost * (uint64_t)len);
    List l;
    for (int64_t v = lo; step > 0 ? v < hi : v > hi;) {
      if (l.size() >= 1000000) too_much("range is too long");
      l.push_back(Value::integer(v));
      if (__builtin_add_overflow(v, step, &v)) break;  // past the 64-bit range: past hi too
    }
    return Value::list(std::move(l));
  }
  if (f == "strftime_now") {
    const std::string fmt = a.empty() ? std::string("%Y-%m-%d") : as_str(a[0], "strftime_now");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
#if defined(_WIN32)
    localtime_s(&tm, &now);
#else
    localtime_r(&now, &tm);
#endif
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    return Value::str(std::string(buf, n));
  }
  unsupported("the function '" + f + "'");
}

Renderer::Kw Renderer::kwargs(const Expr& e) {
  Kw kw;
  for (const auto& kv : e.kw) kw.emplace_back(kv.first, eval(*kv.second));
  return kw;
}

Value Renderer::filter(const Expr& e) {
  const Value v = eval(*e.a[0]);
  return apply_filter(e.name, v, args(e), kwargs(e));
}

Value Renderer::arg(const std::vector<Value>& a, const Kw& kw, size_t i, const char* name, Value dflt) {
  for (const auto& kv : kw)
    if (kv.first == name) return kv.second;
  return i < a.size() ? a[i] : dflt;
}

void Renderer::only_kw(const char* f, const Kw& kw, std::initializer_list<const char*> names) {
  for (const auto& kv : kw) {
    bool ok = false;
    for (const char* n : names) ok = ok || kv.first == n;
    if (!ok) bad_template(std::string("the filter '") + f + "' has no argument '" + kv.first + "'");
  }
}

List Renderer::items_of(const Value& v, const char* f) {
  List l;
  if (v.k == Value::K::List) {
    charge(kItemCost * v.l->size());
    return *v.l;
  }
  if (v.k == Value::K::Dict)
    for (const auto& kv : *v.d) l.push_back(key_value(kv));
  else if (v.k == Value::K::Str)
    for (const std::string& c : chars(v.s)) l.push_back(Value::str(c));
  else if (v.defined() && v.k != Value::K::None) bad_template(std::string("the filter '") + f + "' over " + brief(v));
  charge(kItemCost * l.size());
  return l;
}

bool Renderer::sort_less(const Value& a, const Value& b, bool cs) {
  charge(16);
  if (!cs && a.k == Value::K::Str && b.k == Value::K::Str) return lower(a.s) < lower(b.s);
  return less(a, b);
}

Value Renderer::attribute(const Value& item, const std::string& path) {
  Value cur = item;
  size_t p = 0;
  for (;;) {
    const size_t q = path.find('.', p);
    const std::string part = path.substr(p, q == std::string::npos ? std::string::npos : q - p);
    const Value* next = cur.get(part);
    if (!next && cur.k == Value::K::List && !part.empty() &&
        part.find_first_not_of("0123456789") == std::string::npos && part.size() < 10) {
      const size_t i = std::stoul(part);
      next = i < cur.l->size() ? &(*cur.l)[i] : nullptr;
    }
    if (!next) return Value();
    cur = *next;
    if (q == std::string::npos) return cur;
    p = q + 1;
  }
}

Value Renderer::lazy(Value v) {
  v.lazy = true;
  return v;
}

Value Renderer::apply_filter(const std::string& f, const Value& v, const std::vector<Value>& a, const Kw& kw) {
  charge(64);
  std::string r;
  // Each filter reads only what it needs: no input is printed whole unless the filter prints it.
  if (f == "trim") return Value::str(strip(to_text(v), a.empty() ? ws() : as_str(a[0], "trim"), true, true));
  if ((f == "length" || f == "count" || f == "last") && v.lazy)
    bad_template("a generator has no " + std::string(f == "last" ? "last item" : "length") + ": add | list");
  if (f == "length" || f == "count") {
    if (v.k == Value::K::Str) return Value::integer(code_points(v.s));
    if (v.k == Value::K::List) return Value::integer((int64_t)v.l->size());
    if (v.k == Value::K::Dict) return Value::integer((int64_t)v.d->size());
    if (!v.defined()) return Value::integer(0);
    bad_template("length of " + brief(v));
  }
  if (f == "upper" || f == "lower" || f == "title" || f == "capitalize") {
    recase(f, to_text(v), &r);
    return Value::str(std::move(r));
  }
  if (f == "string") return v.k == Value::K::Str ? v : Value::str(to_text(v));
  if (f == "safe") return v;
  if (f == "escape" || f == "e" || f == "forceescape") {
    for (const char c : to_text(v)) {
      if (c == '&') r += "&amp;";
      else if (c == '<') r += "&lt;";
      else if (c == '>') r += "&gt;";
      else if (c == '"') r += "&#34;";
      else if (c == '\'') r += "&#39;";
      else r += c;
    }
    return Value::str(std::move(r));
  }
  if (f == "int") {
    const Value dflt = arg(a, kw, 0, "default", Value::integer(0));
    if (v.k == Value::K::Str) {
      const std::string t = strip(v.s, ws(), true, true);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(t.c_str(), &end, 10);
      if (!t.empty() && end && *end == 0 && errno == 0) return Value::integer(x);
      const double d = std::strtod(t.c_str(), &end);  // Jinja2 tries float() next
      if (!t.empty() && end && *end == 0 && std::isfinite(d) && std::fabs(d) < 9e18) return Value::integer((int64_t)d);
      return dflt;
    }
    return v.number() ? Value::integer(as_int(v, "int")) : dflt;
  }
  if (f == "float") {
    if (v.k == Value::K::Str) {
      const std::string t = strip(v.s, ws(), true, true);
      char* end = nullptr;
      const double d = std::strtod(t.c_str(), &end);
      if (!t.empty() && end && *end == 0) return Value::real(d);
      return arg(a, kw, 0, "default", Value::real(0));
    }
    return v.number() ? Value::real(v.num()) : arg(a, kw, 0, "default", Value::real(0));
  }
  if (f == "abs") {
    if (v.k == Value::K::Int && v.i != INT64_MIN) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.number()) return Value::real(std::fabs(v.num()));
    bad_template("abs of " + brief(v));
  }
  if (f == "first" || f == "last") {  // one item read, whatever the size
    if (v.k == Value::K::List) return v.l->empty() ? Value() : (f == "first" ? v.l->front() : v.l->back());
    if (v.k == Value::K::Str) {
      if (v.s.empty()) return Value();
      if (f == "first") return Value::str(v.s.substr(0, utf8_len(v.s, 0)));
      size_t i = v.s.size() - 1;
      while (i > 0 && ((unsigned char)v.s[i] & 0xc0) == 0x80 && v.s.size() - i < 4) i--;
      return Value::str(v.s.substr(utf8_len(v.s, i) == v.s.size() - i ? i : v.s.size() - 1));
    }
    if (v.k == Value::K::Dict) return v.d->empty() ? Value() : key_value(f == "first" ? v.d->front() : v.d->back());
    bad_template("" + f + " of " + brief(v));
  }
  if (f == "join") {
    only_kw("join", kw, {"d", "attribute"});
    const std::string sep = a.empty() ? std::string() : as_str(arg(a, kw, 0, "d"), "join");
    const Value at = arg(a, kw, 1, "attribute");
    const List l = items_of(v, "join");
    for (size_t i = 0; i < l.size(); i++) {
      if (i) r += sep;
      r += to_text(at.defined() && at.k != Value::K::None ? attribute(l[i], to_text(at)) : l[i]);
      if (r.size() > kMaxOutput) too_much("a string grows too long");
    }
    return Value::str(std::move(r));
  }
  if (f == "default" || f == "d") {
    const bool boolean = truthy(arg(a, kw, 1, "boolean", Value::boolean(false)));
    if (boolean ? truthy(v) : v.defined()) return v;
    return arg(a, kw, 0, "default_value", Value::str(""));
  }
  if (f == "tojson") {
    only_kw("tojson", kw, {"indent", "sort_keys", "ensure_ascii", "separators"});
    const Value indent = arg(a, kw, 0, "indent");
    Style st;
    st.json = true;
    st.sort = truthy(arg({}, kw, 9, "sort_keys"));
    st.ascii = truthy(arg({}, kw, 9, "ensure_ascii"));  // Hugging Face's tojson: ensure_ascii off unless asked
    st.pretty = indent.defined() && indent.k != Value::K::None;
    if (st.pretty) st.ind = indent_text(indent), st.isep = ",";
    const Value sep = arg({}, kw, 9, "separators");
    if (sep.defined() && sep.k != Value::K::None) {
      if (sep.k != Value::K::List || sep.l->size() != 2) bad_template("tojson's separators must be a pair of strings");
      st.isep = as_str((*sep.l)[0], "tojson's separators");
      st.ksep = as_str((*sep.l)[1], "tojson's separators");
      if (st.isep.size() > 100 || st.ksep.size() > 100) too_much("tojson's separators are longer than 100 bytes");
    }
    return Value::str(repr(v, st));
  }
  if (f == "indent") {  // Jinja 3's: every line but the first (unless first=true); blank lines only if blank=true
    only_kw("indent", kw, {"width", "first", "blank"});
    const std::string ind = indent_text(arg(a, kw, 0, "width", Value::integer(4)));
    const bool first = truthy(arg(a, kw, 1, "first", Value::boolean(false))),
               blank = truthy(arg(a, kw, 2, "blank", Value::boolean(false)));
    const std::vector<std::string> lines = split_lines(to_text(v) + "\n");
    for (size_t i = 0; i < lines.size(); i++) {
      if (i) r += "\n";
      if (i == 0 ? first : blank || !lines[i].empty()) r += ind;
      r += lines[i];
      if (r.size() > kMaxOutput) too_much("a string grows too long");
    }
    charge(r.size());
    return Value::str(std::move(r));
  }
  if (f == "unique") {  // first of each, strings compared case-blind unless case_sensitive=true
    only_kw("unique", kw, {"case_sensitive", "attribute"});
    const bool cs = truthy(arg(a, kw, 0, "case_sensitive", Value::boolean(false)));
    const Value attr = arg(a, kw, 1, "attribute");
    const List items = items_of(v, "unique");
    const std::string name = attr.defined() && attr.k != Value::K::None ? to_text(attr) : std::string();
    auto key = [&](const Value& x) {
      Value k = name.empty() ? x : attribute(x, name);
      if (!cs && k.k == Value::K::Str) k.s = lower(k.s);
      return k;
    };
    List out, seen;
    for (const Value& x : items) {
      const Value k = key(x);
      bool dup = false;
      for (const Value& y : seen) {
        charge(8);
        if (equal(k, y)) {
          dup = true;
          break;
        }
      }
      if (!dup) seen.push_back(k), out.push_back(x);
    }
    return lazy(Value::list(std::move(out)));
  }
  if (f == "list") return Value::list(items_of(v, "list"));
  if (f == "reverse") {
    if (v.k == Value::K::Str) {
      const std::vector<std::string> cs = chars(v.s);
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) r += *it;
      return Value::str(std::move(r));
    }
    if (v.k == Value::K::List) return lazy(Value::list(List(v.l->rbegin(), v.l->rend())));
    bad_template("reverse of " + brief(v));
  }
  if (f == "replace" && a.size() >= 2) {
    const int64_t count = a.size() > 2 ? as_int(a[2], "replace") : -1;
    return Value::str(replace_all(to_text(v), as_str(a[0], "replace"), as_str(a[1], "replace"), count));
  }
  if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr")
    return lazy(select(v, a, f.size() > 6, f[0] == 's'));
  if (f == "map") {
    const List items = items_of(v, "map");
    List l;
    const Value at = arg({}, kw, 9, "attribute");
    if (at.defined()) {
      const Value dflt = arg({}, kw, 9, "default");
      const std::string name = to_text(at);
      for (const Value& item : items) {
        const Value x = attribute(item, name);
        l.push_back(x.defined() ? x : dflt);
      }
    } else {
      if (a.empty()) bad_template("map needs a filter name or attribute=");
      const std::string g = as_str(a[0], "map");
      const std::vector<Value> rest(a.begin() + 1, a.end());
      for (const Value& item : items) l.push_back(apply_filter(g, item, rest, kw));
    }
    return lazy(Value::list(std::move(l)));
  }
  if (f == "items") {
    List l;
    if (v.k == Value::K::Dict)
      for (const auto& kv : *v.d) l.push_back(pair(key_value(kv), kv.second));
    else if (v.defined()) bad_template("items of " + brief(v));
    return lazy(Value::list(std::move(l)));
  }
  if (f == "dictsort") {  // (key, value) pairs, by key (or by='value'), case-blind unless case_sensitive
    only_kw("dictsort", kw, {"case_sensitive", "by", "reverse"});
    if (v.k != Value::K::Dict) bad_template("dictsort of " + brief(v));
    const bool cs = truthy(arg(a, kw, 0, "case_sensitive", Value::boolean(false)));
    const std::string by = to_text(arg(a, kw, 1, "by", Value::str("key")));
    if (by != "key" && by != "value") bad_template("dictsort can only sort by 'key' or 'value'");
    const bool rev = truthy(arg(a, kw, 2, "reverse", Value::boolean(false)));
    List l;
    for (const auto& kv : *v.d) l.push_back(pair(key_value(kv), kv.second));
    const size_t at = by == "key" ? 0 : 1;
    std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
      return rev ? sort_less((*y.l)[at], (*x.l)[at], cs) : sort_less((*x.l)[at], (*y.l)[at], cs);
    });
    return Value::list(std::move(l));
  }
  if (f == "sort") {
    only_kw("sort", kw, {"reverse", "case_sensitive", "attribute"});
    const bool rev = truthy(arg(a, kw, 0, "reverse", Value::boolean(false)));
    const bool cs = truthy(arg(a, kw, 1, "case_sensitive", Value::boolean(false)));
    const Value at = arg(a, kw, 2, "attribute");
    const std::string name = at.defined() && at.k != Value::K::None ? to_text(at) : std::string();
    List l = items_of(v, "sort");
    std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
      const Value kx = name.empty() ? x : attribute(x, name), ky = name.empty() ? y : attribute(y, name);
      return rev ? sort_less(ky, kx, cs) : sort_less(kx, ky, cs);
    });
    return Value::list(std::move(l));
  }
  if (f == "min" || f == "max") {
    only_kw(f.c_str(), kw, {"case_sensitive", "attribute"});
    const bool cs = truthy(arg(a, kw, 0, "case_sensitive", Value::boolean(false)));
    const Value at = arg(a, kw, 1, "attribute");
    const std::string name = at.defined() && at.k != Value::K::None ? to_text(at) : std::string();
    const List l = items_of(v, f.c_str());
    if (l.empty()) return Value();
    size_t best = 0;
    for (size_t i = 1; i < l.size(); i++) {
      const Value x = name.empty() ? l[i] : attribute(l[i], name),
                  b = name.empty() ? l[best] : attribute(l[best], name);
      if (f == "min" ? sort_less(x, b, cs) : sort_less(b, x, cs)) best = i;
    }
    return l[best];
  }
  if (f == "sum") {
    only_kw("sum", kw, {"attribute", "start"});
    const Value at = arg(a, kw, 0, "attribute");
    Value total = arg(a, kw, 1, "start", Value::integer(0));
    for (const Value& x : items_of(v, "sum"))
      total = arith("+", total, at.defined() && at.k != Value::K::None ? attribute(x, to_text(at)) : x);
    return total;
  }
  if (f == "center") {
    const std::string s = to_text(v);
    const int64_t w = as_int(arg(a, kw, 0, "width", Value::integer(80)), "center");
    if (w > 10000) too_much("center's width is more than 10000");
    const int64_t n = code_points(s);
    if (w <= n) return Value::str(s);
    const int64_t pad = w - n, left = pad / 2 + (pad & w & 1);  // Python's str.center
    return Value::str(std::string((size_t)left, ' ') + s + std::string((size_t)(pad - left), ' '));
  }
  if (f ==
      "wordcount") {  // runs of word characters (\w): letters, digits, _; symbols, punctuation and emoji end a word
    const std::string t = to_text(v);
    int64_t n = 0;
    bool in = false;
    for (size_t i = 0; i < t.size();) {
      const size_t len = utf8_len(t, i);
      uint32_t cp = (unsigned char)t[i];
      if (len > 1) {
        cp &= 0xff >> (len + 1);
        for (size_t k = 1; k < len; k++) cp = cp << 6 | ((unsigned char)t[i + k] & 0x3f);
      }
      const bool w = cp < 0x80 ? (std::isalnum((int)cp) || cp == '_')
                               : !((cp >= 0x80 && cp <= 0xbf && cp != 0xaa && cp != 0xb5 && cp != 0xba) || cp == 0xd7 ||
                                   cp == 0xf7 || (cp >= 0x2000 && cp <= 0x2bff) || (cp >= 0x3000 && cp <= 0x303f) ||
                                   (cp >= 0x1f000 && cp <= 0x1faff) || (cp >= 0xfe00 && cp <= 0xfe0f));
      n += w && !in;
      in = w;
      i += len;
    }
    charge(t.size());
    return Value::integer(n);
  }
  if (f == "batch") {
    const int64_t n = as_int(arg(a, kw, 0, "linecount"), "batch");
    if (n <= 0) bad_template("batch needs a positive count");
    const Value fill = arg(a, kw, 1, "fill_with");
    List out, cur;
    for (const Value& x : items_of(v, "batch")) {
      cur.push_back(x);
      if ((int64_t)cur.size() == n) out.push_back(Value::list(std::move(cur))), cur.clear();
    }
    if (!cur.empty()) {
      if (fill.defined())
        while ((int64_t)cur.size() < n) cur.push_back(fill);
      out.push_back(Value::list(std::move(cur)));
    }
    return lazy(Value::list(std::move(out)));
  }
  if (f == "attr") {  // an attribute, never an item: a dict's keys are not attributes, a namespace's and loop's are
    if (v.k != Value::K::Dict || !(v.is_ns || v.is_loop)) return Value();
    const Value* p = v.get(as_str(arg(a, kw, 0, "name"), "attr"));
    return p ? *p : Value();
  }
  if (f == "round") {  // Python's round(), or math.ceil / math.floor at that precision
    only_kw("round", kw, {"precision", "method"});
    const int64_t prec = as_int(arg(a, kw, 0, "precision", Value::integer(0)), "round");
    const std::string how = as_str(arg(a, kw, 1, "method", Value::str("common")), "round");
    if (how != "common" && how != "ceil" && how != "floor")
      bad_template("round: method must be 'common', 'ceil' or 'floor'");
    if (!v.number()) bad_template("round of " + brief(v));
    if (prec < 0 || prec > 15) unsupported("round with a precision outside 0..15");
    if (how == "common" && v.k != Value::K::Float)
      return Value::integer(as_int(v, "round"));  // an int rounds to itself
    if (how == "common") {                        // correctly rounded to prec decimals, ties to even, as CPython's
      char buf[400];
      std::snprintf(buf, sizeof buf, "%.*f", (int)prec, v.f);
      return Value::real(std::strtod(buf, nullptr));
    }
    const double scale = std::pow(10.0, (double)prec);
    const double x = v.num() * scale;
    return Value::real((how == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (f == "truncate") {  // Jinja2's: at a word boundary unless killwords, with a leeway of 5
    only_kw("truncate", kw, {"length", "killwords", "end", "leeway"});
    const std::string s = to_text(v);
    const int64_t len = as_int(arg(a, kw, 0, "length", Value::integer(255)), "truncate");
    const bool kill = truthy(arg(a, kw, 1, "killwords", Value::boolean(false)));
    const std::string end = as_str(arg(a, kw, 2, "end", Value::str("...")), "truncate");
    const Value lw = arg(a, kw, 3, "leeway", Value::integer(5));
    const int64_t leeway = lw.k == Value::K::None ? 5 : as_int(lw, "truncate");
    const int64_t n_end = code_points(end);
    if (len < n_end) bad_template("truncate: the length must be at least the end's");
    if (leeway < 0) bad_template("truncate: a negative leeway");
    const std::vector<size_t> at = char_starts(s);
    const int64_t n = at.empty() ? (int64_t)s.size() : (int64_t)at.size() - 1;
    if (n <= len + leeway) return Value::str(s);
    const int64_t keep = len - n_end;
    std::string head = s.substr(0, at.empty() ? (size_t)keep : at[(size_t)keep]);
    if (!kill) {
      const size_t sp = head.rfind(' ');
      if (sp != std::string::npos) head.resize(sp);
    }
    return Value::str(head + end);
  }
  if (f == "format") {
    if (!kw.empty()) unsupported("format with keyword arguments");
    return Value::str(percent_format(to_text(v), a));
  }
  Value out;
  if (text_filter(f, v, a, kw, &out)) return out;
  unsupported("the filter '" + f + "'");
}

bool Renderer::test_value(const std::string& t, const Value& v, const std::vector<Value>& a) {
  if (t == "defined" || t == "undefined") return v.defined() == (t == "defined");
  if (t == "none") return v.k == Value::K::None;
  if (t == "string") return v.k == Value::K::Str;
  if (t == "number") return v.k == Value::K::Int || v.k == Value::K::Float;
  if (t == "integer") return v.k == Value::K::Int;
  if (t == "float") return v.k == Value::K::Float;
  if (t == "boolean") return v.k == Value::K::Bool;
  if (t == "true") return v.k == Value::K::Bool && v.b;
  if (t == "false") return v.k == Value::K::Bool && !v.b;
  if (t == "mapping") return v.k == Value::K::Dict;
  if (t == "iterable") return v.k == Value::K::List || v.k == Value::K::Dict || v.k == Value::K::Str;
  if (t == "sequence") return (v.k == Value::K::List && !v.lazy) || v.k == Value::K::Str;
  if (t == "callable") return v.k == Value::K::Func;
  if (t == "odd" || t == "even") return (as_int(v, t.c_str()) % 2 != 0) == (t == "odd");
  if ((t == "eq" || t == "equalto" || t == "==" || t == "sameas") && a.size() == 1) return equal(v, a[0]);
  if ((t == "ne" || t == "!=") && a.size() == 1) return !equal(v, a[0]);
  if (t == "in" && a.size() == 1) return contains(a[0], v);
  if (a.size() == 1) {  // the comparisons, under their names and operators
    if (t == "gt" || t == ">" || t == "greaterthan") return less(a[0], v);
    if (t == "lt" || t == "<" || t == "lessthan") return less(v, a[0]);
    if (t == "ge" || t == ">=") return !less(v, a[0]);
    if (t == "le" || t == "<=") return !less(a[0], v);
    if (t == "divisibleby") {
      const int64_t d = as_int(a[0], "divisibleby");
      if (d == 0) bad_template("divisibleby 0");
      return d == -1 || as_int(v, "divisibleby") % d == 0;
    }
  }
  if (t == "lower" || t == "upper") {  // str(v).islower() / isupper()
    Value r;
    str_method(to_text(v), "is" + t, {}, &r);
    return r.b;
  }
  bool named = false;
  if (name_test(t, v, &named)) return named;
  unsupported("the test '" + t + "'");
}

Value Renderer::select(const Value& v, const std::vector<Value>& a, bool attr, bool keep) {
  if (!truthy(v)) return Value::list();  // Jinja2 tests the sequence first: none, undefined and empty ones give nothing
  const List items = items_of(v, "select");
  size_t i = 0;
  std::string name;
  if (attr) {
    if (a.empty()) bad_template("selectattr needs an attribute name");
    name = as_str(a[0], "selectattr");
    i = 1;
  }
  const std::string t = a.size() > i ? as_str(a[i], "select") : std::string();
  const std::vector<Value> rest(a.begin() + (long)std::min(a.size(), i + 1), a.end());
  List out;
  for (const Value& item : items) {
    tick();
    const Value x = attr ? attribute(item, name) : item;
    if ((t.empty() ? truthy(x) : test_value(t, x, rest)) == keep) out.push_back(item);
  }
  return Value::list(std::move(out));
}

}  // namespace qkv::jinja
