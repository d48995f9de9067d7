// llama.cpp's next-token logits for given token ids: the oracle the forward pass of
// miniquant::model is compared with (scripts/llama-logits.sh builds it against libllama; not
// part of CI, its outputs are committed as test expectations).
//
//   llama-logits MODEL -ids "1 2 3" [-n N] [-t THREADS] [-kv f32|f16] [-fa on|off]
//                [-one] [-margins] [-o LOGITS.f32] [-sample SAMPLE.txt]
//
// Evaluates the prompt ids (one batch, or one token at a time with -one), then generates N tokens
// greedily (argmax, lowest id on ties). Prints the generated ids on one line of stdout. With -o,
// writes the logits after the prompt and after each generated token: (N + 1) x n_vocab
// little-endian f32, in that order. With -margins, prints on stderr, for each of those N + 1
// positions, the gap between the largest and the second largest logit. With -sample, writes a
// sample of the logits after the prompt as text lines "id value", by id: the 64 largest and
// every 256th id (a large vocabulary's whole logits are too big to commit).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (v[i] > v[best]) best = i;
    }
    return best;
}

static float margin(const float *v, int n, int best) {
    float second = -1e30f;
    for (int i = 0; i < n; i++) {
        if (i != best && v[i] > second) second = v[i];
    }
    return v[best] - second;
}

enum { SAMPLE_TOP = 64, SAMPLE_STRIDE = 256 };

static int write_sample(const char *path, const float *v, int n) {
    char *keep = calloc((size_t)n, 1);
    if (!keep) return 1;
    for (int i = 0; i < n; i += SAMPLE_STRIDE) keep[i] = 1;
    for (int k = 0; k < SAMPLE_TOP && k < n; k++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (keep[i] != 2 && (best < 0 || v[i] > v[best])) best = i;
        }
        keep[best] = 2;
    }
    FILE *f = fopen(path, "w");
    if (!f) { free(keep); perror(path); return 1; }
    for (int i = 0; i < n; i++) {
        if (keep[i]) fprintf(f, "%d %.9g\n", i, v[i]);
    }
    free(keep);
    if (fclose(f)) { perror(path); return 1; }
    return 0;
}

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)data;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    const char *model_path = NULL, *ids_text = NULL, *out_path = NULL, *sample_path = NULL;
    int n_gen = 0, threads = 1, one = 0, flash = 0, margins = 0;
    enum ggml_type kv = GGML_TYPE_F32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-ids") && next) { ids_text = next; i++; }
        else if (!strcmp(a, "-n") && next) { n_gen = atoi(next); i++; }
        else if (!strcmp(a, "-t") && next) { threads = atoi(next); i++; }
        else if (!strcmp(a, "-o") && next) { out_path = next; i++; }
        else if (!strcmp(a, "-sample") && next) { sample_path = next; i++; }
        else if (!strcmp(a, "-kv") && next) { kv = strcmp(next, "f16") ? GGML_TYPE_F32 : GGML_TYPE_F16; i++; }
        else if (!strcmp(a, "-fa") && next) { flash = !strcmp(next, "on"); i++; }
        else if (!strcmp(a, "-one")) { one = 1; }
        else if (!strcmp(a, "-margins")) { margins = 1; }
        else if (!model_path && a[0] != '-') { model_path = a; }
        else { fprintf(stderr, "unknown argument %s\n", a); return 2; }
    }
    if (!model_path || !ids_text) {
        fprintf(stderr, "usage: llama-logits MODEL -ids \"1 2 3\" [-n N] [-t T] [-kv f32|f16] [-fa on|off] [-one] [-margins] [-o FILE] [-sample FILE]\n");
        return 2;
    }
    llama_token ids[4096];
    int n_prompt = 0;
    for (char *p = (char *)ids_text, *end; n_prompt < 4096; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        ids[n_prompt++] = (llama_token)v;
    }
    if (n_prompt == 0) { fprintf(stderr, "no prompt ids\n"); return 2; }

    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", model_path); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen + 16);
    cp.n_batch = cp.n_ubatch = (uint32_t)n_prompt;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = kv;
    cp.flash_attn_type = flash ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }

    FILE *out = NULL;
    if (out_path && !(out = fopen(out_path, "wb"))) { perror(out_path); return 1; }
    if (one) {
        for (int i = 0; i < n_prompt; i++) {
            if (llama_decode(ctx, llama_batch_get_one(&ids[i], 1))) { fprintf(stderr, "decode failed\n"); return 1; }
        }
    } else if (llama_decode(ctx, llama_batch_get_one(ids, n_prompt))) {
        fprintf(stderr, "decode failed\n");
        return 1;
    }
    for (int step = 0;; step++) {
        const float *logits = llama_get_logits_ith(ctx, -1);
        if (out && fwrite(logits, sizeof(float), (size_t)n_vocab, out) != (size_t)n_vocab) { perror(out_path); return 1; }
        if (step == 0 && sample_path && write_sample(sample_path, logits, n_vocab)) return 1;
        llama_token next = argmax(logits, n_vocab);
        if (margins) fprintf(stderr, step ? " %.3f" : "%.3f", margin(logits, n_vocab, next));
        if (step == n_gen) break;
        printf(step ? " %d" : "%d", next);
        if (llama_decode(ctx, llama_batch_get_one(&next, 1))) { fprintf(stderr, "decode failed\n"); return 1; }
    }
    printf("\n");
    if (margins) fprintf(stderr, "\n");
    if (out && fclose(out)) { perror(out_path); return 1; }
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
