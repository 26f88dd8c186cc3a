// settings.h — TMK_* environment variables: one table per layer, each entry
// with its default and a one-line description, read once at start-up.
//
// The parse helpers turn a bad value into a status that names the variable,
// the value and what was expected, so that a typo never silently falls back
// to a default.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "status.h"

namespace tmk {

struct setting_description {
  const char* name;           // "TMK_NOTIFY"
  const char* default_value;  // as it would be written in the environment
  const char* description;    // one line
};

// The substrate's settings (launch, transport, notification, logging).
std::span<const setting_description> substrate_settings();

// The environment's value of a setting, or nullopt when it is unset or empty.
std::optional<std::string> setting_value(const char* name);

// Parsers: "<name>=<value>: <what was expected>" on error.
result<std::uint64_t> parse_unsigned(const char* name, const std::string& value,
                                     std::uint64_t min, std::uint64_t max);
// Sizes accept a K, M or G suffix (powers of 1024).
result<std::uint64_t> parse_size(const char* name, const std::string& value,
                                 std::uint64_t min, std::uint64_t max);
// Durations in seconds, fractions allowed ("0.5").
result<double> parse_seconds(const char* name, const std::string& value, double min, double max);
// One of the given words; returns its index.
result<int> parse_choice(const char* name, const std::string& value,
                         std::span<const char* const> choices);
result<bool> parse_bool(const char* name, const std::string& value);

}  // namespace tmk
