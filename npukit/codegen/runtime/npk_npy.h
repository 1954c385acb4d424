/* npk_npy: read and write NumPy .npy files through stdio (part of npukit's generated projects).
 *
 * Reads format versions 1.0, 2.0 and 3.0; writes 1.0 with the header NumPy's own np.save writes,
 * so a written file is byte-identical to np.save of the same array.  Little-endian, C-order
 * arrays of the dtypes in npk_dtype only.  No dynamic memory: a read fills a caller-provided
 * buffer of exactly the expected size after checking the file's dtype and shape against the
 * expected ones.  On bare metal, stdio reaches the host through semihosting (newlib rdimon).
 *
 * Every function returns NPK_NPY_OK (0) or an error code and, on error, writes one line (no
 * trailing newline) naming the file and what was expected vs found into err[0..errlen).
 */
#ifndef NPK_NPY_H
#define NPK_NPY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NPK_F32 = 0, /* '<f4' float32 */
  NPK_F16,     /* '<f2' float16 (raw IEEE half bits, stored as uint16_t) */
  NPK_I8,      /* '|i1' int8 */
  NPK_U8,      /* '|u1' uint8 */
  NPK_I16,     /* '<i2' int16 */
  NPK_I32,     /* '<i4' int32 */
  NPK_I64,     /* '<i8' int64 */
  NPK_BOOL     /* '|b1' bool, one byte 0 or 1 */
} npk_dtype;

enum {
  NPK_NPY_OK = 0,
  NPK_NPY_EIO = 1,       /* cannot open, read or write the file */
  NPK_NPY_EFORMAT = 2,   /* not a .npy file, or a .npy feature this reader does not support */
  NPK_NPY_EMISMATCH = 3, /* a valid .npy whose dtype or shape differs from the expected one */
  NPK_NPY_EARG = 4       /* bad arguments from the caller (buffer size, rank) */
};

#define NPK_NPY_MAX_DIMS 32 /* the most dimensions a file may have and still be described */
#define NPK_NPY_ERR_LEN 320 /* an err buffer of this size holds every message in full */

/* Bytes per element of dtype (0 for an invalid value). */
size_t npk_dtype_size(npk_dtype dtype);
/* The .npy descr string ("<f4", "|i1", ...) and the NumPy name ("float32", ...) of dtype. */
const char *npk_dtype_descr(npk_dtype dtype);
const char *npk_dtype_name(npk_dtype dtype);

/* Read the .npy file at path into data[0..nbytes), which must be exactly the byte size of an
 * array of `dtype` with the ndim dimensions in shape.  The file must hold that dtype and shape. */
int npk_npy_read(const char *path, npk_dtype dtype, int ndim, const size_t *shape, void *data,
                 size_t nbytes, char *err, size_t errlen);

/* Write data (an array of dtype and shape, C order) to path as a version 1.0 .npy file. */
int npk_npy_write(const char *path, npk_dtype dtype, int ndim, const size_t *shape,
                  const void *data, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* NPK_NPY_H */
