// `vkspec devices [--json]`: every Vulkan device with the capabilities kernel choice reads.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "vkspec/context.hpp"
#include "vkspec/error.hpp"

namespace vkspec::cli {

nlohmann::json caps_json(const DeviceCaps& c) {
  char uuid[40];
  std::snprintf(uuid, sizeof uuid, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", c.uuid[0],
                c.uuid[1], c.uuid[2], c.uuid[3], c.uuid[4], c.uuid[5], c.uuid[6], c.uuid[7], c.uuid[8], c.uuid[9],
                c.uuid[10], c.uuid[11], c.uuid[12], c.uuid[13], c.uuid[14], c.uuid[15]);
  nlohmann::json heaps = nlohmann::json::array();
  for (const auto& h : c.heaps) heaps.push_back({{"bytes", h.bytes}, {"device_local", h.device_local}});
  return {{"name", c.name},
          {"type", c.type_name()},
          {"driver", c.driver_name},
          {"driver_info", c.driver_info},
          {"api_version", std::to_string(VK_API_VERSION_MAJOR(c.api_version)) + "." +
                              std::to_string(VK_API_VERSION_MINOR(c.api_version)) + "." +
                              std::to_string(VK_API_VERSION_PATCH(c.api_version))},
          {"driver_version", c.driver_version},
          {"pipeline_cache_uuid", uuid},
          {"subgroup_size", c.subgroup_size},
          {"min_subgroup_size", c.min_subgroup_size},
          {"max_subgroup_size", c.max_subgroup_size},
          {"subgroup_size_control", c.subgroup_size_control},
          {"subgroup_arithmetic", c.subgroup_arithmetic},
          {"fp16_arithmetic", c.fp16_arithmetic},
          {"int8_arithmetic", c.int8_arithmetic},
          {"storage_16bit", c.storage_16bit},
          {"storage_8bit", c.storage_8bit},
          {"pair_dispatch", c.pair_dispatch},
          {"max_shared_memory", c.max_shared_memory},
          {"max_stage_storage_buffers", c.max_stage_storage_buffers},
          {"max_stage_sampled", c.max_stage_sampled},
          {"max_storage_buffer_range", c.max_storage_buffer_range},
          {"max_uniform_buffer_range", c.max_uniform_buffer_range},
          {"max_texel_buffer_elements", c.max_texel_buffer_elements},
          {"max_allocation_bytes", c.max_allocation_bytes},
          {"max_workgroup_invocations", c.max_workgroup_invocations},
          {"timestamp_period_ns", c.timestamp_period_ns},
          {"device_local_bytes", c.device_local_bytes},
          {"memory_heaps", heaps},
          {"unified_memory", c.unified_memory},
          {"quirks",
           {{"weights_via_texel_buffer", c.quirks.weights_via_texel_buffer},
            {"single_subgroup_kernels", c.quirks.single_subgroup_kernels},
            {"loop_iteration_limit", c.quirks.loop_iteration_limit}}}};
}

static int run_devices(const std::vector<std::string>& argv) {
  Args args(argv);
  bool json = args.flag("json");
  std::string sel = args.get("device", "");
  args.reject_unknown();
  auto devs = Context::enumerate();
  // A selection (--device, VKSPEC_DEVICE) that matches nothing still lists every device, the list
  // its error points to, and then fails with that error.
  uint32_t chosen = UINT32_MAX;
  std::string choose_error;
  try {
    chosen = Context::choose(devs, sel);
  } catch (const Error& e) {
    choose_error = e.what();
  }
  if (json) {
    nlohmann::json out = {{"chosen", chosen == UINT32_MAX ? nlohmann::json(nullptr) : nlohmann::json(chosen)},
                          {"devices", nlohmann::json::array()}};
    for (auto& d : devs) {
      auto j = caps_json(d.caps);
      j["index"] = d.index;
      j["chosen"] = d.index == chosen;
      out["devices"].push_back(j);
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    if (!choose_error.empty()) throw Error(choose_error);
    return 0;
  }
  for (auto& d : devs) {
    const auto& c = d.caps;
    std::printf("%s [%u] %s (%s, %s)\n", d.index == chosen ? "*" : " ", d.index, c.name.c_str(), c.type_name().c_str(),
                c.driver_info.c_str());
    std::printf("      subgroup %u (min %u, max %u, control %s, arithmetic %s)\n", c.subgroup_size, c.min_subgroup_size,
                c.max_subgroup_size, c.subgroup_size_control ? "yes" : "no", c.subgroup_arithmetic ? "yes" : "no");
    std::printf("      fp16 %s, int8 %s, 16-bit storage %s, 8-bit storage %s, paired head dispatches %s\n",
                c.fp16_arithmetic ? "yes" : "no", c.int8_arithmetic ? "yes" : "no", c.storage_16bit ? "yes" : "no",
                c.storage_8bit ? "yes" : "no", c.pair_dispatch ? "yes" : "no");
    std::printf("      shared memory %u B, storage range %llu B, workgroup invocations %u, timestamp %.3g ns\n",
                c.max_shared_memory, (unsigned long long)c.max_storage_buffer_range, c.max_workgroup_invocations,
                c.timestamp_period_ns);
    std::printf("      memory heaps:");
    for (const auto& h : c.heaps)
      std::printf(" %llu MiB%s", (unsigned long long)(h.bytes >> 20), h.device_local ? " (device-local)" : "");
    std::printf("\n");
    std::printf("      quirks: weights_via_texel_buffer=%d single_subgroup_kernels=%d loop_iteration_limit=%u\n",
                c.quirks.weights_via_texel_buffer, c.quirks.single_subgroup_kernels, c.quirks.loop_iteration_limit);
  }
  if (!choose_error.empty()) throw Error(choose_error);
  return 0;
}

static RegisterCommand reg{"devices", "list Vulkan devices and their capabilities [--json]", run_devices};

}  // namespace vkspec::cli
