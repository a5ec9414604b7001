// Jinja's lexer: the template cut into text and tags (whitespace controls applied), a tag into tokens.
#include "jinja_syntax.h"

#include <cstdlib>

namespace qkv::jinja {

// Where the tag whose body starts at `from` closes: the first `close` outside string literals
// (as Jinja's lexer reads a tag: '}}' inside a quoted string does not end it), npos if none.
// Comments have no strings.
static size_t find_close(const std::string& src, size_t from, const char* close, bool strings) {
  int depth = 0;  // open brackets: '}}' inside {{ {'a': {'b': 1}} }} closes a dict, as in Jinja's lexer
  for (size_t i = from; i < src.size(); i++) {
    const char c = src[i];
    if (strings && (c == '(' || c == '[' || c == '{')) {
      depth++;
      continue;
    }
    if (strings && depth > 0 && (c == ')' || c == ']' || c == '}')) {
      depth--;
      continue;
    }
    if (c == close[0] && i + 1 < src.size() && src[i + 1] == close[1]) return i;
    if (strings && (c == '\'' || c == '"')) {
      size_t j = i + 1;
      while (j < src.size() && src[j] != c) j += src[j] == '\\' ? 2 : 1;
      if (j >= src.size()) return std::string::npos;
      i = j;
    }
  }
  return std::string::npos;
}

// Cuts the template into text and tags, applying '-' controls, trim_blocks (the newline after
// a statement or comment tag goes) and lstrip_blocks (spaces and tabs from the start of a line
// up to a statement or comment tag go).
std::vector<Piece> cut(const std::string& src) {
  std::vector<Piece> out;
  size_t pos = 0;
  bool strip_next = false, trim_next = false;
  auto add_text = [&](std::string text) {
    if (strip_next) {
      const size_t b = text.find_first_not_of(" \t\r\n");
      text = b == std::string::npos ? std::string() : text.substr(b);
    } else if (trim_next) {
      if (text.compare(0, 1, "\n") == 0) text.erase(0, 1);
      else if (text.compare(0, 2, "\r\n") == 0) text.erase(0, 2);
    }
    strip_next = trim_next = false;
    out.push_back({Piece::T::Text, std::move(text), pos});
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' &&
           src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string::npos || open + 1 >= src.size()) {
      add_text(src.substr(pos));
      break;
    }
    const char kind = src[open + 1];
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t inner = open + 2;
    const bool lstrip_ctl = inner < src.size() && src[inner] == '-';
    const bool keep_ws = inner < src.size() && src[inner] == '+';
    if (lstrip_ctl || keep_ws) inner++;
    const size_t end = find_close(src, inner, close, kind != '#');
    if (end == std::string::npos) bad_template("a tag opened at offset " + std::to_string(open) + " is never closed");
    std::string text = src.substr(pos, open - pos);
    if (lstrip_ctl) {
      const size_t e = text.find_last_not_of(" \t\r\n");
      text = e == std::string::npos ? std::string() : text.substr(0, e + 1);
    } else if (kind != '{' && !keep_ws) {
      // lstrip_blocks: only when nothing but spaces and tabs precede the tag on its line.
      // Only this text piece can hold the line's start: a tag before it on the same line means
      // something precedes this one. (Searching back past pos made long one-line templates quadratic.)
      size_t line = open;
      while (line > pos && src[line - 1] != '\n') line--;
      const bool at_line_start = line > pos || pos == 0 || src[pos - 1] == '\n';
      if (at_line_start && src.find_first_not_of(" \t", line) >= open) text.erase(line - pos);
    }
    add_text(std::move(text));
    size_t body_end = end;
    const bool rstrip_ctl = body_end > inner && src[body_end - 1] == '-';
    if (rstrip_ctl) body_end--;
    if (kind != '#')
      out.push_back({kind == '{' ? Piece::T::Expr : Piece::T::Stmt, src.substr(inner, body_end - inner), open});
    pos = end + 2;
    strip_next = rstrip_ctl;
    trim_next = !rstrip_ctl && kind != '{';
    if (pos >= src.size()) {
      break;
    }
  }
  return out;
}

// ---- expressions ---------------------------------------------------------------------------

// A hex digit's value, -1 for any other character.
static int hex_digit(char c) {
  const unsigned char u = (unsigned char)c;
  return std::isdigit(u) ? u - '0' : std::isxdigit(u) ? std::tolower(u) - 'a' + 10 : -1;
}

// The escape at s[j] (a backslash) inside a string literal, as Jinja reads it (Python's
// unicode-escape): \newline joins lines, \\ \' \" \a \b \f \n \r \t \v, octal \ooo, \xhh,
// \uhhhh and \Uhhhhhhhh; any other backslash stays as it is. Appends to v; returns the index of
// the escape's last character.
static size_t unescape(const std::string& s, size_t j, std::string* v) {
  const char e = s[j + 1];
  switch (e) {
    case '\n': return j + 1;
    case '\r': return j + 1 + (j + 2 < s.size() && s[j + 2] == '\n');
    case '\\':
    case '\'':
    case '"': *v += e; return j + 1;
    case 'a': *v += '\a'; return j + 1;
    case 'b': *v += '\b'; return j + 1;
    case 'f': *v += '\f'; return j + 1;
    case 'n': *v += '\n'; return j + 1;
    case 'r': *v += '\r'; return j + 1;
    case 't': *v += '\t'; return j + 1;
    case 'v': *v += '\v'; return j + 1;
    default: break;
  }
  if (e >= '0' && e <= '7') {
    uint32_t cp = 0;
    size_t k = j + 1;
    for (int n = 0; n < 3 && k < s.size() && s[k] >= '0' && s[k] <= '7'; n++, k++) cp = cp * 8 + (uint32_t)(s[k] - '0');
    append_utf8(*v, cp);
    return k - 1;
  }
  const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
  if (digits == 0) {
    *v += '\\';  // not an escape: the backslash is kept and the character read as usual
    return j;
  }
  uint32_t cp = 0;
  for (int n = 0; n < digits; n++) {
    const size_t k = j + 2 + (size_t)n;
    const int h = k < s.size() ? hex_digit(s[k]) : -1;
    if (h < 0) bad_template(std::string("a truncated \\") + e + " escape in a string literal");
    cp = cp * 16 + (uint32_t)h;
  }
  if (cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) bad_template("an escape outside Unicode's scalar values");
  append_utf8(*v, cp);
  return j + 1 + (size_t)digits;
}

std::vector<Tok> lex(const std::string& s) {
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      i++;
      continue;
    }
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_')) j++;
      out.push_back({Tok::T::Name, s.substr(i, j - i)});
      i = j;
    } else if (std::isdigit((unsigned char)c)) {
      size_t j = i;
      while (j < s.size() && std::isdigit((unsigned char)s[j])) j++;
      bool real = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit((unsigned char)s[j + 1])) {
        j++;
        while (j < s.size() && std::isdigit((unsigned char)s[j])) j++;
        real = true;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {  // an exponent: 1e20, 2.5e-7
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) k++;
        if (k < s.size() && std::isdigit((unsigned char)s[k])) {
          while (k < s.size() && std::isdigit((unsigned char)s[k])) k++;
          j = k;
          real = true;
        }
      }
      if (real) {
        Tok t{Tok::T::Float, s.substr(i, j - i)};
        t.f = std::strtod(t.s.c_str(), nullptr);
        out.push_back(t);
      } else {
        Tok t{Tok::T::Int, s.substr(i, j - i)};
        t.i = std::strtoll(t.s.c_str(), nullptr, 10);
        if (j - i > 18) unsupported("integer literal " + t.s + " is too long");
        out.push_back(t);
      }
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; j++) {
        if (s[j] == '\\' && j + 1 < s.size()) j = unescape(s, j, &v);
        else if (s[j] == '\r' && j + 1 < s.size() && s[j + 1] == '\n') continue;  // newlines normalised to \n
        else v += s[j];
      }
      if (j >= s.size()) bad_template("unterminated string literal");
      out.push_back({Tok::T::Str, std::move(v)});
      i = j + 1;
    } else {
      static const char* const ops[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[", "]", "{", "}", ".",
                                        ",",  ":",  "|",  "~",  "+",  "-",  "*", "/", "%", "<", ">", "="};
      bool found = false;
      for (const char* op : ops) {
        const size_t n = std::char_traits<char>::length(op);
        if (s.compare(i, n, op) == 0) {
          out.push_back({Tok::T::Op, op});
          i += n;
          found = true;
          break;
        }
      }
      if (!found) bad_template(std::string("unexpected character '") + c + "'");
    }
  }
  out.push_back({Tok::T::End, ""});
  return out;
}

}  // namespace qkv::jinja
