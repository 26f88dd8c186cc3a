#include "substrate_config.h"

#include "settings.h"

namespace tmk {

const char* backend_name(backend_kind kind) { return kind == backend_kind::ucx ? "ucx" : "sockets"; }
const char* notify_name(notify_mode mode) { return mode == notify_mode::interrupt ? "interrupt" : "poll"; }
const char* ucx_path_name(ucx_data_path path) { return path == ucx_data_path::am ? "am" : "tag"; }

result<int> parse_nprocs(const char* source, const std::string& value) {
  auto parsed = parse_unsigned(source, value, 1, max_processes);
  if (!parsed)
    return status(status_code::invalid_argument,
                  std::string(source) + (source[0] == '-' ? " " : "=") + value + ": the number of processes must be from 1 to " +
                      std::to_string(max_processes));
  return static_cast<int>(*parsed);
}

result<command_line> parse_command_line(int argc, char** argv) {
  command_line options;
  int at = 1;
  while (at < argc && std::string(argv[at]) != "--") ++at;
  for (++at; at < argc; ++at) {
    std::string word = argv[at];
    if (word == "-s") {
      options.statistics = true;
    } else if (word == "-n" || word.rfind("-n", 0) == 0) {
      std::string value = word.size() > 2 ? word.substr(2) : std::string();
      if (value.empty()) {
        if (at + 1 >= argc)
          return status(status_code::invalid_argument, "option -n needs a number of processes");
        value = argv[++at];
      }
      auto parsed = parse_nprocs("-n", value);
      if (!parsed) return parsed.error();
      options.nprocs = *parsed;
    } else {
      return status(status_code::invalid_argument,
                    "unknown option '" + word + "' after '--' (tmk takes -n NPROCS and -s)");
    }
  }
  return options;
}

result<substrate_config> substrate_config::from_environment() {
  substrate_config config;
  if (auto value = setting_value("TMK_SUBSTRATE")) {
    static const char* const words[] = {"ucx", "sockets"};
    auto choice = parse_choice("TMK_SUBSTRATE", *value, words);
    if (!choice) return choice.error();
    config.backend = static_cast<backend_kind>(*choice);
  }
  if (auto value = setting_value("TMK_UCX_PATH")) {
    static const char* const words[] = {"am", "tag"};
    auto choice = parse_choice("TMK_UCX_PATH", *value, words);
    if (!choice) return choice.error();
    config.ucx_path = static_cast<ucx_data_path>(*choice);
  }
  if (auto value = setting_value("TMK_NOTIFY")) {
    static const char* const words[] = {"interrupt", "poll"};
    auto choice = parse_choice("TMK_NOTIFY", *value, words);
    if (!choice) return choice.error();
    config.notify = static_cast<notify_mode>(*choice);
  }
  if (auto value = setting_value("TMK_SERVICE_SPIN_US")) {
    auto parsed = parse_unsigned("TMK_SERVICE_SPIN_US", *value, 0, 1000000);
    if (!parsed) return parsed.error();
    config.service_spin_us = static_cast<unsigned>(*parsed);
  }
  if (auto value = setting_value("TMK_WAIT_SPIN_US")) {
    auto parsed = parse_unsigned("TMK_WAIT_SPIN_US", *value, 0, 1000000);
    if (!parsed) return parsed.error();
    config.wait_spin_us = static_cast<unsigned>(*parsed);
  }
  if (auto value = setting_value("TMK_RING_DELAY_US")) {
    auto parsed = parse_unsigned("TMK_RING_DELAY_US", *value, 0, 1000000);
    if (!parsed) return parsed.error();
    config.ring_delay_us = static_cast<unsigned>(*parsed);
  }
  if (auto value = setting_value("TMK_NUDGE_US")) {
    auto parsed = parse_unsigned("TMK_NUDGE_US", *value, 0, 1000000);
    if (!parsed) return parsed.error();
    config.nudge_us = static_cast<unsigned>(*parsed);
  }
  if (auto value = setting_value("TMK_MAX_MESSAGE")) {
    auto parsed = parse_size("TMK_MAX_MESSAGE", *value, 64 << 10, std::uint64_t{1} << 31);
    if (!parsed) return parsed.error();
    config.max_message = *parsed;
  }
  if (auto value = setting_value("TMK_WARM_UP")) {
    auto parsed = parse_size("TMK_WARM_UP", *value, 0, std::uint64_t{1} << 31);
    if (!parsed) return parsed.error();
    config.warm_up_bytes = *parsed;
  }
  if (auto value = setting_value("TMK_OUTSTANDING")) {
    auto parsed = parse_unsigned("TMK_OUTSTANDING", *value, 1, 64);
    if (!parsed) return parsed.error();
    config.outstanding = static_cast<unsigned>(*parsed);
  }
  if (auto value = setting_value("TMK_DOORBELL")) {
    static const char* const words[] = {"on", "off"};
    auto choice = parse_choice("TMK_DOORBELL", *value, words);
    if (!choice) return choice.error();
    config.doorbell = *choice == 0;
  }
  return config;
}

result<launch_config> launch_config::from_environment() {
  launch_config config;
  if (auto value = setting_value("TMK_NPROCS")) {
    auto parsed = parse_nprocs("TMK_NPROCS", *value);
    if (!parsed) return parsed.error();
    config.nprocs = *parsed;
  }
  if (auto value = setting_value("TMK_STDOUT")) {
    static const char* const words[] = {"0", "all"};
    auto choice = parse_choice("TMK_STDOUT", *value, words);
    if (!choice) return choice.error();
    config.all_stdout = *choice == 1;
  }
  if (auto value = setting_value("TMK_BIND")) {
    static const char* const words[] = {"auto", "core", "none"};
    auto choice = parse_choice("TMK_BIND", *value, words);
    if (!choice) return choice.error();
    config.bind = static_cast<bind_mode>(*choice);
  }
  if (auto value = setting_value("TMK_CPU_LATENCY_US")) {
    auto parsed = parse_unsigned("TMK_CPU_LATENCY_US", *value, 0, 1000000);
    if (!parsed) return parsed.error();
    config.cpu_latency_us = static_cast<unsigned>(*parsed);
  }
  if (auto value = setting_value("TMK_CONNECT_TIMEOUT")) {
    auto parsed = parse_seconds("TMK_CONNECT_TIMEOUT", *value, 0.1, 86400);
    if (!parsed) return parsed.error();
    config.connect_timeout = *parsed;
  }
  if (auto value = setting_value("TMK_PEER_TIMEOUT")) {
    auto parsed = parse_seconds("TMK_PEER_TIMEOUT", *value, 0.2, 86400);
    if (!parsed) return parsed.error();
    config.peer_timeout = *parsed;
  }
  if (auto value = setting_value("TMK_RANK")) {
    auto parsed = parse_unsigned("TMK_RANK", *value, 0, max_processes - 1);
    if (!parsed) return parsed.error();
    config.manual_rank = static_cast<int>(*parsed);
  }
  config.root = setting_value("TMK_ROOT");
  if (config.manual_rank.has_value() != config.root.has_value())
    return status(status_code::invalid_argument,
                  "TMK_RANK and TMK_ROOT go together: processes started by hand need both");
  if (config.manual_rank && config.nprocs == 0)
    return status(status_code::invalid_argument,
                  "TMK_RANK needs TMK_NPROCS: processes started by hand must agree on the count");
  if (config.manual_rank && *config.manual_rank >= config.nprocs)
    return status(status_code::invalid_argument,
                  "TMK_RANK=" + std::to_string(*config.manual_rank) + ": must be below TMK_NPROCS=" +
                      std::to_string(config.nprocs));
  if (auto value = setting_value("TMK_JOB_SECRET")) config.secret = *value;
  return config;
}

}  // namespace tmk
