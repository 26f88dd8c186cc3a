// tmk_info — what this installation of tmk is and how it is configured:
// its version, every TMK_* setting (default, value in this environment,
// meaning), the UCX transports it can use, and the receive-buffer memory the
// substrate preposts for a job of n processes.
//
//   tmk_info             everything, footprint for a few job sizes
//   tmk_info -n 256      footprint for 256 processes
//   tmk_info -v          also UCP's own description of its context
//
// It reads the same tables the runtime reads (substrate_settings(),
// runtime_settings()) and validates the environment with the same parsers,
// so a value that would stop a program is reported here first.  Exit
// status: 0, 1 when a TMK_* value is invalid, 2 on a bad option.
#define OMPI_SKIP_MPICXX 1  // the C API only
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <uct/api/uct.h>
#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "settings.h"
#include "ucx/ucx_transport.h"

namespace {

constexpr int line_width = 78;

void print_usage(FILE* stream) {
  fprintf(stream,
          "usage: tmk_info [-n NPROCS] [-v]\n"
          "  -n NPROCS   receive-buffer footprint for a job of NPROCS processes\n"
          "              (default: TMK_NPROCS if set, else a few job sizes)\n"
          "  -v          also print UCP's description of the context tmk creates\n"
          "  -h, --help  this text\n");
}

// Prints text from column indent, broken at spaces before line_width.
void print_wrapped(const std::string& text, int indent) {
  std::size_t width = static_cast<std::size_t>(line_width - indent);
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t length = text.size() - at;
    if (length > width) {
      std::size_t space = text.rfind(' ', at + width);
      length = (space == std::string::npos || space <= at) ? width : space - at;
    }
    std::string piece = text.substr(at, length);
    while (!piece.empty() && piece.back() == ' ') piece.pop_back();
    printf("%*s%s\n", indent, "", piece.c_str());
    at += length;
    while (at < text.size() && text[at] == ' ') ++at;
  }
}

std::string bytes_text(std::size_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 3) value /= 1024, ++unit;
  char text[32];
  if (unit == 0 || value == static_cast<double>(static_cast<std::size_t>(value)))
    snprintf(text, sizeof text, "%zu %s", static_cast<std::size_t>(value), units[unit]);
  else
    snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

void print_versions() {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  printf("tmk %s\n", TMK_VERSION_STRING);
  printf("  UCX %u.%u.%u (built against %d.%d)\n", major, minor, release, UCP_API_MAJOR,
         UCP_API_MINOR);
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = "";
  int length = 0;
  // Allowed before MPI_Init; only the first line says which library it is.
  if (MPI_Get_library_version(mpi_version, &length) == MPI_SUCCESS) {
    std::string first(mpi_version, strcspn(mpi_version, "\n,"));
    printf("  MPI %s (used only under mpirun, for the start-up exchange)\n", first.c_str());
  }
}

void print_settings(const char* title, std::span<const tmk::setting_description> table) {
  printf("\n%s\n", title);
  for (const auto& setting : table) {
    auto value = tmk::setting_value(setting.name);
    std::string current = value ? *value : "(unset)";
    if (value && strcmp(setting.name, "TMK_JOB_SECRET") == 0) current = "(set, not shown)";
    std::string fallback = *setting.default_value ? setting.default_value : "(none)";
    printf("  %-20s default %-15s current %s\n", setting.name, fallback.c_str(),
           current.c_str());
    print_wrapped(setting.description, 6);
  }
}

// Validates the environment as a program's start-up would; returns false
// (after naming the problem) when a program would stop.
bool check_environment(std::optional<tmk::substrate_config>& substrate_out) {
  auto substrate = tmk::substrate_config::from_environment();
  auto launch = tmk::launch_config::from_environment();
  auto runtime = tmk::runtime_config::from_environment();
  bool good = true;
  printf("\n");
  for (const tmk::status* problem :
       {substrate ? nullptr : &substrate.error(), launch ? nullptr : &launch.error(),
        runtime ? nullptr : &runtime.error()}) {
    if (problem == nullptr) continue;
    printf("invalid setting: %s\n", problem->message().c_str());
    good = false;
  }
  if (good) printf("Every TMK_* value in this environment is valid.\n");
  if (substrate) substrate_out = *substrate;
  return good;
}

// Every transport UCT reports on this host, as `ucx_info -d` lists them.
void print_uct_resources() {
  uct_component_h* components = nullptr;
  unsigned component_count = 0;
  ucs_status_t code = uct_query_components(&components, &component_count);
  if (code != UCS_OK) {
    printf("  (uct_query_components failed: %s)\n", ucs_status_string(code));
    return;
  }
  static const char* const kinds[] = {"network", "shared memory", "accelerator", "loopback"};
  int listed = 0;
  for (unsigned c = 0; c < component_count; ++c) {
    uct_component_attr_t attributes{};
    attributes.field_mask =
        UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(components[c], &attributes) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> md_resources(attributes.md_resource_count);
    attributes.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attributes.md_resources = md_resources.data();
    if (uct_component_query(components[c], &attributes) != UCS_OK) continue;
    for (const auto& md_resource : md_resources) {
      uct_md_config_t* md_config = nullptr;
      if (uct_md_config_read(components[c], nullptr, nullptr, &md_config) != UCS_OK) continue;
      uct_md_h md = nullptr;
      code = uct_md_open(components[c], md_resource.md_name, md_config, &md);
      uct_config_release(md_config);
      if (code != UCS_OK) continue;
      uct_tl_resource_desc_t* resources = nullptr;
      unsigned resource_count = 0;
      if (uct_md_query_tl_resources(md, &resources, &resource_count) == UCS_OK) {
        for (unsigned r = 0; r < resource_count; ++r) {
          std::string name = std::string(resources[r].tl_name) + "/" + resources[r].dev_name;
          unsigned kind = static_cast<unsigned>(resources[r].dev_type);
          printf("  %-24s %s\n", name.c_str(), kind < 4 ? kinds[kind] : "other");
          ++listed;
        }
        uct_release_tl_resource_list(resources);
      }
      uct_md_close(md);
    }
  }
  uct_release_component_list(components);
  if (listed == 0) printf("  (none)\n");
}

// The transports UCP selects for a context with tmk's features (UCX_TLS and
// the other UCX_* variables apply, or tls when given), taken from
// ucp_context_print_info.
void print_ucp_selection(bool verbose, const char* tls = nullptr) {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) {
    printf("  (ucp_config_read failed)\n");
    return;
  }
  if (tls != nullptr && ucp_config_modify(config, "TLS", tls) != UCS_OK) {
    printf("  (UCX does not take TLS=%s)\n", tls);
    ucp_config_release(config);
    return;
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  ucs_status_t code = ucp_init(&params, config, &context);
  ucp_config_release(config);
  if (code != UCS_OK) {
    printf("  ucp_init failed: %s (check UCX_TLS and UCX_NET_DEVICES)\n",
           ucs_status_string(code));
    return;
  }
  std::string text = tmk::ucp_context_text(context);
  std::string selected;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string current = text.substr(at, end - at);
    std::size_t marker = current.find(" -- ");
    if (current.find("resource") != std::string::npos && marker != std::string::npos)
      selected += " " + current.substr(marker + 4);
    at = end + 1;
  }
  print_wrapped(selected.empty() ? "(none)" : selected.substr(1), 2);
  if (verbose) printf("%s", text.c_str());
  ucp_cleanup(context);
}

// "1,048,576"
std::string grouped(std::size_t value) {
  std::string digits = std::to_string(value);
  std::string text;
  for (std::size_t at = 0; at < digits.size(); ++at) {
    if (at > 0 && (digits.size() - at) % 3 == 0) text += ',';
    text += digits[at];
  }
  return text;
}

void print_footprint(const std::vector<int>& job_sizes,
                     const std::optional<tmk::substrate_config>& substrate) {
  tmk::substrate_config config = substrate.value_or(tmk::substrate_config{});
  std::string in_use = tmk::backend_name(config.backend);
  if (config.backend == tmk::backend_kind::ucx) in_use += std::string("/") +
                                                          tmk::ucx_path_name(config.ucx_path);
  if (substrate)
    printf("\nReceive buffers the substrate preposts, per process (TMK_OUTSTANDING=%u;\n"
           "this environment uses %s):\n",
           config.outstanding, in_use.c_str());
  else
    printf("\nReceive buffers the substrate preposts, per process (the defaults: this\n"
           "environment is invalid):\n");
  printf("  %6s  %-5s  %-20s %-11s %s\n", "n", "am", "tag path: requests", "replies", "total");
  for (int nprocs : job_sizes) {
    tmk::buffer_footprint tag = tmk::tag_path_footprint(nprocs, config.outstanding);
    printf("  %6d  %-5s  %-20s %-11s %s\n", nprocs, "none", bytes_text(tag.request_bytes).c_str(),
           bytes_text(tag.reply_bytes).c_str(), bytes_text(tag.total()).c_str());
  }
  if (job_sizes.size() == 1) {
    tmk::buffer_footprint tag = tmk::tag_path_footprint(job_sizes[0], config.outstanding);
    printf("  tag path at n = %d: %s B for requests + %s B for replies = %s B\n", job_sizes[0],
           grouped(tag.request_bytes).c_str(), grouped(tag.reply_bytes).c_str(),
           grouped(tag.total()).c_str());
  }
  print_wrapped(
      "am: nothing of its own; UCX's shared-memory and network receive pools are per worker "
      "and transport, not per peer, so they do not grow with n. tag: o*(n-1) buffers of 64 B "
      "and n-1 of each class from 128 B to 32 KiB for requests (o = TMK_OUTSTANDING), one per "
      "class for replies; larger messages go by rendezvous. sockets: kernel socket buffers "
      "only.",
      2);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> job_sizes;
  bool verbose = false;
  for (int at = 1; at < argc; ++at) {
    std::string word = argv[at];
    if (word == "-h" || word == "--help") {
      print_usage(stdout);
      return 0;
    } else if (word == "-v" || word == "--verbose") {
      verbose = true;
    } else if (word.rfind("-n", 0) == 0) {
      std::string value = word.size() > 2 ? word.substr(2) : std::string();
      if (value.empty()) {
        if (at + 1 >= argc) {
          fprintf(stderr, "tmk_info: option -n needs a number of processes\n");
          print_usage(stderr);
          return 2;
        }
        value = argv[++at];
      }
      auto parsed = tmk::parse_nprocs("-n", value);
      if (!parsed) {
        fprintf(stderr, "tmk_info: %s\n", parsed.error().message().c_str());
        return 2;
      }
      job_sizes.push_back(*parsed);
    } else {
      fprintf(stderr, "tmk_info: unknown option '%s'\n", word.c_str());
      print_usage(stderr);
      return 2;
    }
  }

  print_versions();
  print_settings("Substrate settings (environment variables):", tmk::substrate_settings());
  print_settings("Runtime settings (environment variables):", tmk::runtime_settings());
  std::optional<tmk::substrate_config> substrate;
  bool valid = check_environment(substrate);

  printf("\nUCX transports on this host:\n");
  print_uct_resources();
  const char* tls = getenv("UCX_TLS");
  bool doorbells = substrate && substrate->doorbell && substrate->notify == tmk::notify_mode::interrupt;
  if (tls == nullptr && doorbells) {
    // What the UCX backend opens when the job is on this host alone (TMK_DOORBELL).
    printf("\nUCX transports a tmk process would use when every process of the job runs on "
           "this host (doorbells: shared memory only):\n");
    print_ucp_selection(verbose, "sm,self");
    printf("\nUCX transports a tmk process would use across hosts or started by hand "
           "(UCX_TLS unset, all):\n");
  } else {
    printf("\nUCX transports a tmk process would use (UCX_TLS=%s):\n", tls ? tls : "unset, all");
  }
  print_ucp_selection(verbose);

  if (job_sizes.empty()) {
    if (auto value = tmk::setting_value("TMK_NPROCS")) {
      if (auto parsed = tmk::parse_nprocs("TMK_NPROCS", *value)) job_sizes.push_back(*parsed);
    }
  }
  if (job_sizes.empty()) job_sizes = {2, 16, 256, 1024, 4096};
  print_footprint(job_sizes, substrate);
  return valid ? 0 : 1;
}
