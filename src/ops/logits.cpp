// softmax, argmax, topk: one workgroup per row of vocabulary logits.
#include <cassert>

#include "ops/common.hpp"

namespace vkspec {

using namespace ops;

void softmax(Sequence& seq, Mat x, Mat y, uint32_t T, uint32_t V, float inv_temp, KernelConfig cfg) {
  struct Push {
    uint32_t V, x_offset, x_stride, y_offset, y_stride;
    float inv_temp;
  } push{V, x.offset, x.stride, y.offset, y.stride, inv_temp};
  const Pipeline& p = simple_pipeline(seq.context(), "softmax", 2, sizeof(Push), cfg, row_reduction_workgroup(seq.context(), V, 3));
  seq.dispatch(p, {x.in(), y.out()}, push, T, 1, 1, "softmax");
}

void argmax(Sequence& seq, Mat x, const Buffer& out, Dyn out_offset, uint32_t T, uint32_t V, KernelConfig cfg) {
  struct Push {
    uint32_t V, x_offset, x_stride, o_offset, o_slot;
  } push{V, x.offset, x.stride, out_offset.base, out_offset.slot};
  const Pipeline& p = simple_pipeline(seq.context(), "argmax", 3, sizeof(Push), cfg, row_reduction_workgroup(seq.context(), V, 1));
  seq.dispatch(p, {x.in(), vkspec::out(out), out_offset.binding(*x.buf)}, push, T, 1, 1, "argmax");
}

void topk(Sequence& seq, Mat logits, uint32_t T, uint32_t V, uint32_t k, const Buffer& ids, const Buffer& logp,
          uint32_t o_offset, uint32_t o_stride, KernelConfig cfg) {
  assert(k >= 1 && k <= 32 && k <= V);
  struct Push {
    uint32_t V, k, x_offset, x_stride, o_offset, o_stride;
  } push{V, k, logits.offset, logits.stride, o_offset, o_stride};
  const Pipeline& p = simple_pipeline(seq.context(), "topk", 3, sizeof(Push), cfg, row_reduction_workgroup(seq.context(), V, k + 2));
  seq.dispatch(p, {logits.in(), out(ids), out(logp)}, push, T, 1, 1, "topk");
}

}  // namespace vkspec
