#include "dates.h"

#include "../common.h"
#include "rng.h"

namespace qkv {

namespace {

const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                         "July",    "August",   "September", "October", "November", "December"};
const char* kOnes[] = {"zero",     "one",     "two",     "three",     "four",     "five",    "six",
                       "seven",    "eight",   "nine",    "ten",       "eleven",   "twelve",  "thirteen",
                       "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
const char* kTens[] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"};
const char* kOrdOnes[] = {"",          "first",     "second",      "third",      "fourth",
                          "fifth",     "sixth",     "seventh",     "eighth",     "ninth",
                          "tenth",     "eleventh",  "twelfth",     "thirteenth", "fourteenth",
                          "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth"};

std::string cardinal(int n) {  // 0..99
  if (n < 20) return kOnes[n];
  return std::string(kTens[n / 10]) + (n % 10 ? std::string("-") + kOnes[n % 10] : "");
}

std::string ordinal_word(int n) {  // 1..31
  if (n < 20) return kOrdOnes[n];
  if (n == 20) return "twentieth";
  if (n == 30) return "thirtieth";
  return std::string(kTens[n / 10]) + "-" + kOrdOnes[n % 10];
}

std::string ordinal_digits(int n) {
  const char* suf = (n % 100 >= 11 && n % 100 <= 13) ? "th"
                    : n % 10 == 1                    ? "st"
                    : n % 10 == 2                    ? "nd"
                    : n % 10 == 3                    ? "rd"
                                                     : "th";
  return std::to_string(n) + suf;
}

// 1994 -> "nineteen ninety-four", 1905 -> "nineteen oh five", 1900 -> "nineteen hundred",
// 2000 -> "two thousand", 2007 -> "two thousand seven", 2019 -> "twenty nineteen".
std::string year_words(int y) {
  const int hi = y / 100, lo = y % 100;
  if (y >= 2000 && y < 2010) return lo == 0 ? "two thousand" : "two thousand " + std::string(kOnes[lo]);
  if (lo == 0) return cardinal(hi) + " hundred";
  if (lo < 10) return cardinal(hi) + " oh " + kOnes[lo];
  return cardinal(hi) + " " + cardinal(lo);
}

int days_in(int y, int m) {
  static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : d[m - 1];
}

std::string two(int n) { return (n < 10 ? "0" : "") + std::to_string(n); }

constexpr int kForms = 8;

}  // namespace

int date_forms() { return kForms; }

bool date_held_out(int y, int m, int d) {
  uint64_t h = (uint64_t)(y * 10000 + m * 100 + d) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  return h % 10 == 0;
}

std::string date_text(int y, int m, int d, int form) {
  const std::string month = kMonths[m - 1];
  switch (form) {
    case 0: return "the " + ordinal_word(d) + " of " + month + ", " + year_words(y);
    case 1: return std::to_string(d) + " " + month + " " + std::to_string(y);
    case 2: return month + " " + ordinal_digits(d) + ", " + std::to_string(y);
    case 3: return month + " " + ordinal_word(d) + ", " + year_words(y);
    case 4: return month.substr(0, 3) + " " + std::to_string(d) + ", " + std::to_string(y);
    case 5: return two(d) + "/" + two(m) + "/" + std::to_string(y);
    case 6: return ordinal_digits(d) + " of " + month + " " + std::to_string(y);
    case 7: return std::to_string(d) + " " + month + " " + year_words(y);
  }
  fail(ErrorCode::BadArgument, "date form " + std::to_string(form) + " is outside 0.." + std::to_string(kForms - 1));
}

std::string date_alphabet() {
  std::string a = " ,-/0123456789";
  for (char c = 'a'; c <= 'z'; c++) a += c;
  for (const char* m : kMonths) a += m[0];
  return a;
}

std::vector<Seq2SeqExample> generate_dates(uint64_t seed, int n, DateSplit split) {
  if (n < 0 || n > (1 << 24))
    fail(ErrorCode::BadArgument, "date examples: " + std::to_string(n) + " is outside 0..16777216");
  Rng rng(seed * 0x2545F4914F6CDD1Dull + (split == DateSplit::HeldOut ? 7 : 3));
  std::vector<Seq2SeqExample> out;
  out.reserve(n);
  while ((int)out.size() < n) {
    const int y = 1900 + (int)rng.below(140), m = 1 + (int)rng.below(12), d = 1 + (int)rng.below(days_in(y, m));
    if (date_held_out(y, m, d) != (split == DateSplit::HeldOut)) continue;
    const int form = (int)rng.below(kForms);
    out.push_back({date_text(y, m, d, form), std::to_string(y) + "-" + two(m) + "-" + two(d)});
  }
  return out;
}

}  // namespace qkv
