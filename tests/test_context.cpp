// Embedding: vkspec on a caller's own VkInstance/VkDevice/queue, and two runtimes in one process.
#include <filesystem>
#include <unistd.h>

#include "vk_fixture.hpp"

using namespace vkspec;
using namespace vkspec::test;

namespace {

void run_add(Context& ctx, float a, float b) {
  const uint32_t n = 37;
  Buffer x(ctx, n * 4), y(ctx, n * 4), o(ctx, n * 4);
  x.upload(std::vector<float>(n, a));
  y.upload(std::vector<float>(n, b));
  Sequence seq(ctx);
  seq.begin();
  add(seq, Mat{&x, 0, n}, Mat{&y, 0, n}, Mat{&o, 0, n}, 1, n);
  seq.run();
  for (float v : o.read<float>(n)) REQUIRE(v == a + b);
}

}  // namespace

TEST_CASE("a caller's own Vulkan device can be adopted (embedding in an app that owns the device)") {
  // The "game": it loads Vulkan itself and creates its instance and device as it likes.
  REQUIRE(volkInitialize() == VK_SUCCESS);
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo ici{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  ici.pApplicationInfo = &app;
  VkInstance inst;
  REQUIRE(vkCreateInstance(&ici, nullptr, &inst) == VK_SUCCESS);
  volkLoadInstanceOnly(inst);
  uint32_t n = 0;
  vkEnumeratePhysicalDevices(inst, &n, nullptr);
  REQUIRE(n > 0);
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst, &n, pds.data());
  uint32_t qn = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pds[0], &qn, nullptr);
  std::vector<VkQueueFamilyProperties> fams(qn);
  vkGetPhysicalDeviceQueueFamilyProperties(pds[0], &qn, fams.data());
  uint32_t fam = 0;
  while (fam < qn && !(fams[fam].queueFlags & VK_QUEUE_COMPUTE_BIT)) ++fam;
  REQUIRE(fam < qn);
  float prio = 1;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = fam;
  qi.queueCount = 1;
  qi.pQueuePriorities = &prio;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.timelineSemaphore = VK_TRUE;  // the one feature vkspec requires
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &f12;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qi;
  VkDevice dev;
  REQUIRE(vkCreateDevice(pds[0], &dci, nullptr, &dev) == VK_SUCCESS);
  VolkDeviceTable table;
  volkLoadDeviceTable(&table, dev);
  VkQueue q;
  table.vkGetDeviceQueue(dev, fam, 0, &q);
  {
    AdoptedDevice a{inst, pds[0], dev, q, fam, VK_API_VERSION_1_2};
    ContextOptions o;
    o.pipeline_cache_dir = "-";
    // Vulkan cannot tell which features a device was created with: undeclared means missing.
    CHECK_THROWS_AS(Context(a, o), MissingFeature);
    a.enabled.timeline_semaphore = true;
    // Submissions to a shared queue go through the caller's lock.
    struct Lock {
      int held = 0, calls = 0;
    } lock;
    o.queue_lock.lock = [](void* u) { auto* l = static_cast<Lock*>(u); CHECK(l->held++ == 0); ++l->calls; };
    o.queue_lock.unlock = [](void* u) { CHECK(static_cast<Lock*>(u)->held-- == 1); };
    o.queue_lock.user = &lock;
    Context ctx(a, o);
    run_add(ctx, 1.5f, 2.25f);
    CHECK(lock.calls > 0);
    CHECK(lock.held == 0);
  }  // vkspec is gone; the caller's device is still alive and usable
  REQUIRE(table.vkDeviceWaitIdle(dev) == VK_SUCCESS);
  table.vkDestroyDevice(dev, nullptr);
  vkDestroyInstance(inst, nullptr);
}

TEST_CASE("two runtimes live in one process without sharing state") {
  ContextOptions o;
  o.pipeline_cache_dir = "-";
  Context a(o), b(o);
  run_add(a, 1, 2);
  run_add(b, 3, 4);
  run_add(a, 5, 6);
}

TEST_CASE("a context with validation outlives one without and is destroyed cleanly") {
  // volk's instance-level entry points follow the last instance loaded; a context must not
  // destroy its debug messenger through a pointer that another context's instance replaced.
  ContextOptions with;
  with.pipeline_cache_dir = "-";
  with.validation = true;
  auto validating = std::make_unique<Context>(with);
  REQUIRE(validating->validation_enabled());
  {
    ContextOptions without;
    without.pipeline_cache_dir = "-";
    Context plain(without);
    run_add(plain, 1, 2);
  }
  run_add(*validating, 3, 4);
  Context later(with);  // and one more instance loaded after the plain one
  run_add(later, 5, 6);
  validating.reset();  // crashed here when the messenger was destroyed through volk's global
  CHECK(later.take_validation_messages().empty());
}

TEST_CASE("asking for a device that does not exist is a clear error") {
  ContextOptions o;
  o.device = "no-such-gpu-anywhere";
  CHECK_THROWS_WITH_AS(Context{o}, doctest::Contains("no Vulkan device matches 'no-such-gpu-anywhere'"), Error);
  o.device = "97";
  CHECK_THROWS_WITH_AS(Context{o}, doctest::Contains("device index 97 does not exist"), Error);
}

TEST_CASE("the pipeline cache is saved to disk keyed by device, driver and shaders, and reloaded") {
  const std::string dir = (std::filesystem::temp_directory_path() / ("vkspec_pc_" + std::to_string(::getpid()))).string();
  std::filesystem::remove_all(dir);
  std::string path;
  {
    ContextOptions o;
    o.pipeline_cache_dir = dir;
    Context ctx(o);
    path = ctx.pipelines().path();
    CHECK(path.find(dir) == 0);
    run_add(ctx, 1, 1);
  }
  REQUIRE(std::filesystem::exists(path));
  CHECK(std::filesystem::file_size(path) > 0);
  {
    ContextOptions o;
    o.pipeline_cache_dir = dir;
    Context ctx(o);  // a valid blob is accepted by the driver; a corrupt one would be ignored
    CHECK(ctx.pipelines().path() == path);
    run_add(ctx, 2, 3);
  }
  // A truncated, corrupt file must not break startup.
  std::filesystem::resize_file(path, 7);
  {
    ContextOptions o;
    o.pipeline_cache_dir = dir;
    Context ctx(o);
    run_add(ctx, 4, 5);
  }
  std::filesystem::remove_all(dir);
}
