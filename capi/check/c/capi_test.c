/* The C API from C: `capi_test misuse` checks the API's contract on bad pointers and lengths;
 * `capi_test batch LIST` runs each job of LIST (one a line) and prints what the API gave, in the
 * format `capi-check` prints the Rust API's results in, so that the two can be compared line by line:
 *
 *   events PATH LEN            the byte-range parser over the first LEN bytes ("all": the file)
 *   read PATH LEN BUF          the read-callback parser, a BUF-byte buffer, short reads
 *   catalog PATH LEN           mq_catalog over a byte-range parser
 *   kernels PATH               dequantize, quantize, vec_dot and matvec on the first 2-D tensor of
 *                              each type, from the file's own bytes
 *
 * Built with -fsanitize=address,undefined by `cargo xtask capi`: any out-of-bounds access or
 * undefined behaviour on either side of the API aborts the run. */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "miniquant.h"

static int failures = 0;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "capi_test: FAILED %s:%d: ", __FILE__, __LINE__);                           \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

/* ----- output in capi-check's format --------------------------------------------------------- */

static uint64_t fnv(const void *p, size_t n) {
  const uint8_t *b = p;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* Text as printable ASCII: other bytes (and '\\') as \xHH; long text as its length and hash. */
static void put_text(const uint8_t *t, size_t n) {
  if (n > 64) {
    printf("#%zu:%016" PRIx64, n, fnv(t, n));
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (t[i] > 0x20 && t[i] < 0x7f && t[i] != '\\')
      putchar(t[i]);
    else
      printf("\\x%02x", t[i]);
  }
}

static void put_event(const mq_event *e) {
  switch (e->kind) {
  case MQ_EVENT_HEADER:
    printf("header v=%u be=%u tensors=%" PRIu64 " metadata=%" PRIu64, e->header.version,
           e->header.big_endian, e->header.tensor_count, e->header.metadata_count);
    break;
  case MQ_EVENT_KEY:
    printf("key ");
    put_text(e->text, e->text_len);
    printf(" type=%d", e->value_type);
    break;
  case MQ_EVENT_SCALAR:
    printf("scalar type=%d bits=%" PRIx64, e->value_type, e->scalar.bits);
    break;
  case MQ_EVENT_SCALARS:
    printf("scalars type=%d n=%" PRIu64 " raw=%zu fnv=%016" PRIx64, e->value_type, e->len,
           e->raw_len, fnv(e->raw, e->raw_len));
    break;
  case MQ_EVENT_STRING:
    printf("string at=%" PRIu64 " len=%" PRIu64 " ", e->at, e->len);
    put_text(e->text, e->text_len);
    break;
  case MQ_EVENT_ARRAY_START:
    printf("array type=%d len=%" PRIu64, e->value_type, e->len);
    break;
  case MQ_EVENT_ARRAY_END:
    printf("array_end");
    break;
  case MQ_EVENT_TENSOR:
    printf("tensor ");
    put_text(e->text, e->text_len);
    printf(" type=%u dims=%u ne=%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 " offset=%" PRIu64
           " elements=%" PRIu64 " bytes=%" PRIu64,
           e->tensor.ggml_type, e->tensor.n_dims, e->tensor.ne[0], e->tensor.ne[1],
           e->tensor.ne[2], e->tensor.ne[3], e->tensor.offset, e->tensor.elements,
           e->tensor.bytes);
    break;
  case MQ_EVENT_END:
    printf("end align=%u data=%" PRIu64, e->data.alignment, e->data.data_offset);
    break;
  default:
    printf("unknown kind %d", e->kind);
    failures++;
  }
  printf(" @%" PRIu64 "\n", e->offset);
}

static void put_error(const mq_error *err) {
  printf("error %s limit=%s", mq_error_name(err->code), mq_limit_name(err->limit));
  if (err->has_offset)
    printf(" @%" PRIu64 "\n", err->offset);
  else
    printf(" @-\n");
}

/* ----- inputs -------------------------------------------------------------------------------- */

/* The last file read, kept for the next jobs on the same path. */
static char *cached_path = NULL;
static uint8_t *cached = NULL;
static size_t cached_len = 0;

static const uint8_t *load(const char *path, size_t *len) {
  if (cached_path == NULL || strcmp(cached_path, path) != 0) {
    free(cached);
    free(cached_path);
    cached = NULL;
    cached_len = 0;
    cached_path = strdup(path);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
      perror(path);
      exit(2);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* One spare byte, so that an empty file still has a non-NULL buffer. */
    cached = malloc((size_t)size + 1);
    if (cached == NULL || fread(cached, 1, (size_t)size, f) != (size_t)size) {
      fprintf(stderr, "%s: cannot read\n", path);
      exit(2);
    }
    fclose(f);
    cached_len = (size_t)size;
  }
  if (*len > cached_len)
    *len = cached_len;
  return cached;
}

/* A stream over bytes that gives fewer bytes than asked for, like a UART or an SD card driver. */
static const size_t READ_SIZES[7] = {1, 7, 61, 13, 200, 3, 97};
struct stream {
  const uint8_t *data;
  size_t len, at, reads;
};

static int read_short(void *ctx, uint8_t *buf, size_t len) {
  struct stream *s = ctx;
  size_t n = READ_SIZES[s->reads % 7];
  if (n > len)
    n = len;
  if (n > s->len - s->at)
    n = s->len - s->at;
  memcpy(buf, s->data + s->at, n);
  s->at += n;
  s->reads++;
  return (int)n;
}

/* ----- jobs ---------------------------------------------------------------------------------- */

static void run_parser(mq_parser *p) {
  mq_event e;
  mq_error err;
  uint64_t events = 0;
  for (;;) {
    int32_t rc = mq_parser_next(p, &e, &err);
    if (rc == MQ_OK) {
      put_event(&e);
      events++;
    } else if (rc == MQ_DONE) {
      printf("done events=%" PRIu64 "\n", events);
      EXPECT(mq_parser_next(p, &e, NULL) == MQ_DONE, "a finished parser must stay done");
      return;
    } else {
      EXPECT(rc == err.code && rc < 0, "return code %d, err.code %d", rc, err.code);
      put_error(&err);
      /* A failed parser keeps failing with the same error. */
      mq_error again;
      EXPECT(mq_parser_next(p, &e, &again) == rc && again.offset == err.offset,
             "a failed parser must repeat its error");
      return;
    }
  }
}

static void job_events(const char *path, size_t len) {
  const uint8_t *data = load(path, &len);
  mq_parser p;
  mq_error err;
  int32_t rc = mq_parser_init_slice(&p, data, len, NULL, &err);
  EXPECT(rc == MQ_OK, "init_slice: %s", mq_error_name(rc));
  run_parser(&p);
}

static void job_read(const char *path, size_t len, size_t buf_len) {
  const uint8_t *data = load(path, &len);
  struct stream s = {data, len, 0, 0};
  uint8_t *buf = malloc(buf_len);
  mq_parser p;
  mq_error err;
  int32_t rc = mq_parser_init_read(&p, read_short, &s, buf, buf_len, len, NULL, &err);
  if (rc != MQ_OK) {
    put_error(&err);
  } else {
    run_parser(&p);
  }
  free(buf);
}

static const char *const CATALOG_KEYS[4] = {"general.architecture", "general.alignment",
                                            "tokenizer.ggml.tokens", "no.such.key"};
static const char *const CATALOG_TENSORS[4] = {"token_embd.weight", "blk.0.attn_q.weight",
                                               "output_norm.weight", "no.such.tensor"};

static void job_catalog(const char *path, size_t len) {
  const uint8_t *data = load(path, &len);
  mq_parser p;
  mq_found_key keys[4];
  mq_found_tensor tensors[4];
  uint64_t data_offset = 0;
  mq_error err;
  EXPECT(mq_parser_init_slice(&p, data, len, NULL, NULL) == MQ_OK, "init_slice");
  int32_t rc = mq_catalog(&p, CATALOG_KEYS, 4, keys, CATALOG_TENSORS, 4, tensors, &data_offset,
                          &err);
  if (rc != MQ_OK) {
    put_error(&err);
    return;
  }
  for (int i = 0; i < 4; i++) {
    const mq_found_key *k = &keys[i];
    printf("found key %s: %d", CATALOG_KEYS[i], k->found);
    if (k->found)
      printf(" type=%d element=%d at=%" PRIu64 " len=%" PRIu64 " scalar=%d:%" PRIx64,
             k->value_type, k->element_type, k->value_offset, k->len, k->has_scalar,
             k->scalar.bits);
    printf("\n");
  }
  for (int i = 0; i < 4; i++) {
    const mq_found_tensor *t = &tensors[i];
    printf("found tensor %s: %d", CATALOG_TENSORS[i], t->found);
    if (t->found)
      printf(" type=%u dims=%u ne=%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 " offset=%" PRIu64
             " bytes=%" PRIu64,
             t->ggml_type, t->n_dims, t->ne[0], t->ne[1], t->ne[2], t->ne[3], t->offset,
             t->bytes);
    printf("\n");
  }
  printf("found data=%" PRIu64 "\n", data_offset);
}

/* The activations the kernel jobs use: exact in f32, the same formula as capi-check's. */
static float input(size_t i) {
  uint32_t h = (uint32_t)i * 2654435761u;
  return (float)((h >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void put_status(const char *what, int32_t rc) {
  printf("%s %s\n", what, mq_error_name(rc));
}

struct tensor {
  uint32_t type;
  uint64_t cols, rows, offset, bytes;
};

#define MAX_ROWS 8

static void run_kernels(const uint8_t *w, const struct tensor *t) {
  size_t cols = (size_t)t->cols;
  size_t rows = t->rows < MAX_ROWS ? (size_t)t->rows : MAX_ROWS;
  size_t row_bytes = 0;
  int32_t rc = mq_row_bytes(t->type, cols, &row_bytes, NULL);
  printf("kernels type=%u cols=%zu rows=%zu row_bytes=%zu\n", t->type, cols, rows, row_bytes);
  if (rc != MQ_OK) {
    put_status("row_bytes", rc);
    return;
  }
  float *x = malloc(cols * sizeof(float));
  float *deq = malloc(rows * cols * sizeof(float));
  for (size_t i = 0; i < cols; i++)
    x[i] = input(i);

  rc = mq_dequantize(t->type, w, rows * row_bytes, deq, rows * cols, NULL);
  if (rc == MQ_OK)
    printf("dequantize fnv=%016" PRIx64 "\n", fnv(deq, rows * cols * sizeof(float)));
  else
    put_status("dequantize", rc);

  /* Quantize the dequantized first row back (where the type has a reference quantizer). */
  uint8_t *requant = malloc(row_bytes + 1);
  rc = rc == MQ_OK ? mq_quantize(t->type, deq, cols, requant, row_bytes, NULL) : rc;
  if (rc == MQ_OK)
    printf("requantize fnv=%016" PRIx64 "\n", fnv(requant, row_bytes));
  else
    put_status("requantize", rc);
  free(requant);

  uint32_t vd = 0;
  size_t scratch_len = 0;
  rc = mq_vec_dot_type(t->type, &vd, NULL);
  if (rc == MQ_OK)
    rc = mq_matvec_scratch_bytes(t->type, cols, &scratch_len, NULL);
  if (rc != MQ_OK) {
    put_status("vec_dot_type", rc);
  } else {
    uint8_t *xq = malloc(scratch_len + 1);
    rc = mq_quantize(vd, x, cols, xq, scratch_len, NULL);
    if (rc == MQ_OK) {
      printf("activations type=%u fnv=%016" PRIx64 "\n", vd, fnv(xq, scratch_len));
      float dot = 0;
      rc = mq_vec_dot(t->type, w, row_bytes, xq, scratch_len, &dot, NULL);
      uint32_t bits;
      memcpy(&bits, &dot, 4);
      if (rc == MQ_OK)
        printf("vec_dot %08x\n", bits);
      else
        put_status("vec_dot", rc);
    } else {
      put_status("activations", rc);
    }
    float y[MAX_ROWS];
    rc = mq_matvec(t->type, w, rows * row_bytes, rows, cols, x, cols, xq, scratch_len, y, rows,
                   NULL);
    if (rc == MQ_OK) {
      printf("matvec");
      for (size_t r = 0; r < rows; r++) {
        uint32_t bits;
        memcpy(&bits, &y[r], 4);
        printf(" %08x", bits);
      }
      printf("\n");
    } else {
      put_status("matvec", rc);
    }
    free(xq);
  }
  free(x);
  free(deq);
}

static void job_kernels(const char *path) {
  size_t len = SIZE_MAX;
  const uint8_t *data = load(path, &len);
  mq_parser p;
  mq_event e;
  struct tensor seen[64];
  size_t n_seen = 0;
  uint64_t data_offset = 0;
  EXPECT(mq_parser_init_slice(&p, data, len, NULL, NULL) == MQ_OK, "init_slice");
  int32_t rc;
  while ((rc = mq_parser_next(&p, &e, NULL)) == MQ_OK) {
    if (e.kind == MQ_EVENT_TENSOR && e.tensor.n_dims == 2 && n_seen < 64) {
      int known = 0;
      for (size_t i = 0; i < n_seen; i++)
        known |= seen[i].type == e.tensor.ggml_type;
      if (!known)
        seen[n_seen++] = (struct tensor){e.tensor.ggml_type, e.tensor.ne[0], e.tensor.ne[1],
                                         e.tensor.offset, e.tensor.bytes};
    } else if (e.kind == MQ_EVENT_END) {
      data_offset = e.data.data_offset;
    }
  }
  if (rc != MQ_DONE) {
    put_status("parse", rc);
    return;
  }
  printf("level %s\n", mq_kernel_level());
  for (size_t i = 0; i < n_seen; i++)
    run_kernels(data + data_offset + seen[i].offset, &seen[i]);
}

static int batch(const char *list) {
  FILE *f = fopen(list, "r");
  if (f == NULL) {
    perror(list);
    return 2;
  }
  char line[4096], job[16], path[4000], len_s[32];
  size_t buf_len;
  while (fgets(line, sizeof line, f) != NULL) {
    line[strcspn(line, "\n")] = 0;
    printf("== %s\n", line);
    int n = sscanf(line, "%15s %3999s %31s %zu", job, path, len_s, &buf_len);
    size_t len = n >= 3 && strcmp(len_s, "all") != 0 ? (size_t)strtoull(len_s, NULL, 10) : SIZE_MAX;
    if (strcmp(job, "events") == 0 && n == 3)
      job_events(path, len);
    else if (strcmp(job, "read") == 0 && n == 4)
      job_read(path, len, buf_len);
    else if (strcmp(job, "catalog") == 0 && n == 3)
      job_catalog(path, len);
    else if (strcmp(job, "kernels") == 0 && n == 2)
      job_kernels(path);
    else {
      fprintf(stderr, "bad job: %s\n", line);
      return 2;
    }
  }
  fclose(f);
  free(cached);
  free(cached_path);
  return failures == 0 ? 0 : 1;
}

/* ----- the API's contract on misuse ---------------------------------------------------------- */

static const uint8_t HEADER[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 0,   0,   0,   0,   0, 0, 0, 0};

static int misuse(void) {
  mq_parser p;
  mq_event e;
  mq_error err;
  uint8_t buf[256];
  /* NULL where a pointer is required. */
  EXPECT(mq_parser_init_slice(NULL, HEADER, sizeof HEADER, NULL, &err) == MQ_E_NULL, "NULL p");
  EXPECT(err.code == MQ_E_NULL, "err.code %d", err.code);
  EXPECT(mq_parser_init_slice(&p, NULL, 5, NULL, NULL) == MQ_E_NULL, "NULL data, len 5");
  EXPECT(mq_parser_init_read(&p, NULL, NULL, buf, sizeof buf, MQ_LEN_UNKNOWN, NULL, NULL) ==
             MQ_E_NULL,
         "NULL read");
  EXPECT(mq_parser_init_read(&p, read_short, NULL, NULL, 256, MQ_LEN_UNKNOWN, NULL, NULL) ==
             MQ_E_NULL,
         "NULL buffer");
  EXPECT(mq_parser_init_read(&p, read_short, NULL, buf, 16, MQ_LEN_UNKNOWN, NULL, &err) ==
             MQ_E_BUFFER_TOO_SMALL,
         "16-byte buffer");
  /* An empty input is an error of the file (truncated magic), not of the call. */
  EXPECT(mq_parser_init_slice(&p, NULL, 0, NULL, NULL) == MQ_OK, "NULL data, len 0");
  EXPECT(mq_parser_next(&p, &e, &err) == MQ_E_TRUNCATED && err.has_offset && err.offset == 0,
         "empty input: %s", mq_error_name(err.code));
  /* A parser never initialised. */
  memset(&p, 0, sizeof p);
  EXPECT(mq_parser_next(&p, &e, &err) == MQ_E_NOT_INITIALISED, "zeroed parser");
  EXPECT(mq_parser_init_slice(&p, HEADER, sizeof HEADER, NULL, NULL) == MQ_OK, "init");
  EXPECT(mq_parser_next(&p, NULL, &err) == MQ_E_NULL, "NULL event");
  EXPECT(mq_parser_next(&p, &e, NULL) == MQ_OK && e.kind == MQ_EVENT_HEADER, "header event");
  EXPECT(mq_parser_next(&p, &e, NULL) == MQ_OK && e.kind == MQ_EVENT_END && e.offset == 24,
         "end event");
  EXPECT(mq_parser_next(&p, &e, &err) == MQ_DONE && err.code == MQ_OK, "done");

  /* A read callback that fails, and one that claims more bytes than asked for. */
  struct stream s = {HEADER, sizeof HEADER, 0, 0};
  EXPECT(mq_parser_init_read(&p, read_short, &s, buf, sizeof buf, sizeof HEADER, NULL, NULL) ==
             MQ_OK,
         "init_read");
  int32_t rc;
  int events = 0;
  while ((rc = mq_parser_next(&p, &e, NULL)) == MQ_OK)
    events++;
  EXPECT(rc == MQ_DONE && events == 2, "read parser: %s after %d events", mq_error_name(rc), events);

  /* Limits: 2^40 metadata pairs against max_metadata = 2^20, at byte 16. */
  static const uint8_t HUGE[] = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 0,   0,   0,   0,   0, 1, 0, 0};
  mq_limits limits = mq_limits_default();
  EXPECT(limits.max_metadata == 1u << 20, "default max_metadata %" PRIu64, limits.max_metadata);
  limits.max_metadata = 10;
  mq_parser_init_slice(&p, HUGE, sizeof HUGE, &limits, NULL);
  mq_parser_next(&p, &e, NULL);
  rc = mq_parser_next(&p, &e, &err);
  EXPECT(rc == MQ_E_LIMIT_EXCEEDED && err.limit == MQ_LIMIT_METADATA_COUNT && err.expected == 10 &&
             err.found == (1ull << 40) && err.offset == 16,
         "2^40 pairs: %s limit %s expected %" PRIu64, mq_error_name(rc), mq_limit_name(err.limit),
         err.expected);

  /* Kernels: NULL, misaligned, overlapping, wrong lengths, unknown types. */
  float f[64];
  uint8_t q[80];
  for (int i = 0; i < 64; i++)
    f[i] = input((size_t)i);
  size_t need = 0;
  EXPECT(mq_row_bytes(8, 64, &need, NULL) == MQ_OK && need == 68, "Q8_0 row bytes %zu", need);
  EXPECT(mq_row_bytes(8, 64, NULL, &err) == MQ_E_NULL, "NULL out");
  EXPECT(mq_row_bytes(8, 63, &need, &err) == MQ_E_PARTIAL_BLOCK, "63 Q8_0 values");
  EXPECT(mq_row_bytes(99, 64, &need, &err) == MQ_E_UNKNOWN_GGML_TYPE && err.found == 99,
         "type 99");
  EXPECT(mq_row_bytes(4, 64, &need, &err) == MQ_E_REMOVED_GGML_TYPE, "type 4");
  EXPECT(mq_quantize(8, f, 64, q, 68, &err) == MQ_OK, "quantize Q8_0");
  EXPECT(mq_quantize(8, f, 64, q, 67, &err) == MQ_E_LENGTH_MISMATCH && err.expected == 68 &&
             err.found == 67,
         "quantize into 67 bytes: %s", mq_error_name(err.code));
  EXPECT(mq_quantize(8, NULL, 64, q, 68, &err) == MQ_E_NULL, "quantize NULL src");
  EXPECT(mq_quantize(8, (const float *)(q + 1), 16, q + 40, 34, &err) == MQ_E_MISALIGNED_POINTER,
         "misaligned floats");
  EXPECT(mq_dequantize(8, q, 68, (float *)q, 17, &err) == MQ_E_OVERLAP, "dst over src");
  EXPECT(mq_dequantize(8, q, SIZE_MAX, f, 64, &err) == MQ_E_TOO_LONG, "SIZE_MAX bytes");
  EXPECT(mq_dequantize(8, q, 68, f, (SIZE_MAX / 4) + 1, &err) == MQ_E_TOO_LONG, "huge dst");
  EXPECT(mq_dequantize(8, q, 68, f, 64, &err) == MQ_OK, "dequantize");
  float dot = 0;
  EXPECT(mq_vec_dot(8, q, 68, q, 68, NULL, &err) == MQ_E_NULL, "vec_dot NULL out");
  EXPECT(mq_vec_dot(8, q, 68, q, 34, &dot, &err) == MQ_E_LENGTH_MISMATCH, "vec_dot 68 vs 34");
  EXPECT(mq_vec_dot(8, q, 68, q, 68, &dot, &err) == MQ_OK && dot > 0, "vec_dot");
  uint8_t scratch[34];
  float y[2];
  EXPECT(mq_matvec_scratch_bytes(8, 32, &need, NULL) == MQ_OK && need == 34, "scratch %zu", need);
  EXPECT(mq_matvec(8, q, 68, 2, 32, f, 32, scratch, 33, y, 2, &err) == MQ_E_LENGTH_MISMATCH,
         "scratch of 33");
  EXPECT(mq_matvec(8, q, 68, 2, 32, f, 32, scratch, 34, (float *)scratch, 2, &err) == MQ_E_OVERLAP,
         "y over scratch");
  EXPECT(mq_matvec(8, q, 68, 3, 32, f, 32, scratch, 34, y, 3, &err) == MQ_E_LENGTH_MISMATCH,
         "3 rows of 68 bytes");
  EXPECT(mq_matvec(8, q, 68, 2, 32, f, 32, scratch, 34, y, 2, &err) == MQ_OK, "matvec");
  EXPECT(mq_matvec(19, q, 68, 2, 32, f, 32, scratch, 34, y, 2, &err) < 0, "IQ1_S of 68 bytes");
  uint32_t vd;
  EXPECT(mq_vec_dot_type(9, &vd, &err) == MQ_E_UNSUPPORTED, "Q8_1 has no vec_dot");

  /* The catalog: too many names, a NULL name, overlapping outputs. */
  const char *names[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
  mq_found_key keys[9];
  mq_found_tensor tensors[2];
  mq_parser_init_slice(&p, HEADER, sizeof HEADER, NULL, NULL);
  EXPECT(mq_catalog(&p, names, 9, keys, NULL, 0, NULL, NULL, &err) == MQ_E_TOO_MANY_NAMES &&
             err.expected == MQ_CATALOG_MAX_KEYS,
         "9 keys");
  const char *with_null[2] = {"a", NULL};
  EXPECT(mq_catalog(&p, with_null, 2, keys, NULL, 0, NULL, NULL, &err) == MQ_E_NULL, "NULL name");
  const char *bad_utf8[1] = {"\xff"};
  EXPECT(mq_catalog(&p, bad_utf8, 1, keys, NULL, 0, NULL, NULL, &err) == MQ_E_NAME_NOT_UTF8,
         "non-UTF-8 name");
  EXPECT(mq_catalog(&p, names, 1, (mq_found_key *)tensors, names, 1, tensors, NULL, &err) ==
             MQ_E_OVERLAP,
         "overlapping outputs");
  uint64_t data_offset = 0;
  EXPECT(mq_catalog(&p, names, 2, keys, names, 2, tensors, &data_offset, &err) == MQ_OK &&
             !keys[0].found && !tensors[1].found && data_offset == 32,
         "catalog of an empty file: %s, data at %" PRIu64, mq_error_name(err.code), data_offset);

  printf("misuse: %s\n", failures == 0 ? "all checks passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "misuse") == 0)
    return misuse();
  if (argc == 3 && strcmp(argv[1], "batch") == 0)
    return batch(argv[2]);
  fprintf(stderr, "usage: capi_test misuse | capi_test batch JOBS\n");
  return 2;
}
