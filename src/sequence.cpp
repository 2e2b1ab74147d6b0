#include "vkspec/sequence.hpp"

#include <bit>
#include <utility>

#include "vkspec/context.hpp"
#include "vkspec/pair_pack.hpp"
#include "vkspec/step_state.h"

namespace vkspec {

namespace {
// Generous per-recording budget; a decode step of a 32-layer model uses ~600 sets.
constexpr uint32_t kMaxSets = 8192;
constexpr VkPipelineStageFlags kStages =
    VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT;
constexpr VkAccessFlags kAccess = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_UNIFORM_READ_BIT |
                                  VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                                  VK_ACCESS_INDIRECT_COMMAND_READ_BIT;
constexpr uint32_t kArgsHeader = 4;  // u32 words before the first dispatch's (gx, gy, gz)
}  // namespace

Sequence::Sequence(Context& ctx, uint32_t max_timed, bool replayable)
    : ctx_(ctx), max_timed_(max_timed), replayable_(replayable) {
  if (replayable_) {
    recorded_args_ = Buffer(ctx, (kArgsHeader + 3 * kMaxSets) * 4);
    live_args_ = Buffer(ctx, (kArgsHeader + 3 * kMaxSets) * 4);
  }
  const auto& vk = ctx.vk();
  // A command pool of its own: a pool is externally synchronized, and another thread may record
  // or free in another Sequence on the same Context meanwhile.
  VkCommandPoolCreateInfo ci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  ci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  ci.queueFamilyIndex = ctx.queue_family();
  VKSPEC_VK(vk.vkCreateCommandPool(ctx.device(), &ci, nullptr, &cmd_pool_));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = cmd_pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VKSPEC_VK(vk.vkAllocateCommandBuffers(ctx.device(), &ai, &cb_));
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VKSPEC_VK(vk.vkCreateFence(ctx.device(), &fi, nullptr, &fence_));
  // PAIR dispatches (begin_pair) take two descriptors per binding.
  VkDescriptorPoolSize sizes[] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kMaxSets * 16},
                                  {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kMaxSets},
                                  {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kMaxSets * 8}};
  VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pi.maxSets = kMaxSets;
  pi.poolSizeCount = 3;
  pi.pPoolSizes = sizes;
  VKSPEC_VK(vk.vkCreateDescriptorPool(ctx.device(), &pi, nullptr, &pool_));
  if (max_timed_ && ctx.caps().timestamp_period_ns > 0) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = max_timed_ + 1;
    VKSPEC_VK(vk.vkCreateQueryPool(ctx.device(), &qi, nullptr, &queries_));
  } else {
    max_timed_ = 0;
  }
}

Sequence::~Sequence() {
  const auto& vk = ctx_.vk();
  if (pending_) vk.vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX);
  if (queries_) vk.vkDestroyQueryPool(ctx_.device(), queries_, nullptr);
  vk.vkDestroyDescriptorPool(ctx_.device(), pool_, nullptr);
  vk.vkDestroyFence(ctx_.device(), fence_, nullptr);
  vk.vkDestroyCommandPool(ctx_.device(), cmd_pool_, nullptr);  // frees cb_
}

void Sequence::begin() {
  const auto& vk = ctx_.vk();
  if (pending_) wait();
  VKSPEC_VK(vk.vkResetDescriptorPool(ctx_.device(), pool_, 0));
  VKSPEC_VK(vk.vkResetCommandBuffer(cb_, 0));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = replayable_ ? VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT : VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VKSPEC_VK(vk.vkBeginCommandBuffer(cb_, &bi));
  recording_ = true;
  timed_ = 0;
  dispatches_ = 0;
  paired_ = 0;
  single_fetch_ = 0;
  capturing_ = -1;
  labels_.clear();
  written_.clear();
  read_.clear();
  args_.assign(kArgsHeader, 0);
  // A replayed recording follows another copy of itself in the same submission: order it after
  // everything submitted before.
  if (replayable_) barrier();
  if (queries_) {
    vk.vkCmdResetQueryPool(cb_, queries_, 0, max_timed_ + 1);
    vk.vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
  }
  // Host writes made before this submission (mapped uploads) are visible to the GPU by the
  // submit's implicit host-write ordering; nothing to do here.
}

// A buffer placed in another's memory (PairPack's head states) is also part of that one, which a
// PairPack view reads whole: a write to it is a write of the whole buffer for later reads through
// such a view, and must wait for earlier ones.
bool Sequence::hazard(VkBuffer b, bool write) const {
  // RAW / WAW: anything touching a buffer written since the last barrier.
  if (written_.count(b)) return true;
  // WAR: writing a buffer someone read since the last barrier.
  if (!write) return false;
  if (read_.count(b)) return true;
  const VkBuffer whole = ctx_.placed_in(b).in;
  return whole && read_.count(whole);
}

void Sequence::touch(VkBuffer b, bool write) {
  (write ? written_ : read_).insert(b);
  if (write)
    if (const VkBuffer whole = ctx_.placed_in(b).in) written_.insert(whole);
}

void Sequence::barrier() {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = kAccess;
  mb.dstAccessMask = kAccess;
  ctx_.vk().vkCmdPipelineBarrier(cb_, kStages, kStages, 0, 1, &mb, 0, nullptr, 0, nullptr);
  written_.clear();
  read_.clear();
}

void Sequence::dispatch(const Pipeline& p, std::span<const Binding> bindings, const void* push, uint32_t push_size,
                        uint32_t gx, uint32_t gy, uint32_t gz, const char* label) {
  const auto& types = p.desc().bindings;
  if (bindings.size() != types.size())
    throw Error("dispatch of '" + p.desc().shader + "' got " + std::to_string(bindings.size()) + " bindings, expected " +
                std::to_string(types.size()));
  if (push_size != p.desc().push_size)
    throw Error("dispatch of '" + p.desc().shader + "' got " + std::to_string(push_size) +
                " bytes of push constants, expected " + std::to_string(p.desc().push_size));
  if (capturing_ >= 0) {
    Captured c;
    c.p = &p;
    c.bindings.assign(bindings.begin(), bindings.end());
    const auto* b = static_cast<const uint8_t*>(push);
    c.push.assign(b, b + push_size);
    c.g[0] = gx, c.g[1] = gy, c.g[2] = gz;
    c.label = label;
    lists_[capturing_].push_back(std::move(c));
    return;
  }
  record(p, bindings.data(), nullptr, bindings.size(), push, push_size, gx, gy, gz, label);
}

void Sequence::record(const Pipeline& p, const Binding* bindings, const Binding* pair, size_t n, const void* push,
                      uint32_t push_size, uint32_t gx, uint32_t gy, uint32_t gz, const char* label,
                      const VkBufferView* pair_views, VkBuffer pack_read) {
  const auto& vk = ctx_.vk();
  const auto& types = p.desc().bindings;
  const uint32_t count = pair ? 2 : 1;
  bool need = replayable_ && &p != gate_pipeline_ && hazard(live_args_.handle(), false);
  for (const Binding* list : {bindings, pair})
    for (size_t i = 0; list && i < n; ++i) need |= hazard(list[i].buffer->handle(), list[i].write);
  if (pack_read) need |= hazard(pack_read, false);
  if (need) barrier();
  for (const Binding* list : {bindings, pair})
    for (size_t i = 0; list && i < n; ++i) touch(list[i].buffer->handle(), list[i].write);
  if (pack_read) touch(pack_read, false);
  if (replayable_ && &p != gate_pipeline_) touch(live_args_.handle(), false);

  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  VkDescriptorSetLayout sl = p.set_layout();
  ai.pSetLayouts = &sl;
  VkDescriptorSet set;
  VKSPEC_VK(vk.vkAllocateDescriptorSets(ctx_.device(), &ai, &set));
  std::vector<VkWriteDescriptorSet> writes(n);
  std::vector<VkDescriptorBufferInfo> infos(n * count);
  std::vector<VkBufferView> views(n * count);
  for (size_t i = 0; i < n; ++i) {
    VkWriteDescriptorSet& w = writes[i];
    w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.dstBinding = uint32_t(i);
    w.descriptorCount = count;
    w.descriptorType = types[i];
    for (uint32_t j = 0; j < count; ++j) {
      const Binding& b = j ? pair[i] : bindings[i];
      if (types[i] == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER) {
        views[i * count + j] = pair_views && pair_views[i] ? pair_views[i] : b.buffer->texel_view();
      } else {
        VkDeviceSize range = b.range;
        if (range == VK_WHOLE_SIZE) range = b.buffer->size() - b.offset;
        infos[i * count + j] = {b.buffer->handle(), b.offset, range};
      }
    }
    if (types[i] == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)
      w.pTexelBufferView = &views[i * count];
    else
      w.pBufferInfo = &infos[i * count];
  }
  vk.vkUpdateDescriptorSets(ctx_.device(), uint32_t(writes.size()), writes.data(), 0, nullptr);
  vk.vkCmdBindPipeline(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.handle());
  vk.vkCmdBindDescriptorSets(cb_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout(), 0, 1, &set, 0, nullptr);
  if (push_size) vk.vkCmdPushConstants(cb_, p.layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
  if (replayable_ && &p != gate_pipeline_) {
    if (dispatches_ >= kMaxSets) throw Error("a replayable sequence holds at most " + std::to_string(kMaxSets) + " dispatches");
    const VkDeviceSize off = args_.size() * 4;
    args_.insert(args_.end(), {gx, gy, gz});
    vk.vkCmdDispatchIndirect(cb_, live_args_.handle(), off);
  } else {
    vk.vkCmdDispatch(cb_, gx, gy, gz);
  }
  ++dispatches_;
  if (pair) ++paired_;
  if (queries_ && timed_ < max_timed_) {
    vk.vkCmdWriteTimestamp(cb_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, ++timed_);
    labels_.push_back(label ? label : p.desc().shader);
  }
}

bool Sequence::capture(std::function<void()> run) {
  if (capturing_ < 0) return false;
  Captured c;
  c.run = std::move(run);
  lists_[capturing_].push_back(std::move(c));
  return true;
}

void Sequence::begin_pair(const PairPack* pack) {
  if (capturing_ >= 0) throw Error("Sequence::begin_pair: already in a pair section");
  capturing_ = 0;
  pack_ = pack;
  lists_[0].clear();
  lists_[1].clear();
}

void Sequence::next_pair() {
  if (capturing_ != 0) throw Error("Sequence::next_pair: not capturing the first list of a pair section");
  capturing_ = 1;
}

const Pipeline* Sequence::pair_pipeline(const Pipeline& p, uint32_t same, uint32_t packed, uint32_t delta) {
  if (!ctx_.caps().pair_dispatch || p.desc().array != 1) return nullptr;
  const auto key = std::tuple{&p, same, packed, delta};
  auto it = pair_of_.find(key);
  if (it != pair_of_.end()) return it->second;
  const Pipeline* q = nullptr;
  PipelineDesc d = p.desc();
  d.shader += "_pair";
  d.array = 2;
  d.pair_same = same;
  d.pair_packed = packed;
  d.pair_delta = delta;
  // A pair doubles the kernel's descriptors: where that passes the device's limit, unpaired.
  if (has_shader(d.shader) && fits_stage_limits(ctx_.caps(), d)) q = &ctx_.pipelines().get(d);
  pair_of_[key] = q;
  return q;
}

void Sequence::end_pair() {
  if (capturing_ != 1) throw Error("Sequence::end_pair: not capturing the second list of a pair section");
  capturing_ = -1;
  std::vector<Captured> a = std::move(lists_[0]), b = std::move(lists_[1]);
  const PairPack* pack = std::exchange(pack_, nullptr);
  auto replay = [&](const Captured& c) {
    if (c.run) {
      c.run();
    } else {
      record(*c.p, c.bindings.data(), nullptr, c.bindings.size(), c.push.data(), uint32_t(c.push.size()), c.g[0], c.g[1],
             c.g[2], c.label);
    }
  };
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    if (i < a.size() && i < b.size() && a[i].p && a[i].p == b[i].p && a[i].push == b[i].push && a[i].g[0] == b[i].g[0] &&
        a[i].g[1] == b[i].g[1] && a[i].g[2] == 1 && b[i].g[2] == 1) {
      // Texel bindings read from one descriptor where both heads' are the same buffer, or where
      // the pack holds the two (shaders/pair.glsl).
      const auto& types = a[i].p->desc().bindings;
      const size_t n = a[i].bindings.size();
      std::vector<VkBufferView> views(n, VK_NULL_HANDLE);
      uint32_t same = 0, packed = 0;
      for (size_t j = 0; j < n && j < 32; ++j) {
        if (types[j] != VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER) continue;
        const VkBuffer x = a[i].bindings[j].buffer->handle(), y = b[i].bindings[j].buffer->handle();
        if (x == y) {
          same |= 1u << j;
        } else if (pack && (views[j] = pack->view(x, y))) {
          packed |= 1u << j;
        }
      }
      if (const Pipeline* q = pair_pipeline(*a[i].p, same, packed, packed ? pack->delta() : 0)) {
        record(*q, a[i].bindings.data(), b[i].bindings.data(), n, a[i].push.data(), uint32_t(a[i].push.size()),
               a[i].g[0], a[i].g[1], 2, a[i].label, views.data(), packed ? pack->buffer().handle() : VK_NULL_HANDLE);
        single_fetch_ += uint32_t(std::popcount(same | packed));
        continue;
      }
    }
    if (i < a.size()) replay(a[i]);
    if (i < b.size()) replay(b[i]);
  }
}

void Sequence::copy(const Buffer& src, VkDeviceSize src_off, const Buffer& dst, VkDeviceSize dst_off, VkDeviceSize bytes) {
  if (capture([=, this, &src, &dst] { copy(src, src_off, dst, dst_off, bytes); })) return;
  if (hazard(src.handle(), false) || hazard(dst.handle(), true)) barrier();
  touch(src.handle(), false);
  touch(dst.handle(), true);
  VkBufferCopy region{src_off, dst_off, bytes};
  ctx_.vk().vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), 1, &region);
}

void Sequence::copy(const Buffer& src, const Buffer& dst, const std::vector<VkBufferCopy>& regions) {
  if (regions.empty()) return;
  if (capture([this, &src, &dst, regions] { copy(src, dst, regions); })) return;
  if (hazard(src.handle(), false) || hazard(dst.handle(), true)) barrier();
  touch(src.handle(), false);
  touch(dst.handle(), true);
  ctx_.vk().vkCmdCopyBuffer(cb_, src.handle(), dst.handle(), uint32_t(regions.size()), regions.data());
}

void Sequence::fill(const Buffer& dst, uint32_t value, VkDeviceSize off, VkDeviceSize bytes) {
  if (capture([=, this, &dst] { fill(dst, value, off, bytes); })) return;
  if (hazard(dst.handle(), true)) barrier();
  touch(dst.handle(), true);
  ctx_.vk().vkCmdFillBuffer(cb_, dst.handle(), off, bytes, value);
}

void Sequence::update(const Buffer& dst, VkDeviceSize off, const void* data, VkDeviceSize bytes) {
  if (capturing_ >= 0) {
    const auto* p = static_cast<const uint8_t*>(data);
    std::vector<uint8_t> copy(p, p + bytes);
    capture([this, &dst, off, copy] { update(dst, off, copy.data(), copy.size()); });
    return;
  }
  if (hazard(dst.handle(), true)) barrier();
  touch(dst.handle(), true);
  ctx_.vk().vkCmdUpdateBuffer(cb_, dst.handle(), off, bytes, data);
}

void Sequence::gate(const Buffer& state) {
  if (!replayable_ || dispatches_ != 0 || capturing_ >= 0) throw Error("Sequence::gate: only first in a replayable recording");
  struct Push {
    uint32_t header;
  } push{kArgsHeader};
  const Pipeline& p = ctx_.pipelines().get(make_pipeline_desc(
      "step_gate", std::vector<VkDescriptorType>(3, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER), sizeof(Push), uint32_t(64)));
  gate_pipeline_ = &p;
  dispatch(p, {in(state), in(recorded_args_), out(live_args_)}, push, 8, 1, 1, "step_gate");
}

void Sequence::end() {
  if (capturing_ >= 0) throw Error("Sequence::end: a pair section is still open");
  const auto& vk = ctx_.vk();
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = kAccess;
  mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vk.vkCmdPipelineBarrier(cb_, kStages, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  VKSPEC_VK(vk.vkEndCommandBuffer(cb_));
  recording_ = false;
  if (replayable_) {
    args_[0] = uint32_t(args_.size()) - kArgsHeader;
    recorded_args_.upload(args_);
    live_args_.upload(args_);  // a recording submitted without its gate still runs
  }
}

void Sequence::submit(uint32_t copies) { submit(copies, VK_NULL_HANDLE, 0); }

void Sequence::submit(uint32_t copies, VkSemaphore timeline, uint64_t value) {
  const auto& vk = ctx_.vk();
  if (copies != 1 && !replayable_) throw Error("Sequence::submit: only a replayable sequence runs several copies");
  if (pending_) throw Error("Sequence::submit: the previous submission is still in flight");
  const std::vector<VkCommandBuffer> cbs(copies, cb_);
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = copies;
  si.pCommandBuffers = cbs.data();
  VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  if (timeline) {
    ti.signalSemaphoreValueCount = 1;
    ti.pSignalSemaphoreValues = &value;
    si.pNext = &ti;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &timeline;
  }
  VKSPEC_VK(vk.vkResetFences(ctx_.device(), 1, &fence_));
  ctx_.queue_submit(si, fence_);
  pending_ = true;
}

bool Sequence::ready() {
  if (!pending_) return true;
  const VkResult r = ctx_.vk().vkGetFenceStatus(ctx_.device(), fence_);
  if (r == VK_NOT_READY) return false;
  VKSPEC_VK(r);
  pending_ = false;
  return true;
}

void Sequence::wait() {
  if (!pending_) return;
  VKSPEC_VK(ctx_.vk().vkWaitForFences(ctx_.device(), 1, &fence_, VK_TRUE, UINT64_MAX));
  pending_ = false;
  ctx_.count_host_wait();
}

std::vector<DispatchTiming> Sequence::timings() const {
  std::vector<DispatchTiming> out;
  if (!queries_ || timed_ == 0) return out;
  std::vector<uint64_t> ts(timed_ + 1);
  VKSPEC_VK(ctx_.vk().vkGetQueryPoolResults(ctx_.device(), queries_, 0, timed_ + 1, ts.size() * 8, ts.data(), 8,
                                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  const double ns = ctx_.caps().timestamp_period_ns;
  for (uint32_t i = 0; i < timed_; ++i) out.push_back({labels_[i], double(ts[i + 1] - ts[i]) * ns * 1e-3});
  return out;
}

}  // namespace vkspec
