/* hello.c: the smallest vkspec program. Loads the bundled demo model with its two draft heads and
 * streams text from a prompt.   hello [MODELS_DIR] [PROMPT]   (VKSPEC_TOKENS: how many, 120) */
#include <stdio.h>
#include <stdlib.h>
#include <vkspec/vkspec.h>

static void print_text(const char* text, uint32_t length, void* user) {
  (void)user;
  fwrite(text, 1, length, stdout); /* a generated 0x00 byte included */
  fflush(stdout);
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "models";
  char verifier[1024], head1[1024], head2[1024];
  snprintf(verifier, sizeof verifier, "%s/verifier.gguf", dir);
  snprintf(head1, sizeof head1, "%s/head1", dir);
  snprintf(head2, sizeof head2, "%s/head2", dir);

  vkspec_runtime_desc rd;
  vkspec_runtime_desc_init(&rd); /* vkspec picks the device */
  vkspec_runtime* rt;
  if (vkspec_runtime_create(&rd, &rt) != VKSPEC_OK) return fprintf(stderr, "%s\n", vkspec_last_error(NULL)), 1;

  vkspec_model_desc md;
  vkspec_model_desc_init(&md);
  md.path = verifier, md.head1 = head1, md.head2 = head2;
  vkspec_model* model;
  if (vkspec_model_load(rt, &md, &model) != VKSPEC_OK) return fprintf(stderr, "%s\n", vkspec_last_error(rt)), 1;
  fputs(vkspec_model_warnings(model), stderr); /* what the load went on without, if anything */
  vkspec_context* ctx;
  if (vkspec_context_create(model, NULL, &ctx) != VKSPEC_OK) return fprintf(stderr, "%s\n", vkspec_last_error(model)), 1;

  vkspec_generation_params p;
  vkspec_generation_params_init(&p);
  p.prompt_text = argc > 2 ? argv[2] : "The kernel provides a simple interface for";
  p.max_tokens = getenv("VKSPEC_TOKENS") ? (uint32_t)atoi(getenv("VKSPEC_TOKENS")) : 120;
  p.strategy = VKSPEC_STRATEGY_MERGE; /* both heads' trees, verified in one pass */
  p.temperature = 0.7f, p.top_p = 0.9f, p.seed = 2;
  fputs(p.prompt_text, stdout);
  vkspec_status s = vkspec_generate(ctx, &p, NULL, print_text, NULL);
  if (s != VKSPEC_OK) fprintf(stderr, "\n%s: %s\n", vkspec_status_name(s), vkspec_last_error(ctx));
  puts("");

  vkspec_context_destroy(ctx); /* any order: each handle keeps what it needs alive */
  vkspec_model_destroy(model);
  vkspec_runtime_destroy(rt);
  return s == VKSPEC_OK ? 0 : 1;
}
