/* The lossless check's quick answer, compiled (issue 32).
 *
 * Before a record is rewritten, records.lossless_problems asks whether orjson's parse lost a
 * value: an integer beyond 64 bits, a decimal a double does not hold, all but one of a repeated
 * key. Its Python answer serialises the whole record again and compares. These two functions
 * answer "nothing was lost" without that, where they can be sure:
 *
 *   scan(raw)      one pass over the bytes: the colons outside strings (in valid JSON, one per
 *                  object member) and whether a number outside strings is risky (16 or more
 *                  digits and dots in its mantissa, or 3 or more digits in its exponent: the
 *                  records.RISKY_NUMBER criterion, read per number instead of per match).
 *   members(obj)   the object members of the parse, nested.
 *
 * Equal counts mean no key was dropped; no risky number means every number has at most 15
 * significant digits and an exponent of at most two digits, which a double and a 64-bit integer
 * hold exactly. The caller takes "lost nothing" only from both, and otherwise asks the Python,
 * so an answer from here can only ever be the one the Python would give
 * (tests/test_lossless_compiled.py holds them to each other).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MAX_DEPTH 200
#define GAVE_UP (-2)

/* Members of obj's objects, nested; GAVE_UP deeper than MAX_DEPTH (orjson writes 255 levels at
 * most: the Python must be the one to say so) or at a dict or list subclass (no parse makes one). */
static Py_ssize_t members_of(PyObject *obj, int depth) {
    if (depth > MAX_DEPTH)
        return GAVE_UP;
    Py_ssize_t total = 0;
    if (PyDict_CheckExact(obj)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        total = PyDict_GET_SIZE(obj);
        while (PyDict_Next(obj, &pos, &k, &v)) {
            if (PyDict_CheckExact(v) || PyList_CheckExact(v)) {
                Py_ssize_t n = members_of(v, depth + 1);
                if (n < 0)
                    return n;
                total += n;
            } else if (PyDict_Check(v) || PyList_Check(v)) {
                return GAVE_UP;
            }
        }
    } else if (PyList_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
            PyObject *x = PyList_GET_ITEM(obj, i);
            if (PyDict_CheckExact(x) || PyList_CheckExact(x)) {
                Py_ssize_t n = members_of(x, depth + 1);
                if (n < 0)
                    return n;
                total += n;
            } else if (PyDict_Check(x) || PyList_Check(x)) {
                return GAVE_UP;
            }
        }
    } else if (PyDict_Check(obj) || PyList_Check(obj)) {
        return GAVE_UP;
    }
    return total;
}

/* members(obj) -> int, or NotImplemented (ask the Python). Only dicts and lists are walked: no
 * Python code runs while the walk holds borrowed references. */
static PyObject *members(PyObject *self, PyObject *obj) {
    Py_ssize_t n = members_of(obj, 0);
    if (n == GAVE_UP)
        Py_RETURN_NOTIMPLEMENTED;
    return PyLong_FromSsize_t(n);
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* scan(raw) -> (colons outside strings, a risky number outside strings), or None where a string
 * does not end (not bytes a parse accepted: ask the Python). */
static PyObject *scan(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *p = view.buf, *end = p + view.len;
    Py_ssize_t colons = 0;
    int risky = 0, ended = 1;
    Py_BEGIN_ALLOW_THREADS
    while (p < end) {
        unsigned char c = *p;
        if (c == '"') {
            /* the string ends at the first quote after it that an even number of backslashes
             * precedes (each pair is one escaped backslash; an odd one escapes the quote) */
            const unsigned char *from = p + 1;
            for (;;) {
                const unsigned char *q = memchr(from, '"', (size_t)(end - from));
                if (q == NULL) {
                    ended = 0;
                    break;
                }
                const unsigned char *b = q;
                while (b > p + 1 && b[-1] == '\\')
                    b--;
                if ((q - b) % 2 == 0) {
                    p = q + 1;
                    break;
                }
                from = q + 1;
            }
            if (!ended)
                break;
        } else if (c == ':') {
            colons++;
            p++;
        } else if (is_digit(c) || c == '-') {
            const unsigned char *q = p + (c == '-'), *start = q;
            while (q < end && (is_digit(*q) || *q == '.'))
                q++;
            if (q - start >= 16)
                risky = 1;
            if (q < end && (*q == 'e' || *q == 'E')) {
                q++;
                if (q < end && (*q == '+' || *q == '-'))
                    q++;
                const unsigned char *digits = q;
                while (q < end && is_digit(*q))
                    q++;
                if (q - digits >= 3)
                    risky = 1;
            }
            p = q > p ? q : p + 1;
        } else {
            p++;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (!ended)
        Py_RETURN_NONE;
    return Py_BuildValue("(nO)", colons, risky ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O, "(colons outside strings, a risky number outside strings), or None."},
    {"members", members, METH_O, "The object members of a parse, nested, or NotImplemented."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_exact", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__exact(void) { return PyModule_Create(&module); }
