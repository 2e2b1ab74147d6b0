// The gate's activation in a gated MLP, act(gate) · up, chosen by the including shader's ACT
// constant: 0 SiLU (SwiGLU), 1 GELU through tanh (Hugging Face's gelu_pytorch_tanh, gelu_new),
// 2 exact GELU through erf (Hugging Face's gelu).

// erf(x) by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7); GLSL has no erf.
float erf_as(float x) {
  const float t = 1.0 / (1.0 + 0.3275911 * abs(x));
  const float p = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  return sign(x) * (1.0 - p * exp(-x * x));
}

float glu_act(float a) {
  if (ACT == 1) {
    // tanh saturates long before 10; the clamp keeps a tanh built from exp() away from inf / inf.
    const float u = 0.7978845608028654 * (a + 0.044715 * a * a * a);
    return 0.5 * a * (1.0 + tanh(clamp(u, -10.0, 10.0)));
  }
  if (ACT == 2) return 0.5 * a * (1.0 + erf_as(a * 0.7071067811865476));
  return a / (1.0 + exp(-a));
}
