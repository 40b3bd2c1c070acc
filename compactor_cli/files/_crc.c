/* zlib's crc32 (CRC-32/ISO-HDLC: the reflected polynomial 0xEDB88320, inverted before and after),
 * folded with carry-less multiplication (PCLMULQDQ) on x86-64: every byte an output gets passes
 * through the --resume checksum, and the system zlib's table walk took a tenth of a tier-1 run's
 * instructions (files/checksum.py; tests/test_checksum.py holds it to zlib.crc32).
 *
 * The folding is Intel's ("Fast CRC Computation for Generic Polynomials Using PCLMULQDQ
 * Instruction", 2009), as Chromium's zlib (crc32_simd.c) and the Linux kernel write it for this
 * polynomial: four 128-bit lanes folded 64 bytes a step, folded to one lane, reduced to 64 and
 * then 32 bits (Barrett). Lengths under 64 and the last bytes of a length that is not a multiple of
 * 16 go through the byte-at-a-time table. Where the instructions are missing (another processor,
 * another compiler) ACCELERATED is false and checksum.py uses zlib.crc32 itself. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static uint32_t table[256];

static void make_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
}

/* the register (not inverted) after ``len`` more bytes */
static uint32_t by_table(uint32_t crc, const unsigned char *p, size_t len) {
    while (len--)
        crc = table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_FOLD 1

/* the register after ``len`` bytes: len >= 64 and a multiple of 16 */
__attribute__((target("pclmul,sse4.1"))) static uint32_t folded(uint32_t crc, const unsigned char *buf, size_t len) {
    /* x^(4*128+32) and x^(4*128-32) mod P (bit-reflected, shifted), for folding 64 bytes; x^(128+32)
     * and x^(128-32) for 16; x^64; and P with the Barrett constant mu */
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;

    x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
    x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
    x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
    x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
    x0 = k1k2;
    buf += 64;
    len -= 64;
    while (len >= 64) {
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
        x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
        x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
        x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
        y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
        x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
        x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
        x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
        buf += 64;
        len -= 64;
    }
    /* four lanes into one */
    x0 = k3k4;
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
    x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
    x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
    while (len >= 16) {
        x2 = _mm_loadu_si128((const __m128i *)buf);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        buf += 16;
        len -= 16;
    }
    /* 128 bits to 64 */
    x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
    x3 = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_srli_si128(x1, 8);
    x1 = _mm_xor_si128(x1, x2);
    x0 = k5k0;
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_and_si128(x1, x3);
    x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    /* Barrett reduction to 32 bits */
    x0 = poly;
    x2 = _mm_and_si128(x1, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
    x2 = _mm_and_si128(x2, x3);
    x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
    x1 = _mm_xor_si128(x1, x2);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}

static int can_fold(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#else
#define HAVE_FOLD 0
#endif

static int fold_ok;

static uint32_t crc32_of(uint32_t value, const unsigned char *p, size_t len) {
    uint32_t crc = ~value;
#if HAVE_FOLD
    if (fold_ok && len >= 64) {
        size_t chunk = len & ~(size_t)15;
        crc = folded(crc, p, chunk);
        p += chunk;
        len -= chunk;
    }
#endif
    return ~by_table(crc, p, len);
}

static PyObject *crc32(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer data;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I:crc32", &data, &value))
        return NULL;
    uint32_t crc;
    if (data.len > 65536) {
        Py_BEGIN_ALLOW_THREADS
        crc = crc32_of(value, (const unsigned char *)data.buf, (size_t)data.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = crc32_of(value, (const unsigned char *)data.buf, (size_t)data.len);
    }
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

static PyMethodDef methods[] = {
    {"crc32", crc32, METH_VARARGS, "crc32(data, value=0): zlib.crc32's value, folded with PCLMULQDQ where it can be."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crc", NULL, -1, methods};

PyMODINIT_FUNC PyInit__crc(void) {
    make_table();
#if HAVE_FOLD
    fold_ok = can_fold();
#endif
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "ACCELERATED", fold_ok) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
