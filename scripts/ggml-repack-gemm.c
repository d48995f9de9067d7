// ggml's repacked CPU matmul (the CPU backend's CPU_REPACK buffer type) beside its default-buffer
// matmul: speed and bits.
//
// `test-backend-ops` puts weights in the default CPU buffer, where ggml's MUL_MAT takes tinyBLAS,
// its tiled K-quant kernel or its vec_dot; the repacked GEMM/GEMV kernels (weights interleaved
// 8 rows at a time when the tensor is set, `ggml-cpu/repack.cpp`) only run when the weight tensor
// lives in the extra buffer type that the CPU registry hands out through
// `ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts")`. This program
// allocates W there (or in the default buffer) and runs one MUL_MAT graph of W (rows x cols,
// quantized by ggml) times X (cols x n, f32) on the CPU backend.
//
//   perf THREADS ROUNDS CASE...    CASE = TYPE:ROWSxCOLS:N, e.g. q4_0:2048x2048:32. Per case, the
//                                  default and the repack buffer alternated for ROUNDS rounds,
//                                  each round the best of as many calls as fit in ~0.15 s (3-30);
//                                  one line per buffer:
//                                  `GGML_BUF <type> <rows> <cols> <n> <threads> <buffer> <s>`
//                                  (best seconds per call) or `... <buffer> none` when ggml does
//                                  not repack that type on this CPU. GGML_REPACK_CPU_TIME set:
//                                  thread CPU time instead of wall time (THREADS must be 1).
//   bits ROWS COLS N TYPE...       W from Gaussian data quantized by ggml, X Gaussian: counts the
//                                  outputs of the repacked batch of N whose bits differ from the
//                                  repacked column alone (n = 1: its GEMV), from the default
//                                  buffer's column alone (its vec_dot) and from the default
//                                  buffer's batch; one thread.
//   run TYPE ROWS COLS N THREADS BUFFER W_FILE X_FILE Y_FILE
//                                  W_FILE: the rows in ggml's (and miniquant's) plain block layout;
//                                  X_FILE: N columns of COLS f32; writes Y_FILE: N columns of ROWS
//                                  f32. BUFFER is `repack` or `default`. For the bench's bits check
//                                  against miniquant's matvec.
//
// GGML_EXTRA_BUFFER=AMX: the CPU backend's AMX buffer type in place of CPU_REPACK (ggml's AMX
// int8 kernels: a build with them, `LLAMA_AMX=1 scripts/build-llama.sh`, on a CPU with AMX); its
// lines then say `amx` where they say `repack`, and `run` takes `amx` as its BUFFER. A case the
// extra buffer's kernels do not support (the backend's supports_op says so) gives `none`.
//
// Built and run by scripts/ggml-repack-gemm.sh (and by the matmul bench) against the llama.cpp
// build of scripts/build-llama.sh; not part of CI.
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

// Wall clock, or with GGML_REPACK_CPU_TIME set the calling thread's CPU time (one thread only:
// ggml then computes in the calling thread; steadier than wall time on a loaded machine).
static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void fail(const char * what) {
    fprintf(stderr, "ggml-repack-gemm: %s\n", what);
    exit(1);
}

// The extra buffer type the harness compares with the default one: CPU_REPACK, or the one
// GGML_EXTRA_BUFFER names (AMX), and the word its output lines use for it.
static const char * extra_name(void) {
    const char * name = getenv("GGML_EXTRA_BUFFER");
    return name && *name ? name : "CPU_REPACK";
}

static const char * extra_label(void) {
    if (strcmp(extra_name(), "CPU_REPACK") == 0) return "repack";
    return strcmp(extra_name(), "AMX") == 0 ? "amx" : "extra";
}

// That buffer type, found through the CPU registry's public proc address.
static ggml_backend_buffer_type_t extra_buft(void) {
    ggml_backend_reg_t reg = ggml_backend_cpu_reg();
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, 0);
    ggml_backend_dev_get_extra_bufts_t get_extra =
        (ggml_backend_dev_get_extra_bufts_t) ggml_backend_reg_get_proc_address(
            reg, "ggml_backend_dev_get_extra_bufts");
    if (!get_extra) fail("the CPU registry offers no ggml_backend_dev_get_extra_bufts");
    for (ggml_backend_buffer_type_t * b = get_extra(dev); b && *b; b++) {
        if (strcmp(ggml_backend_buft_name(*b), extra_name()) == 0) return *b;
    }
    fprintf(stderr, "ggml-repack-gemm: no %s buffer type in this build (CPU_REPACK: GGML_CPU_REPACK "
            "off? AMX: a build without __AMX_INT8__, or Linux refused the tile permission)\n",
            extra_name());
    exit(1);
    return NULL;
}

// One prepared MUL_MAT: W in the chosen buffer, X and Y in the default one.
struct matmul {
    ggml_backend_t backend;
    struct ggml_context * ctx_w, * ctx;
    ggml_backend_buffer_t buf_w, buf;
    struct ggml_tensor * w, * x, * y;
    struct ggml_cgraph * graph;
    int rows, n;
};

// Sets up W · X; returns 0 when the extra buffer (`extra`) is asked for and ggml has no kernel
// for the type and shape there on this CPU (nothing is left allocated then).
static int matmul_init(struct matmul * m, enum ggml_type type, int rows, int cols, int n,
                       int threads, int extra, const void * w_data, const float * x_data) {
    memset(m, 0, sizeof *m);
    m->rows = rows;
    m->n = n;
    struct ggml_init_params pw = {ggml_tensor_overhead() * 2, NULL, true};
    m->ctx_w = ggml_init(pw);
    m->w = ggml_new_tensor_2d(m->ctx_w, type, cols, rows);
    ggml_backend_buffer_type_t buft = extra ? extra_buft() : ggml_backend_cpu_buffer_type();
    m->buf_w = ggml_backend_alloc_ctx_tensors_from_buft(m->ctx_w, buft);
    if (!m->buf_w) fail("cannot allocate the weight buffer");
    struct ggml_init_params p = {ggml_tensor_overhead() * 8 + ggml_graph_overhead(), NULL, true};
    m->ctx = ggml_init(p);
    m->x = ggml_new_tensor_2d(m->ctx, GGML_TYPE_F32, cols, n);
    m->y = ggml_mul_mat(m->ctx, m->w, m->x);
    // The repack buffer's init_tensor finds no layout for the type (its set_tensor would then
    // dereference the missing traits), or the extra buffer's kernels refuse the op (the AMX ones
    // take some types and row counts only, and would abort on others).
    ggml_backend_dev_t dev = ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0);
    const int no_layout = strcmp(extra_name(), "CPU_REPACK") == 0 && m->w->extra == NULL;
    const int unsupported = extra && (no_layout || !ggml_backend_dev_supports_op(dev, m->y));
    if (unsupported) {
        ggml_free(m->ctx);
        ggml_backend_buffer_free(m->buf_w);
        ggml_free(m->ctx_w);
        return 0;
    }
    ggml_backend_tensor_set(m->w, w_data, 0, ggml_nbytes(m->w));
    m->graph = ggml_new_graph(m->ctx);
    ggml_build_forward_expand(m->graph, m->y);
    m->buf = ggml_backend_alloc_ctx_tensors_from_buft(m->ctx, ggml_backend_cpu_buffer_type());
    if (!m->buf) fail("cannot allocate the activation buffer");
    ggml_backend_tensor_set(m->x, x_data, 0, ggml_nbytes(m->x));
    m->backend = ggml_backend_cpu_init();
    if (!m->backend) fail("ggml_backend_cpu_init failed");
    ggml_backend_cpu_set_n_threads(m->backend, threads);
    return 1;
}

static void matmul_run(struct matmul * m) {
    if (ggml_backend_graph_compute(m->backend, m->graph) != GGML_STATUS_SUCCESS) {
        fail("ggml_backend_graph_compute failed");
    }
}

static void matmul_get(struct matmul * m, float * y) {
    ggml_backend_tensor_get(m->y, y, 0, (size_t) m->rows * m->n * 4);
}

static void matmul_free(struct matmul * m) {
    ggml_backend_free(m->backend);
    ggml_backend_buffer_free(m->buf);
    ggml_backend_buffer_free(m->buf_w);
    ggml_free(m->ctx);
    ggml_free(m->ctx_w);
}

static enum ggml_type type_named(const char * name) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * tn = ggml_type_name((enum ggml_type) t);
        if (tn && strcasecmp(tn, name) == 0 && ggml_get_type_traits((enum ggml_type) t)->blck_size) {
            return (enum ggml_type) t;
        }
    }
    fprintf(stderr, "ggml-repack-gemm: unknown type %s\n", name);
    exit(1);
}

// Weights from Gaussian rows quantized by ggml; the caller frees them.
static void * gaussian_weights(enum ggml_type type, int rows, int cols) {
    float * wf = malloc((size_t) rows * cols * 4);
    for (size_t i = 0; i < (size_t) rows * cols; i++) wf[i] = gaussian();
    void * w = malloc(ggml_row_size(type, cols) * rows);
    ggml_quantize_chunk(type, wf, w, 0, rows, cols, NULL);
    free(wf);
    return w;
}

static float * gaussian_floats(size_t count) {
    float * x = malloc(count * 4);
    for (size_t i = 0; i < count; i++) x[i] = gaussian();
    return x;
}

// Best seconds per call over as many calls as fit in ~0.15 s (at least 3, at most 30).
static double best_of(struct matmul * m) {
    double start = now();
    matmul_run(m);
    double first = now() - start, best = first;
    int runs = (int) (0.15 / (first > 1e-6 ? first : 1e-6));
    runs = runs < 3 ? 3 : runs > 30 ? 30 : runs;
    for (int i = 0; i < runs; i++) {
        start = now();
        matmul_run(m);
        double t = now() - start;
        best = t < best ? t : best;
    }
    return best;
}

static int perf(int argc, char ** argv) {
    if (argc < 3) fail("perf THREADS ROUNDS CASE...");
    const int threads = atoi(argv[0]), rounds = atoi(argv[1]);
    if (getenv("GGML_REPACK_CPU_TIME")) {
        if (threads != 1) fail("GGML_REPACK_CPU_TIME needs one thread");
        clock_id = CLOCK_THREAD_CPUTIME_ID;
    }
    for (int c = 2; c < argc; c++) {
        char name[32];
        int rows, cols, n;
        if (sscanf(argv[c], "%31[^:]:%dx%d:%d", name, &rows, &cols, &n) != 4) fail("bad case");
        const enum ggml_type type = type_named(name);
        void * w = gaussian_weights(type, rows, cols);
        float * x = gaussian_floats((size_t) cols * n);
        struct matmul plain, packed;
        matmul_init(&plain, type, rows, cols, n, threads, 0, w, x);
        const int has_repack = matmul_init(&packed, type, rows, cols, n, threads, 1, w, x);
        double best_plain = INFINITY, best_packed = INFINITY;
        for (int r = 0; r < rounds; r++) {
            double t = best_of(&plain);
            best_plain = t < best_plain ? t : best_plain;
            if (has_repack) {
                t = best_of(&packed);
                best_packed = t < best_packed ? t : best_packed;
            }
        }
        const char * tn = ggml_type_name(type);
        printf("GGML_BUF %s %d %d %d %d default %.6e\n", tn, rows, cols, n, threads, best_plain);
        if (has_repack) {
            printf("GGML_BUF %s %d %d %d %d %s %.6e\n", tn, rows, cols, n, threads, extra_label(),
                   best_packed);
            matmul_free(&packed);
        } else {
            printf("GGML_BUF %s %d %d %d %d %s none\n", tn, rows, cols, n, threads, extra_label());
        }
        fflush(stdout);
        matmul_free(&plain);
        free(w);
        free(x);
    }
    return 0;
}

// Outputs of `a` whose bits differ from `b`, and the largest relative difference among them.
static int differ(const float * a, const float * b, size_t count, double * worst) {
    int d = 0;
    for (size_t i = 0; i < count; i++) {
        if (memcmp(&a[i], &b[i], 4) != 0) {
            d++;
            const double rel = fabs((double) a[i] - b[i]) / fmax(fabs((double) b[i]), 1e-30);
            *worst = rel > *worst ? rel : *worst;
        }
    }
    return d;
}

static void compute(enum ggml_type type, int rows, int cols, int n, int repack, const void * w,
                    const float * x, float * y) {
    struct matmul m;
    if (!matmul_init(&m, type, rows, cols, n, 1, repack, w, x)) fail("no repack for this type");
    matmul_run(&m);
    matmul_get(&m, y);
    matmul_free(&m);
}

static int bits(int argc, char ** argv) {
    if (argc < 4) fail("bits ROWS COLS N TYPE...");
    const int rows = atoi(argv[0]), cols = atoi(argv[1]), n = atoi(argv[2]);
    printf("ggml %s, W %d x %d, n = %d, one thread; outputs whose bits differ from the %s "
           "buffer's batch (largest relative difference)\n",
           ggml_version(), rows, cols, n, extra_name());
    printf("| type | %s buffer, column alone | default buffer, column alone (vec_dot) | "
           "default buffer, same batch |\n|---|--:|--:|--:|\n", extra_name());
    for (int t = 3; t < argc; t++) {
        const enum ggml_type type = type_named(argv[t]);
        void * w = gaussian_weights(type, rows, cols);
        float * x = gaussian_floats((size_t) cols * n);
        float * batch = malloc((size_t) rows * n * 4), * other = malloc((size_t) rows * n * 4);
        struct matmul probe;
        if (!matmul_init(&probe, type, rows, cols, n, 1, 1, w, x)) {
            printf("| %s | no %s kernel on this CPU | | |\n", ggml_type_name(type), extra_name());
            free(w), free(x), free(batch), free(other);
            continue;
        }
        matmul_run(&probe);
        matmul_get(&probe, batch);
        matmul_free(&probe);
        int d_alone = 0, d_vec = 0, d_plain;
        double w_alone = 0, w_vec = 0, w_plain = 0;
        for (int j = 0; j < n; j++) {
            const float * xj = x + (size_t) j * cols;
            compute(type, rows, cols, 1, 1, w, xj, other);
            d_alone += differ(batch + (size_t) j * rows, other, rows, &w_alone);
            compute(type, rows, cols, 1, 0, w, xj, other);
            d_vec += differ(batch + (size_t) j * rows, other, rows, &w_vec);
        }
        compute(type, rows, cols, n, 0, w, x, other);
        d_plain = differ(batch, other, (size_t) rows * n, &w_plain);
        const int total = rows * n;
        printf("| %s | %d of %d (%.3g) | %d of %d (%.3g) | %d of %d (%.3g) |\n",
               ggml_type_name(type), d_alone, total, w_alone, d_vec, total, w_vec, d_plain, total,
               w_plain);
        fflush(stdout);
        free(w), free(x), free(batch), free(other);
    }
    return 0;
}

static void * read_file(const char * path, size_t bytes) {
    FILE * f = fopen(path, "rb");
    if (!f) fail("cannot open an input file");
    void * data = malloc(bytes);
    if (fread(data, 1, bytes, f) != bytes) fail("input file shorter than its shape");
    fclose(f);
    return data;
}

static int run(int argc, char ** argv) {
    if (argc != 9) fail("run TYPE ROWS COLS N THREADS BUFFER W_FILE X_FILE Y_FILE");
    const enum ggml_type type = type_named(argv[0]);
    const int rows = atoi(argv[1]), cols = atoi(argv[2]), n = atoi(argv[3]),
              threads = atoi(argv[4]);
    const int repack = strcmp(argv[5], "default") != 0;
    void * w = read_file(argv[6], ggml_row_size(type, cols) * rows);
    float * x = read_file(argv[7], (size_t) cols * n * 4);
    float * y = malloc((size_t) rows * n * 4);
    struct matmul m;
    if (!matmul_init(&m, type, rows, cols, n, threads, repack, w, x)) {
        printf("none\n");
        return 0;
    }
    matmul_run(&m);
    matmul_get(&m, y);
    matmul_free(&m);
    FILE * f = fopen(argv[8], "wb");
    if (!f || fwrite(y, 4, (size_t) rows * n, f) != (size_t) rows * n || fclose(f) != 0) {
        fail("cannot write the output file");
    }
    printf("ok\n");
    return 0;
}

int main(int argc, char ** argv) {
    ggml_cpu_init();
    if (argc > 1 && strcmp(argv[1], "perf") == 0) return perf(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "bits") == 0) return bits(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "run") == 0) return run(argc - 2, argv + 2);
    fail("usage: perf THREADS ROUNDS CASE... | bits ROWS COLS N TYPE... | run ... (see the source)");
    return 1;
}
