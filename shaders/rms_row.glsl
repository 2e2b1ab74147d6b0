// RMS_ROW(Y, yo, X, xo, W, wo, C, eps): Y[yo + i] = X[xo + i] * rsqrt(mean(X[xo ..]^2) + eps) * W[wo + i]
// for i < C, one workgroup walking the row; the sum of squares in reduce.glsl's fixed order.
// rmsnorm.comp and tree_commit.comp's normalizing gather both use it, so at the same workgroup
// size their rows are the same bits (the heads' features do not depend on which one ran). Every
// invocation of the workgroup must reach it (barriers); needs reduce.glsl.
#define RMS_ROW(Y, yo, X, xo, W, wo, C, eps)                                          \
  {                                                                                   \
    float ss_ = 0.0;                                                                  \
    for (uint i_ = gl_LocalInvocationID.x; i_ < (C); i_ += WG) ss_ += X[(xo) + i_] * X[(xo) + i_]; \
    const float scale_ = inversesqrt(wg_sum(ss_) / float(C) + (eps));                 \
    for (uint i_ = gl_LocalInvocationID.x; i_ < (C); i_ += WG)                        \
      Y[(yo) + i_] = X[(xo) + i_] * scale_ * W[(wo) + i_];                            \
  }
