/* Reading a quicktok .vocab file, compiled (issue 32): encoders.read_ranks in C.
 *
 * The file is a u32 count, then per token a u16 length, the token's bytes and a u32 rank, all
 * little-endian. Python's loop over it (struct.unpack_from per field) took 0.1-0.15 s per
 * encoding, in every process that counts tokens (each -j worker too); this takes a few
 * milliseconds. It returns exactly what encoders.read_ranks returns for the same bytes: the
 * ranks, or None unless every byte is used and the ranks are 0..n-1 once each
 * (tests/test_encoders_compiled.py holds the two to each other).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static uint32_t u32_at(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ranks(data: bytes) -> dict[bytes, int] | None */
static PyObject *ranks(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "ranks() takes bytes");
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t end = PyBytes_GET_SIZE(arg);
    if (end < 4)
        Py_RETURN_NONE;
    uint32_t n = u32_at(data);
    PyObject *found = PyDict_New();
    if (found == NULL)
        return NULL;
    Py_ssize_t off = 4;
    int64_t lowest = 0, highest = -1;  /* min(ranks.values(), default=0), max(..., default=-1) */
    for (uint32_t i = 0; i < n; i++) {
        if (end - off < 2)
            goto not_so;
        Py_ssize_t length = (Py_ssize_t)data[off] | (Py_ssize_t)data[off + 1] << 8;
        off += 2;
        if (end - off < length + 4)
            goto not_so;
        PyObject *token = PyBytes_FromStringAndSize((const char *)data + off, length);
        if (token == NULL)
            goto error;
        off += length;
        uint32_t rank = u32_at(data + off);
        off += 4;
        PyObject *value = PyLong_FromUnsignedLong(rank);
        if (value == NULL) {
            Py_DECREF(token);
            goto error;
        }
        int bad = PyDict_SetItem(found, token, value);
        Py_DECREF(token);
        Py_DECREF(value);
        if (bad < 0)
            goto error;
        if (i == 0 || rank < lowest)
            lowest = rank;
        if (i == 0 || (int64_t)rank > highest)
            highest = rank;
    }
    if (off != end || PyDict_GET_SIZE(found) != (Py_ssize_t)n || lowest != 0 || highest != (int64_t)n - 1)
        goto not_so;
    return found;
not_so:
    Py_DECREF(found);
    Py_RETURN_NONE;
error:
    Py_DECREF(found);
    return NULL;
}

static PyMethodDef methods[] = {
    {"ranks", ranks, METH_O, "encoders.read_ranks on a .vocab file's bytes: the ranks, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_vocab", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__vocab(void) { return PyModule_Create(&module); }
