// The synthetic translation task of the embedded encoder-decoder model: a date written out in
// one of several English forms -> its ISO 8601 form, e.g.
//   "the twenty-third of March, nineteen ninety-four" / "23 March 1994" / "March 23rd, 1994"
//   -> "1994-03-23".
// Deterministic for a seed on every platform. Dates 1900-01-01 .. 2039-12-31; every tenth date
// (by a fixed hash of the date) is held out: validation and test examples use only those,
// training examples never do.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace qkv {

struct Seq2SeqExample {
  std::string source, target;
};

enum class DateSplit { Train, HeldOut };

// n examples of the split, each a random date of that split in a random form.
std::vector<Seq2SeqExample> generate_dates(uint64_t seed, int n, DateSplit split);
// Every character the task's sources and targets use (for a character vocabulary).
std::string date_alphabet();
// One date in form f (0..date_forms()-1), for tests and demos.
std::string date_text(int year, int month, int day, int form);
int date_forms();
bool date_held_out(int year, int month, int day);

}  // namespace qkv
