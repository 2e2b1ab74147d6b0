#version 450
// seq_tokens[count[0]] = info[slot]: appends the next root (the verifier's bonus token) after
// the accepted tokens, without a round trip through the host.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0, std430) readonly buffer Info { uint info[]; };
layout(set = 0, binding = 1, std430) readonly buffer Count { uint count[]; };
layout(set = 0, binding = 2, std430) writeonly buffer Seq { uint seq_tokens[]; };
layout(push_constant) uniform Push { uint slot; } pc;
void main() { seq_tokens[count[0]] = info[pc.slot]; }
