// Link support for ggml's quantization sources compiled on their own, outside ggml's build.
//
// ggml-quants.c and ggml-cpu/quants.c (and, on x86_64, ggml-cpu/vec.cpp) expect a handful of
// symbols that ggml.c and ggml-cpu.c normally provide. This file supplies them, a one-time
// initialisation of the lookup tables and IQ search grids, and row loops over ggml's own scalar
// conversions for the plain float types (ggml.c itself is not compiled: it drags in the whole
// graph library).

#define GGML_COMMON_DECL_C
#include "ggml-common.h"

#include "ggml-impl.h"
#include "ggml-quants.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

// ggml-cpu.c owns this table; the CPU sources read it when the target has no F16C.
float ggml_table_f32_f16[1 << 16];

void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml abort at %s:%d: ", file, line);
    va_list args;
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

// Block geometry, needed by the imatrix quantizers (`ggml_row_size`) and by error messages.
static int oracle_block_geometry(enum ggml_type type, size_t * bytes, int64_t * elements) {
#define OR_BLOCK(t, block, n) case t: *bytes = sizeof(block); *elements = (n); return 1;
    switch (type) {
        OR_BLOCK(GGML_TYPE_F32, float, 1)
        OR_BLOCK(GGML_TYPE_F16, ggml_half, 1)
        OR_BLOCK(GGML_TYPE_BF16, ggml_bf16_t, 1)
        OR_BLOCK(GGML_TYPE_F64, double, 1)
        OR_BLOCK(GGML_TYPE_I8, int8_t, 1)
        OR_BLOCK(GGML_TYPE_I16, int16_t, 1)
        OR_BLOCK(GGML_TYPE_I32, int32_t, 1)
        OR_BLOCK(GGML_TYPE_I64, int64_t, 1)
        OR_BLOCK(GGML_TYPE_Q4_0, block_q4_0, QK4_0)
        OR_BLOCK(GGML_TYPE_Q4_1, block_q4_1, QK4_1)
        OR_BLOCK(GGML_TYPE_Q5_0, block_q5_0, QK5_0)
        OR_BLOCK(GGML_TYPE_Q5_1, block_q5_1, QK5_1)
        OR_BLOCK(GGML_TYPE_Q8_0, block_q8_0, QK8_0)
        OR_BLOCK(GGML_TYPE_Q8_1, block_q8_1, QK8_1)
        OR_BLOCK(GGML_TYPE_Q2_K, block_q2_K, QK_K)
        OR_BLOCK(GGML_TYPE_Q3_K, block_q3_K, QK_K)
        OR_BLOCK(GGML_TYPE_Q4_K, block_q4_K, QK_K)
        OR_BLOCK(GGML_TYPE_Q5_K, block_q5_K, QK_K)
        OR_BLOCK(GGML_TYPE_Q6_K, block_q6_K, QK_K)
        OR_BLOCK(GGML_TYPE_Q8_K, block_q8_K, QK_K)
        OR_BLOCK(GGML_TYPE_IQ2_XXS, block_iq2_xxs, QK_K)
        OR_BLOCK(GGML_TYPE_IQ2_XS, block_iq2_xs, QK_K)
        OR_BLOCK(GGML_TYPE_IQ3_XXS, block_iq3_xxs, QK_K)
        OR_BLOCK(GGML_TYPE_IQ1_S, block_iq1_s, QK_K)
        OR_BLOCK(GGML_TYPE_IQ4_NL, block_iq4_nl, QK4_NL)
        OR_BLOCK(GGML_TYPE_IQ3_S, block_iq3_s, QK_K)
        OR_BLOCK(GGML_TYPE_IQ2_S, block_iq2_s, QK_K)
        OR_BLOCK(GGML_TYPE_IQ4_XS, block_iq4_xs, QK_K)
        OR_BLOCK(GGML_TYPE_IQ1_M, block_iq1_m, QK_K)
        OR_BLOCK(GGML_TYPE_TQ1_0, block_tq1_0, QK_K)
        OR_BLOCK(GGML_TYPE_TQ2_0, block_tq2_0, QK_K)
        OR_BLOCK(GGML_TYPE_MXFP4, block_mxfp4, QK_MXFP4)
        OR_BLOCK(GGML_TYPE_NVFP4, block_nvfp4, QK_NVFP4)
        OR_BLOCK(GGML_TYPE_Q1_0, block_q1_0, QK1_0)
        OR_BLOCK(GGML_TYPE_Q2_0, block_q2_0, QK2_0)
        default: return 0;
    }
#undef OR_BLOCK
}

size_t ggml_type_size(enum ggml_type type) {
    size_t bytes;
    int64_t elements;
    if (!oracle_block_geometry(type, &bytes, &elements)) {
        ggml_abort(__FILE__, __LINE__, "oracle shim: no geometry for ggml type %d", (int) type);
    }
    return bytes;
}

int64_t ggml_blck_size(enum ggml_type type) {
    size_t bytes;
    int64_t elements;
    if (!oracle_block_geometry(type, &bytes, &elements)) {
        ggml_abort(__FILE__, __LINE__, "oracle shim: no geometry for ggml type %d", (int) type);
    }
    return elements;
}

size_t ggml_row_size(enum ggml_type type, int64_t ne) {
    return ggml_type_size(type) * (size_t) (ne / ggml_blck_size(type));
}

const char * ggml_type_name(enum ggml_type type) {
    static char name[32];
    snprintf(name, sizeof(name), "ggml type %d", (int) type);
    return name;
}

// Fills the fp16 table the way ggml_cpu_init does. Not thread-safe: the Rust side calls it once,
// before any other function.
void miniquant_oracle_init(void) {
    for (uint32_t i = 0; i < (1u << 16); ++i) {
        ggml_table_f32_f16[i] = GGML_FP16_TO_FP32((ggml_fp16_t) i);
    }
}

// Builds the search grids of the IQ quantizers that use them (slow: seconds), as
// ggml_quantize_init does. `type` is a ggml type code. Not thread-safe: called under a Rust `Once`.
void miniquant_oracle_init_iq_grids(int type) {
    switch (type) {
        case GGML_TYPE_IQ2_XXS:
        case GGML_TYPE_IQ2_XS:
        case GGML_TYPE_IQ2_S:
        case GGML_TYPE_IQ1_S:
        case GGML_TYPE_IQ1_M:
            iq2xs_init_impl((enum ggml_type) type);
            break;
        case GGML_TYPE_IQ3_XXS:
            iq3xs_init_impl(256);
            break;
        case GGML_TYPE_IQ3_S:
            iq3xs_init_impl(512);
            break;
        default:
            break;
    }
}

// The float rows of ggml.c's type traits (from_float_ref / to_float), over ggml-impl.h's conversions.
void miniquant_oracle_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = GGML_FP32_TO_FP16(x[i]);
    }
}

void miniquant_oracle_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = GGML_FP16_TO_FP32(x[i]);
    }
}

void miniquant_oracle_fp32_to_bf16_row(const float * x, ggml_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = GGML_FP32_TO_BF16(x[i]);
    }
}

void miniquant_oracle_bf16_to_fp32_row(const ggml_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        y[i] = GGML_BF16_TO_FP32(x[i]);
    }
}
