/* npk_npy: NumPy .npy reader / writer for npukit's generated projects.  See npk_npy.h. */
#include "npk_npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NPK_HEADER_MAX 4096 /* longest header read; NumPy's own are 128 bytes for <= 6 dims */
#define NPK_DESCR_MAX 32

typedef struct {
  npk_dtype dtype;
  const char *descr;
  const char *name;
  size_t size;
} npk_dtype_info;

static const npk_dtype_info NPK_DTYPES[] = {
    {NPK_F32, "<f4", "float32", 4}, {NPK_F16, "<f2", "float16", 2}, {NPK_I8, "|i1", "int8", 1},
    {NPK_U8, "|u1", "uint8", 1},    {NPK_I16, "<i2", "int16", 2},   {NPK_I32, "<i4", "int32", 4},
    {NPK_I64, "<i8", "int64", 8},   {NPK_BOOL, "|b1", "bool", 1},
};
#define NPK_N_DTYPES (sizeof NPK_DTYPES / sizeof NPK_DTYPES[0])

/* Names of a few more dtypes, only to describe what a file holds when it is not what we expect. */
static const char *const NPK_OTHER_NAMES[][2] = {
    {"<f8", "float64"}, {"<u2", "uint16"}, {"<u4", "uint32"}, {"<u8", "uint64"}, {"<c8", "complex64"},
};

static const npk_dtype_info *dtype_info(npk_dtype dtype) {
  for (size_t i = 0; i < NPK_N_DTYPES; i++) {
    if (NPK_DTYPES[i].dtype == dtype) return &NPK_DTYPES[i];
  }
  return NULL;
}

size_t npk_dtype_size(npk_dtype dtype) {
  const npk_dtype_info *info = dtype_info(dtype);
  return info ? info->size : 0;
}

const char *npk_dtype_descr(npk_dtype dtype) {
  const npk_dtype_info *info = dtype_info(dtype);
  return info ? info->descr : "?";
}

const char *npk_dtype_name(npk_dtype dtype) {
  const npk_dtype_info *info = dtype_info(dtype);
  return info ? info->name : "?";
}

static int fail(char *err, size_t errlen, int code, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

static int host_is_little_endian(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

/* "(1, 3, 8, 8)", "(5,)" or "()": the way NumPy prints a shape. */
static void format_shape(char *out, size_t outlen, int ndim, const size_t *shape) {
  size_t used = 0;
  int n = snprintf(out, outlen, "(");
  used = n > 0 ? (size_t)n : 0;
  for (int i = 0; i < ndim && used < outlen; i++) {
    n = snprintf(out + used, outlen - used, i ? ", %lu" : "%lu", (unsigned long)shape[i]);
    used += n > 0 ? (size_t)n : 0;
  }
  if (used < outlen) snprintf(out + used, outlen - used, ndim == 1 ? ",)" : ")");
}

/* Does the .npy descr string name dtype?  One-byte types accept any byte-order mark. */
static int descr_matches(const char *descr, npk_dtype dtype) {
  const npk_dtype_info *info = dtype_info(dtype);
  if (!info) return 0;
  if (strcmp(descr, info->descr) == 0) return 1;
  if (info->size == 1 && strlen(descr) == 3 && strchr("|<>=", descr[0]) && descr[0] != '\0') {
    return strcmp(descr + 1, info->descr + 1) == 0;
  }
  return 0;
}

static const char *descr_name(const char *descr) {
  for (size_t i = 0; i < NPK_N_DTYPES; i++) {
    if (descr_matches(descr, NPK_DTYPES[i].dtype)) return NPK_DTYPES[i].name;
  }
  for (size_t i = 0; i < sizeof NPK_OTHER_NAMES / sizeof NPK_OTHER_NAMES[0]; i++) {
    if (strcmp(descr, NPK_OTHER_NAMES[i][0]) == 0) return NPK_OTHER_NAMES[i][1];
  }
  return NULL;
}

/* ---- header parsing: the Python dict literal NumPy writes ----------------------------------- */

typedef struct {
  const char *s;
  size_t n, i;
  const char *why;    /* what went wrong, for the message */
  const char *detail; /* the key it went wrong at, or "" */
} npk_cursor;

typedef struct {
  char descr[NPK_DESCR_MAX];
  int fortran_order;
  int ndim;
  size_t shape[NPK_NPY_MAX_DIMS];
  char key[32]; /* the key being parsed */
} npk_header;

static void skip_ws(npk_cursor *c) {
  while (c->i < c->n && strchr(" \t\r\n", c->s[c->i]) && c->s[c->i] != '\0') c->i++;
}

static int peek(npk_cursor *c) { return c->i < c->n ? (unsigned char)c->s[c->i] : -1; }

static int expect(npk_cursor *c, char ch, const char *why) {
  skip_ws(c);
  if (peek(c) != (unsigned char)ch) {
    c->why = why;
    return 0;
  }
  c->i++;
  return 1;
}

static int parse_string(npk_cursor *c, char *out, size_t outlen) {
  skip_ws(c);
  int quote = peek(c);
  if (quote != '\'' && quote != '"') {
    c->why = "expected a quoted string";
    return 0;
  }
  c->i++;
  size_t len = 0;
  while (c->i < c->n && c->s[c->i] != quote) {
    if (c->s[c->i] == '\\') {
      c->why = "escapes in strings are not supported";
      return 0;
    }
    if (len + 1 >= outlen) {
      c->why = "string too long";
      return 0;
    }
    out[len++] = c->s[c->i++];
  }
  if (c->i >= c->n) {
    c->why = "unterminated string";
    return 0;
  }
  c->i++;
  out[len] = '\0';
  return 1;
}

static int parse_bool(npk_cursor *c, int *value) {
  skip_ws(c);
  if (c->n - c->i >= 4 && memcmp(c->s + c->i, "True", 4) == 0) {
    c->i += 4;
    *value = 1;
    return 1;
  }
  if (c->n - c->i >= 5 && memcmp(c->s + c->i, "False", 5) == 0) {
    c->i += 5;
    *value = 0;
    return 1;
  }
  c->why = "fortran_order must be True or False";
  return 0;
}

static int parse_shape(npk_cursor *c, npk_header *h) {
  if (!expect(c, '(', "shape must be a tuple")) return 0;
  h->ndim = 0;
  for (;;) {
    skip_ws(c);
    if (peek(c) == ')') break;
    if (peek(c) < '0' || peek(c) > '9') {
      c->why = "shape must hold non-negative integers";
      return 0;
    }
    size_t v = 0;
    while (peek(c) >= '0' && peek(c) <= '9') {
      size_t digit = (size_t)(peek(c) - '0');
      if (v > (SIZE_MAX - digit) / 10) {
        c->why = "a dimension is too large for this machine";
        return 0;
      }
      v = v * 10 + digit;
      c->i++;
    }
    if (peek(c) == 'L') c->i++; /* written by Python 2 */
    if (h->ndim == NPK_NPY_MAX_DIMS) {
      c->why = "too many dimensions";
      return 0;
    }
    h->shape[h->ndim++] = v;
    skip_ws(c);
    if (peek(c) == ',') {
      c->i++;
      continue;
    }
    if (peek(c) != ')') {
      c->why = "expected ',' or ')' in shape";
      return 0;
    }
  }
  c->i++;
  return 1;
}

static int parse_header(npk_cursor *c, npk_header *h) {
  int seen_descr = 0, seen_fortran = 0, seen_shape = 0;
  char *key = h->key;
  if (!expect(c, '{', "header must be a dict")) return 0;
  for (;;) {
    skip_ws(c);
    if (peek(c) == '}') break;
    skip_ws(c);
    size_t key_at = c->i;
    if (!parse_string(c, key, sizeof h->key)) return 0;
    c->detail = key;
    if (!expect(c, ':', "expected ':' after a key")) return 0;
    if (strcmp(key, "descr") == 0 && !seen_descr) {
      seen_descr = 1;
      skip_ws(c);
      if (peek(c) != '\'' && peek(c) != '"') {
        c->why = "only simple dtypes are supported, not structured ones";
        return 0;
      }
      if (!parse_string(c, h->descr, sizeof h->descr)) return 0;
    } else if (strcmp(key, "fortran_order") == 0 && !seen_fortran) {
      seen_fortran = 1;
      if (!parse_bool(c, &h->fortran_order)) return 0;
    } else if (strcmp(key, "shape") == 0 && !seen_shape) {
      seen_shape = 1;
      if (!parse_shape(c, h)) return 0;
    } else {
      c->i = key_at;
      c->why = "unknown or repeated key";
      return 0;
    }
    skip_ws(c);
    if (peek(c) == ',') {
      c->i++;
      continue;
    }
    if (peek(c) != '}') {
      c->why = "expected ',' or '}'";
      return 0;
    }
  }
  c->i++;
  if (!(seen_descr && seen_fortran && seen_shape)) {
    c->detail = "";
    c->why = "the keys 'descr', 'fortran_order' and 'shape' are required";
    return 0;
  }
  skip_ws(c);
  if (c->i != c->n) {
    c->why = "text after the dict";
    return 0;
  }
  return 1;
}

/* ---- reading -------------------------------------------------------------------------------- */

static int read_header(FILE *f, const char *path, npk_header *h, char *err, size_t errlen) {
  static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  unsigned char pre[12];
  char text[NPK_HEADER_MAX];
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, magic, 6) != 0) {
    return fail(err, errlen, NPK_NPY_EFORMAT, "%s: not a .npy file (no \\x93NUMPY magic)", path);
  }
  int major = pre[6], minor = pre[7];
  size_t hlen;
  if (major == 1 && minor == 0) {
    if (fread(pre + 8, 1, 2, f) != 2) goto truncated;
    hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (fread(pre + 8, 1, 4, f) != 4) goto truncated;
    uint32_t v = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    if (v >= NPK_HEADER_MAX) {
      return fail(err, errlen, NPK_NPY_EFORMAT, "%s: .npy header of %lu bytes is longer than %d", path,
                  (unsigned long)v, NPK_HEADER_MAX - 1);
    }
    hlen = v;
  } else {
    return fail(err, errlen, NPK_NPY_EFORMAT, "%s: .npy format version %d.%d is not supported (1.0, 2.0, 3.0 are)",
                path, major, minor);
  }
  if (hlen >= NPK_HEADER_MAX) {
    return fail(err, errlen, NPK_NPY_EFORMAT, "%s: .npy header of %lu bytes is longer than %d", path,
                (unsigned long)hlen, NPK_HEADER_MAX - 1);
  }
  if (fread(text, 1, hlen, f) != hlen) goto truncated;
  text[hlen] = '\0';
  npk_cursor c = {text, hlen, 0, "", ""};
  memset(h, 0, sizeof *h);
  if (!parse_header(&c, h)) {
    return fail(err, errlen, NPK_NPY_EFORMAT, "%s: malformed .npy header at byte %lu%s%s%s: %s", path,
                (unsigned long)c.i, *c.detail ? " (key '" : "", c.detail, *c.detail ? "')" : "", c.why);
  }
  return NPK_NPY_OK;
truncated:
  return fail(err, errlen, NPK_NPY_EFORMAT, "%s: truncated .npy header", path);
}

static int element_count(int ndim, const size_t *shape, size_t itemsize, size_t *bytes) {
  size_t n = itemsize;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] != 0 && n > SIZE_MAX / shape[i]) return 0;
    n *= shape[i];
  }
  *bytes = n;
  return 1;
}

int npk_npy_read(const char *path, npk_dtype dtype, int ndim, const size_t *shape, void *data,
                 size_t nbytes, char *err, size_t errlen) {
  char want_shape[160], got_shape[160];
  size_t want_bytes;
  npk_header h;
  const npk_dtype_info *info = dtype_info(dtype);
  if (!host_is_little_endian()) {
    return fail(err, errlen, NPK_NPY_EARG, "%s: npk_npy supports little-endian machines only", path);
  }
  if (!info || ndim < 0 || ndim > NPK_NPY_MAX_DIMS || (ndim > 0 && !shape) ||
      !element_count(ndim, shape, info->size, &want_bytes) || want_bytes != nbytes) {
    return fail(err, errlen, NPK_NPY_EARG, "%s: the caller's buffer (%lu bytes) does not match dtype and shape",
                path, (unsigned long)nbytes);
  }
  FILE *f = fopen(path, "rb");
  if (!f) return fail(err, errlen, NPK_NPY_EIO, "%s: cannot open for reading: %s", path, strerror(errno));
  int rc = read_header(f, path, &h, err, errlen);
  if (rc != NPK_NPY_OK) goto done;
  int same_shape = h.ndim == ndim;
  for (int i = 0; same_shape && i < ndim; i++) same_shape = h.shape[i] == shape[i];
  if (!descr_matches(h.descr, dtype) || !same_shape) {
    const char *found = descr_name(h.descr);
    format_shape(want_shape, sizeof want_shape, ndim, shape);
    format_shape(got_shape, sizeof got_shape, h.ndim, h.shape);
    rc = fail(err, errlen, NPK_NPY_EMISMATCH, "%s: expected %s '%s' shape %s, found %s%s'%s' shape %s", path,
              info->name, info->descr, want_shape, found ? found : "", found ? " " : "", h.descr, got_shape);
    goto done;
  }
  if (h.fortran_order) {
    rc = fail(err, errlen, NPK_NPY_EFORMAT,
              "%s: Fortran-order arrays are not supported (save np.ascontiguousarray(x) instead)", path);
    goto done;
  }
  size_t got = nbytes ? fread(data, 1, nbytes, f) : 0;
  if (got != nbytes) {
    rc = fail(err, errlen, NPK_NPY_EFORMAT, "%s: truncated: expected %lu data bytes, found %lu", path,
              (unsigned long)nbytes, (unsigned long)got);
    goto done;
  }
  if (fgetc(f) != EOF) {
    rc = fail(err, errlen, NPK_NPY_EFORMAT, "%s: unexpected bytes after the %lu data bytes", path,
              (unsigned long)nbytes);
    goto done;
  }
  rc = NPK_NPY_OK;
done:
  fclose(f);
  return rc;
}

/* ---- writing -------------------------------------------------------------------------------- */

int npk_npy_write(const char *path, npk_dtype dtype, int ndim, const size_t *shape, const void *data,
                  char *err, size_t errlen) {
  /* magic (6) + version (2) + header length (2) + header, padded with spaces and a final '\n'
   * to a multiple of 64 bytes, with the spare room NumPy leaves to grow the first dimension. */
  unsigned char buf[10 + 128 + NPK_NPY_MAX_DIMS * 22 + 21 + 64];
  char shape_text[NPK_NPY_MAX_DIMS * 22 + 4];
  size_t nbytes;
  const npk_dtype_info *info = dtype_info(dtype);
  if (!host_is_little_endian()) {
    return fail(err, errlen, NPK_NPY_EARG, "%s: npk_npy supports little-endian machines only", path);
  }
  if (!info || ndim < 0 || ndim > NPK_NPY_MAX_DIMS || (ndim > 0 && !shape) ||
      !element_count(ndim, shape, info->size, &nbytes)) {
    return fail(err, errlen, NPK_NPY_EARG, "%s: invalid dtype or shape to write", path);
  }
  format_shape(shape_text, sizeof shape_text, ndim, shape);
  char *text = (char *)buf + 10;
  size_t room = sizeof buf - 10;
  int n = snprintf(text, room, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", info->descr, shape_text);
  if (n < 0 || (size_t)n >= room) return fail(err, errlen, NPK_NPY_EARG, "%s: header too long", path);
  size_t len = (size_t)n;
  if (ndim > 0) {
    char first[24];
    int digits = snprintf(first, sizeof first, "%lu", (unsigned long)shape[0]);
    for (int i = digits; i < 21; i++) text[len++] = ' ';
  }
  size_t pad = 64 - (10 + len + 1) % 64;
  memset(text + len, ' ', pad);
  len += pad;
  text[len++] = '\n';
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)(len & 0xff);
  buf[9] = (unsigned char)(len >> 8);
  FILE *f = fopen(path, "wb");
  if (!f) return fail(err, errlen, NPK_NPY_EIO, "%s: cannot open for writing: %s", path, strerror(errno));
  int ok = fwrite(buf, 1, 10 + len, f) == 10 + len;
  if (ok && nbytes) ok = fwrite(data, 1, nbytes, f) == nbytes;
  if (fclose(f) != 0) ok = 0;
  if (!ok) return fail(err, errlen, NPK_NPY_EIO, "%s: write failed: %s", path, strerror(errno));
  return NPK_NPY_OK;
}
