// JSON Schema -> GBNF: a small JSON reader, then one rule per schema node (refs memoized, so
// recursive schemas give recursive rules), with bounded whitespace and number lengths.
#include "json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "../common.h"
#include "../json.h"
#include "../tokenizer/pretokenize.h"

namespace qkv {

namespace {

// A GBNF string literal matching exactly `bytes`.
std::string gbnf_literal(const std::string& bytes) {
  std::string o = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += (char)c;
    } else if (c < 0x20 || c == 0x7f) {
      static const char* hx = "0123456789ABCDEF";
      o += "\\x";
      o += hx[c >> 4];
      o += hx[c & 15];
    } else {
      o += (char)c;
    }
  }
  return o + "\"";
}

const char* kPrimitives =
    "ws ::= (\" \" | \"\\n\" [ \\t]{0,20})?\n"
    "json-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "json-string ::= \"\\\"\" json-char* \"\\\"\"\n"
    "json-int ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "json-number ::= json-int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?\n"
    "json-boolean ::= \"true\" | \"false\"\n"
    "json-null ::= \"null\"\n"
    "json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null\n"
    "json-object ::= \"{\" ws (json-string ws \":\" ws json-value ws (\",\" ws json-string ws \":\" ws json-value ws)*)? \"}\"\n"
    "json-array ::= \"[\" ws (json-value ws (\",\" ws json-value ws)*)? \"]\"\n";

// Integers (JSON's spelling: no leading zeros, at most 16 digits, as json-int) in a range, exactly.
constexpr int64_t kIntMax = 9999999999999999;  // the largest json-int

// Digit strings of one length n from a to b (a <= b, both n digits): equal leading digits are
// kept, then a's tail up to 9s, the whole digits between, and b's tail from 0s.
std::string digits_between(const std::string& a, const std::string& b) {
  const size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return gbnf_literal(a);
  if (a[0] == b[0]) return gbnf_literal(a.substr(0, 1)) + " " + digits_between(a.substr(1), b.substr(1));
  const std::string rest = n > 1 ? " [0-9]{" + std::to_string(n - 1) + "}" : "";
  const bool a_low = a.find_first_not_of('0', 1) == std::string::npos,
             b_high = b.find_first_not_of('9', 1) == std::string::npos;
  const char lo = a_low ? a[0] : (char)(a[0] + 1), hi = b_high ? b[0] : (char)(b[0] - 1);
  std::vector<std::string> alts;
  if (!a_low)
    alts.push_back("\"" + a.substr(0, 1) + "\" (" + digits_between(a.substr(1), std::string(n - 1, '9')) + ")");
  if (lo <= hi)
    alts.push_back(
        (lo == hi ? "\"" + std::string(1, lo) + "\"" : "[" + std::string(1, lo) + "-" + std::string(1, hi) + "]") +
        rest);
  if (!b_high)
    alts.push_back("\"" + b.substr(0, 1) + "\" (" + digits_between(std::string(n - 1, '0'), b.substr(1)) + ")");
  std::string o;
  for (size_t i = 0; i < alts.size(); i++) o += (i ? " | " : "") + alts[i];
  return alts.size() == 1 ? o : "(" + o + ")";
}

// Non-negative integers from lo to hi (0 <= lo <= hi <= kIntMax), one alternative per length.
std::string naturals_between(int64_t lo, int64_t hi) {
  const std::string a = std::to_string(lo), b = std::to_string(hi);
  std::string o;
  for (size_t n = a.size(); n <= b.size(); n++) {
    const std::string from = n == a.size() ? a : "1" + std::string(n - 1, '0');
    const std::string to = n == b.size() ? b : std::string(n, '9');
    o += (o.empty() ? "" : " | ") + std::string("(") + digits_between(from, to) + ")";
  }
  return "(" + o + ")";
}

// Integers from lo to hi (kIntMax bounds meaning none): negatives as "-" and their magnitudes.
std::string integers_between(int64_t lo, int64_t hi) {
  std::vector<std::string> alts;
  if (lo < 0) alts.push_back("\"-\" " + naturals_between(hi < 0 ? -hi : 1, -lo));
  if (hi >= 0) alts.push_back(naturals_between(lo > 0 ? lo : 0, hi));
  std::string o;
  for (size_t i = 0; i < alts.size(); i++) o += (i ? " | " : "") + alts[i];
  return o;
}

class Converter {
 public:
  explicit Converter(const Json& root) : root_(&root) {}

  std::string run() {
    const std::string r = visit(*root_, "root-value", 0);
    std::string out = "root ::= " + r + "\n";
    out += kPrimitives;
    for (const auto& kv : rules_) out += kv.first + " ::= " + kv.second + "\n";
    return out;
  }

  // Several schemas in one grammar: rule `schema-K` for schemas[K], the helper rules shared.
  std::string run_many(const std::vector<Json>& schemas) {
    std::string out;
    for (size_t k = 0; k < schemas.size(); k++) {
      root_ = &schemas[k];
      ref_rules_.clear();  // each schema's $refs resolve within itself
      out += "schema-" + std::to_string(k) + " ::= " + visit(schemas[k], "s" + std::to_string(k), 0) + "\n";
    }
    out += kPrimitives;
    for (const auto& kv : rules_) out += kv.first + " ::= " + kv.second + "\n";
    return out;
  }

 private:
  const Json* root_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> ref_rules_;  // $ref -> its rule name
  int counter_ = 0;

  [[noreturn]] static void bad(const std::string& m) { fail(ErrorCode::BadArgument, "JSON schema: " + m); }
  [[noreturn]] static void unsupported(const std::string& m) { fail(ErrorCode::Unsupported, "JSON schema: " + m); }

  std::string fresh(const std::string& hint) {
    std::string h;
    for (char c : hint) h += (std::isalnum((unsigned char)c) || c == '-') ? c : '-';
    if (h.size() > 32) h.resize(32);
    return h + "-" + std::to_string(++counter_);
  }
  std::string add(const std::string& hint, const std::string& body) {
    const std::string name = fresh(hint);
    rules_[name] = body;
    return name;
  }

  const Json& resolve(const std::string& ref) {
    if (ref.empty() || ref[0] != '#')
      unsupported("only $refs within the schema ('#/...') are supported, got '" + ref + "'");
    const Json* cur = root_;
    size_t i = 1;
    while (i < ref.size()) {
      if (ref[i] != '/') bad("malformed $ref '" + ref + "'");
      size_t j = ref.find('/', i + 1);
      if (j == std::string::npos) j = ref.size();
      std::string key;
      for (size_t k = i + 1; k < j; k++) {  // JSON pointer escapes ~1 = /, ~0 = ~
        if (ref[k] == '~' && k + 1 < j && ref[k + 1] == '1') key += '/', k++;
        else if (ref[k] == '~' && k + 1 < j && ref[k + 1] == '0') key += '~', k++;
        else key += ref[k];
      }
      const Json* next = nullptr;
      if (cur->k == Json::Obj) next = cur->get(key);
      else if (cur->k == Json::Arr && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(key) < cur->arr.size())
        next = &cur->arr[std::stoul(key)];
      if (!next) bad("$ref '" + ref + "' does not resolve within the schema");
      cur = next;
      i = j;
    }
    return *cur;
  }

  static int64_t count_of(const Json* v, const char* what) {
    if (!v) return -1;
    if (v->k != Json::Num) bad(std::string(what) + " must be a number");
    const double d = std::strtod(v->s.c_str(), nullptr);
    if (!(d >= 0) || d != (double)(int64_t)d) bad(std::string(what) + " must be a non-negative integer");
    if (d > 10000) unsupported(std::string(what) + " above 10000");
    return (int64_t)d;
  }

  static std::string repeat(const std::string& item, int64_t lo, int64_t hi) {
    if (hi < 0) return "(" + item + "){" + std::to_string(lo) + ",}";
    return "(" + item + "){" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  }

  // Returns a GBNF expression (a rule name or a parenthesised group) for `s`.
  std::string visit(const Json& s, const std::string& hint, int depth) {
    if (depth > 64) unsupported("schema nested deeper than 64 levels");
    if (s.k == Json::Bool) return s.b ? "json-value" : bad_false();
    if (s.k != Json::Obj) bad("a schema must be an object or a boolean");
    if (const Json* ref = s.get("$ref")) {
      if (ref->k != Json::Str) bad("$ref must be a string");
      auto it = ref_rules_.find(ref->s);
      if (it != ref_rules_.end()) return it->second;
      const std::string name = fresh("ref");
      ref_rules_[ref->s] = name;
      rules_[name] = "\"\"";  // placeholder while the target is converted (recursion)
      rules_[name] = visit(resolve(ref->s), name, depth + 1);
      return name;
    }
    if (const Json* c = s.get("const")) return gbnf_literal(json_text(*c));
    if (const Json* e = s.get("enum")) {
      if (e->k != Json::Arr || e->arr.empty()) bad("enum must be a non-empty array");
      std::string body;
      for (size_t i = 0; i < e->arr.size(); i++) body += (i ? " | " : "") + gbnf_literal(json_text(e->arr[i]));
      return add(hint + "-enum", body);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (const Json* alts = s.get(key)) {
        if (alts->k != Json::Arr || alts->arr.empty()) bad(std::string(key) + " must be a non-empty array");
        std::string body;
        for (size_t i = 0; i < alts->arr.size(); i++) body += (i ? " | " : "") + visit(alts->arr[i], hint, depth + 1);
        return add(hint + "-alt", body);
      }
    }
    if (const Json* all = s.get("allOf")) {
      if (all->k != Json::Arr || all->arr.size() != 1) unsupported("allOf with more than one schema");
      return visit(all->arr[0], hint, depth + 1);
    }
    const Json* type = s.get("type");
    if (!type) {
      if (s.get("properties")) return object(s, hint, depth);
      if (s.get("items") || s.get("prefixItems")) return array(s, hint, depth);
      return "json-value";
    }
    if (type->k == Json::Arr) {
      if (type->arr.empty()) bad("type must not be an empty list");
      std::string body;
      for (size_t i = 0; i < type->arr.size(); i++) {
        if (type->arr[i].k != Json::Str) bad("type must be a string or a list of strings");
        body += (i ? " | " : "") + typed(s, type->arr[i].s, hint, depth);
      }
      return add(hint + "-types", body);
    }
    if (type->k != Json::Str) bad("type must be a string or a list of strings");
    return typed(s, type->s, hint, depth);
  }

  [[noreturn]] static std::string bad_false() { unsupported("the schema 'false' (no value is valid)"); }

  std::string typed(const Json& s, const std::string& t, const std::string& hint, int depth) {
    if (t == "string") return string(s, hint);
    if (t == "number") return "json-number";
    if (t == "integer") return integer(s, hint);
    if (t == "boolean") return "json-boolean";
    if (t == "null") return "json-null";
    if (t == "object") return object(s, hint, depth);
    if (t == "array") return array(s, hint, depth);
    bad("unknown type '" + t + "'");
  }

  // minimum / maximum / exclusiveMinimum / exclusiveMaximum (numbers; draft 4's boolean
  // exclusives too) as the integer range they leave, written out digit by digit.
  std::string integer(const Json& s, const std::string& hint) {
    auto bound = [&](const char* key) -> const Json* {
      const Json* v = s.get(key);
      if (v && v->k != Json::Num && !(v->k == Json::Bool && key[0] == 'e')) bad(std::string(key) + " must be a number");
      return v;
    };
    const Json *mn = bound("minimum"), *mx = bound("maximum"), *emn = bound("exclusiveMinimum"),
               *emx = bound("exclusiveMaximum");
    if (!mn && !mx && !(emn && emn->k == Json::Num) && !(emx && emx->k == Json::Num)) return "json-int";
    double lo = -(double)kIntMax, hi = (double)kIntMax;
    auto num = [](const Json* v) { return std::strtod(v->s.c_str(), nullptr); };
    if (mn)
      lo = std::max(
          lo, std::ceil(num(mn)) + (emn && emn->k == Json::Bool && emn->b && std::ceil(num(mn)) == num(mn) ? 1 : 0));
    if (mx)
      hi = std::min(
          hi, std::floor(num(mx)) - (emx && emx->k == Json::Bool && emx->b && std::floor(num(mx)) == num(mx) ? 1 : 0));
    if (emn && emn->k == Json::Num) lo = std::max(lo, std::floor(num(emn)) + 1);
    if (emx && emx->k == Json::Num) hi = std::min(hi, std::ceil(num(emx)) - 1);
    if (!(lo <= hi)) bad("no integer satisfies minimum/maximum (the range is empty or beyond 16 digits)");
    // Doubles near kIntMax round to 1e16: clamp after converting.
    const int64_t a = std::max<int64_t>(-kIntMax, (int64_t)lo), b = std::min<int64_t>(kIntMax, (int64_t)hi);
    return add(hint + "-int", integers_between(a, b));
  }

  std::string string(const Json& s, const std::string& hint) {
    if (const Json* p = s.get("pattern")) {
      if (p->k != Json::Str) bad("pattern must be a string");
      return add(hint + "-pattern", "\"\\\"\" " + regex_to_gbnf(p->s) + " \"\\\"\"");
    }
    if (const Json* f = s.get("format")) {
      if (f->k != Json::Str) bad("format must be a string");
      const std::string d2 = "[0-9]{2}";
      const std::string date =
          "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])";
      const std::string time =
          "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])";
      const std::string hx = "[0-9a-fA-F]";
      std::string body;
      if (f->s == "date") body = date;
      else if (f->s == "time") body = time;
      else if (f->s == "date-time") body = date + " \"T\" " + time;
      else if (f->s == "uuid")
        body = hx + "{8} \"-\" " + hx + "{4} \"-\" " + hx + "{4} \"-\" " + hx + "{4} \"-\" " + hx + "{12}";
      else if (f->s == "email")
        body = "[a-zA-Z0-9._%+-]{1,64} \"@\" [a-zA-Z0-9-]{1,63} (\".\" [a-zA-Z0-9-]{1,63}){1,4}";
      if (!body.empty()) return add(hint + "-" + f->s, "\"\\\"\" " + body + " \"\\\"\"");
      (void)d2;  // other formats constrain nothing the grammar checks: any string
    }
    const int64_t lo = count_of(s.get("minLength"), "minLength");
    int64_t hi = count_of(s.get("maxLength"), "maxLength");
    if (lo < 0 && hi < 0) return "json-string";
    if (hi < 0) return add(hint + "-string", "\"\\\"\" json-char{" + std::to_string(lo) + "} json-char* \"\\\"\"");
    if (hi < lo) bad("maxLength is below minLength");
    return add(hint + "-string", "\"\\\"\" json-char{" + std::to_string(std::max<int64_t>(lo, 0)) + "," +
                                     std::to_string(hi) + "} \"\\\"\"");
  }

  std::string object(const Json& s, const std::string& hint, int depth) {
    const Json* props = s.get("properties");
    const Json* req = s.get("required");
    std::set<std::string> required;
    if (req) {
      if (req->k != Json::Arr) bad("required must be an array of property names");
      for (const Json& r : req->arr) {
        if (r.k != Json::Str) bad("required must be an array of property names");
        required.insert(r.s);
      }
    }
    if (props && props->k != Json::Obj) bad("properties must be an object");
    if (!props || props->obj.empty()) {
      if (!required.empty()) bad("required names properties that 'properties' does not define");
      const Json* extra = s.get("additionalProperties");
      if (extra && extra->k == Json::Bool && !extra->b) return "\"{\" ws \"}\"";
      const std::string val = extra && extra->k == Json::Obj ? visit(*extra, hint + "-value", depth + 1) : "json-value";
      const std::string kv = "json-string ws \":\" ws " + val + " ws";
      return add(hint + "-map", "\"{\" ws (" + kv + " (\",\" ws " + kv + ")*)? \"}\"");
    }
    for (const std::string& r : required)
      if (!props->get(r)) bad("required property '" + r + "' is not in 'properties'");
    // Properties in schema order; required ones always, optional ones may be left out.
    // first_i: nothing written yet, from property i on; rest_i: something written already.
    const size_t n = props->obj.size();
    std::vector<std::string> kv(n), first(n + 1), rest(n + 1);
    for (size_t i = 0; i < n; i++) {
      Json key;
      key.k = Json::Str;
      key.s = props->obj[i].first;
      kv[i] = gbnf_literal(json_text(key)) + " ws \":\" ws " +
              visit(props->obj[i].second, hint + "-" + key.s, depth + 1) + " ws";
    }
    first[n] = rest[n] = "\"\"";
    for (size_t i = n; i-- > 0;) {
      const bool req_i = required.count(props->obj[i].first) > 0;
      const std::string r_next = i + 1 < n ? rest[i + 1] : "\"\"";
      const std::string f_next = i + 1 < n ? first[i + 1] : "\"\"";
      rest[i] = add(hint + "-rest", "\",\" ws " + kv[i] + " " + r_next + (req_i ? "" : " | " + r_next));
      first[i] = add(hint + "-first", kv[i] + " " + r_next + (req_i ? "" : " | " + f_next));
    }
    return add(hint, "\"{\" ws " + first[0] + " \"}\"");
  }

  std::string array(const Json& s, const std::string& hint, int depth) {
    int64_t lo = count_of(s.get("minItems"), "minItems");
    int64_t hi = count_of(s.get("maxItems"), "maxItems");
    if (lo < 0) lo = 0;
    if (hi >= 0 && hi < lo) bad("maxItems is below minItems");
    std::vector<std::string> prefix;
    if (const Json* p = s.get("prefixItems")) {
      if (p->k != Json::Arr) bad("prefixItems must be an array of schemas");
      for (const Json& x : p->arr) prefix.push_back(visit(x, hint + "-item", depth + 1));
    }
    const Json* items = s.get("items");
    std::string item;
    if (items && items->k == Json::Bool && !items->b) item.clear();
    else item = items ? visit(*items, hint + "-item", depth + 1) : "json-value";
    if (!prefix.empty()) {  // tuple: the prefix items in order, then (if allowed) more items
      std::string body = "\"[\" ws ";
      for (size_t i = 0; i < prefix.size(); i++) body += (i ? "\",\" ws " : "") + prefix[i] + " ws ";
      if (!item.empty())
        body += hi < 0 ? "(\",\" ws " + item + " ws)* "
                       : "(\",\" ws " + item + " ws){0," +
                             std::to_string(std::max<int64_t>(0, hi - (int64_t)prefix.size())) + "} ";
      return add(hint + "-tuple", body + "\"]\"");
    }
    if (item.empty()) return "\"[\" ws \"]\"";
    const std::string el = item + " ws";
    std::string body;
    if (hi == 0) body = "\"[\" ws \"]\"";
    else if (lo == 0) body = "\"[\" ws (" + el + " " + repeat("\",\" ws " + el, 0, hi - 1) + ")? \"]\"";
    else body = "\"[\" ws " + el + " " + repeat("\",\" ws " + el, lo - 1, hi - 1) + " \"]\"";
    return add(hint + "-array", body);
  }

  // A regular expression (anchored; the common ECMAScript subset) as GBNF over the string's
  // JSON text: literal characters, . [classes] \d \w \s (and negations), groups, |, * + ? {m,n}.
  std::string regex_to_gbnf(const std::string& re) {
    size_t i = 0;
    std::string body = regex_alts(re, i, 0);
    if (i != re.size()) unsupported("pattern '" + re + "': unexpected ')'");
    return "(" + body + ")";
  }

  // Characters a pattern's character class may produce in a JSON string: quotes, backslashes and
  // control characters are left out (they would need escapes).
  static std::string cls(const std::string& inner, bool negated) {
    if (negated) return "[^" + inner + "\"\\\\\\x00-\\x1F]";
    return "[" + inner + "]";
  }

  std::string regex_alts(const std::string& re, size_t& i, int depth) {
    if (depth > 32) unsupported("pattern nested too deeply");
    std::string out = regex_seq(re, i, depth);
    while (i < re.size() && re[i] == '|') {
      i++;
      out += " | " + regex_seq(re, i, depth);
    }
    return out;
  }

  static std::string escape_cls_char(uint32_t c) {
    if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-' || c == '"') return std::string("\\") + (char)c;
    return std::string(1, (char)c);
  }

  std::string regex_seq(const std::string& re, size_t& i, int depth) {
    std::string out;
    auto bad_pat = [&](const std::string& why) -> void { unsupported("pattern '" + re + "': " + why); };
    while (i < re.size() && re[i] != '|' && re[i] != ')') {
      std::string atom;
      const char c = re[i];
      if (c == '^' && i == 0) {
        i++;
        continue;
      }
      if (c == '$' && i + 1 == re.size()) {
        i++;
        continue;
      }
      if (c == '(') {
        i++;
        if (re.compare(i, 2, "?:") == 0) i += 2;
        else if (i < re.size() && re[i] == '?') bad_pat("lookaround and named groups are not supported");
        atom = "(" + regex_alts(re, i, depth + 1) + ")";
        if (i >= re.size() || re[i] != ')') bad_pat("unclosed '('");
        i++;
      } else if (c == '[') {
        i++;
        bool neg = false;
        if (i < re.size() && re[i] == '^') neg = true, i++;
        std::string inner;
        bool first = true;
        while (i < re.size() && (re[i] != ']' || first)) {
          first = false;
          if (re[i] == '\\' && i + 1 < re.size()) {
            const char e = re[i + 1];
            i += 2;
            if (e == 'd') inner += "0-9";
            else if (e == 'w') inner += "a-zA-Z0-9_";
            else if (e == 's') inner += " \\t\\n\\r";
            else if (e == 'n') inner += "\\n";
            else if (e == 't') inner += "\\t";
            else inner += escape_cls_char((unsigned char)e);
          } else if (re[i] == '-' && !inner.empty() && i + 1 < re.size() && re[i + 1] != ']') {
            inner += "-";
            i++;
          } else {
            const unsigned char ch = (unsigned char)re[i];
            if (ch == '"' || ch == '\\' || ch == '[' || ch == ']' || ch == '^') inner += escape_cls_char(ch);
            else inner += (char)ch;
            i++;
          }
        }
        if (i >= re.size()) bad_pat("unclosed '['");
        i++;
        atom = cls(inner, neg);
      } else if (c == '.') {
        i++;
        atom = cls("", true);
      } else if (c == '\\') {
        if (i + 1 >= re.size()) bad_pat("trailing backslash");
        const char e = re[i + 1];
        i += 2;
        if (e == 'd') atom = "[0-9]";
        else if (e == 'D') atom = cls("0-9", true);
        else if (e == 'w') atom = "[a-zA-Z0-9_]";
        else if (e == 'W') atom = cls("a-zA-Z0-9_", true);
        else if (e == 's') atom = "[ ]";
        else if (e == 'S') atom = cls(" ", true);
        else if (std::isalnum((unsigned char)e)) bad_pat(std::string("escape \\") + e + " is not supported");
        else atom = gbnf_literal(std::string(1, e) == "\"" ? "\\\"" : e == '\\' ? "\\\\" : std::string(1, e));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        bad_pat("a quantifier with nothing before it");
      } else {
        // One literal character (all its UTF-8 bytes); quotes are written escaped in JSON.
        size_t n = 1;
        const unsigned char b = (unsigned char)c;
        if (b >= 0xF0) n = 4;
        else if (b >= 0xE0) n = 3;
        else if (b >= 0xC0) n = 2;
        atom = gbnf_literal(c == '"' ? "\\\"" : re.substr(i, n));
        i += n;
      }
      // Quantifier
      if (i < re.size()) {
        const char q = re[i];
        std::string suffix;
        if (q == '*' || q == '+' || q == '?') {
          i++;
          suffix = std::string(1, q);
        } else if (q == '{') {
          const size_t close = re.find('}', i);
          if (close == std::string::npos) bad_pat("unclosed '{'");
          std::string inner = re.substr(i + 1, close - i - 1);
          if (inner.empty() || inner.find_first_not_of("0123456789,") != std::string::npos) bad_pat("bad '{m,n}'");
          suffix = "{" + inner + "}";
          i = close + 1;
        }
        if (i < re.size() && (re[i] == '?' || re[i] == '+') && !suffix.empty()) i++;  // lazy/possessive: same language
        if (!suffix.empty()) atom = "(" + atom + ")" + suffix;
      }
      out += (out.empty() ? "" : " ") + atom;
    }
    return out.empty() ? "\"\"" : out;
  }
};

}  // namespace

std::string json_schema_to_gbnf(const std::string& schema_json) {
  const Json root = parse_json(schema_json, "JSON schema");
  return Converter(root).run();
}

std::string json_schemas_to_gbnf(const std::string& schemas_json) {
  const Json list = parse_json(schemas_json, "JSON schema");
  if (list.k != Json::Arr || list.arr.empty() || list.arr.size() > 256)
    fail(ErrorCode::BadArgument, "JSON schema: a list of 1 to 256 schemas expected");
  return Converter(list).run_many(list.arr);
}

std::string json_object_gbnf() { return json_schema_to_gbnf("{\"type\":\"object\"}"); }

}  // namespace qkv
