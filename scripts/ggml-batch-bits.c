// Does ggml's CPU matmul give a column the same bits whatever the batch it comes in?
//
// For each type: W (rows x cols, quantized by ggml from Gaussian data) times X (cols x n), once as
// one MUL_MAT with all n columns (ggml then takes tinyBLAS or its tiled K-quant kernel from n = 2
// or 8) and once per column alone (n = 1: a row of vec_dots). Prints, per type, how many of the
// rows x n outputs differ in their bits and the largest relative difference. One thread.
//
// Built and run by scripts/ggml-batch-bits.sh against the llama.cpp build of
// scripts/build-llama.sh; not part of CI (miniquant's own columns are held to matvec's bits by its
// tests).
#include "ggml-cpu.h"
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static double uniform(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static float gaussian(void) {
    return (float) (sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform()));
}

// y (rows x n, column-major by output column) = W x, computed by ggml on one thread.
static void mul_mat(enum ggml_type type, const void * w_data, size_t w_bytes, const float * x,
                    int rows, int cols, int n, float * y) {
    struct ggml_init_params params = {
        .mem_size = w_bytes + (size_t) cols * n * 4 + (size_t) rows * n * 4 + (64u << 20),
        .mem_buffer = NULL,
        .no_alloc = false,
    };
    struct ggml_context * ctx = ggml_init(params);
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, type, cols, rows);
    memcpy(w->data, w_data, w_bytes);
    struct ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, n);
    memcpy(a->data, x, (size_t) cols * n * 4);
    struct ggml_tensor * out = ggml_mul_mat(ctx, w, a);
    struct ggml_cgraph * graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(graph, out);
    if (ggml_graph_compute_with_ctx(ctx, graph, 1) != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "ggml_graph_compute failed\n");
        exit(1);
    }
    memcpy(y, out->data, (size_t) rows * n * 4);
    ggml_free(ctx);
}

int main(int argc, char ** argv) {
    const int rows = 64, cols = 2048;
    const int n = argc > 1 ? atoi(argv[1]) : 32;
    const enum ggml_type types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                    GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    float * wf = malloc((size_t) rows * cols * 4);
    float * x = malloc((size_t) cols * n * 4);
    float * batch = malloc((size_t) rows * n * 4);
    float * single = malloc((size_t) rows * 4);
    for (size_t i = 0; i < (size_t) rows * cols; i++) wf[i] = gaussian();
    for (size_t i = 0; i < (size_t) cols * n; i++) x[i] = gaussian();
    printf("ggml %s, W %d x %d, n = %d, one thread\n", ggml_version(), rows, cols, n);
    printf("| type | outputs whose bits differ (batch of n vs alone) | largest relative difference |\n");
    printf("|---|--:|--:|\n");
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const enum ggml_type type = types[t];
        const size_t w_bytes = ggml_row_size(type, cols) * rows;
        void * w = malloc(w_bytes);
        ggml_quantize_chunk(type, wf, w, 0, rows, cols, NULL);
        mul_mat(type, w, w_bytes, x, rows, cols, n, batch);
        int differ = 0;
        double worst = 0.0;
        for (int j = 0; j < n; j++) {
            mul_mat(type, w, w_bytes, x + (size_t) j * cols, rows, cols, 1, single);
            for (int r = 0; r < rows; r++) {
                const float b = batch[(size_t) j * rows + r], s = single[r];
                if (memcmp(&b, &s, 4) != 0) {
                    differ++;
                    const double rel = fabs((double) b - s) / fmax(fabs((double) s), 1e-30);
                    worst = rel > worst ? rel : worst;
                }
            }
        }
        printf("| %s | %d of %d | %.3g |\n", ggml_type_name(type), differ, rows * n, worst);
        free(w);
    }
    return 0;
}
