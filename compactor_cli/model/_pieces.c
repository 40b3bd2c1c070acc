/* Token counts by pre-tokenised pieces, compiled (issue 32).
 *
 * tiktoken counts a text by splitting it with its encoding's pattern into pieces and encoding
 * each piece alone (encode_ordinary: a piece in the vocabulary is one token, any other is merged
 * from its bytes on its own), so a text's count is the sum of its pieces' counts. Here the split
 * is done by hand, and each distinct piece is merged once (_bpe.c, tiktoken's merge on the
 * ranks of quicktok's .vocab file, the ranks tiktoken is given) and remembered: runs repeat their
 * words, numbers, indentation and punctuation endlessly. No tiktoken has to be built for it
 * (0.1 s per encoding, in every process), and no Python code runs while it counts.
 *
 * Counter(kind, vocab).count(text) -> int, or None where the text holds a character outside
 * the class table (``set_table``; ASCII is built in), or while ``pieces`` is running: the caller
 * then counts it as before. kind: 0 cl100k_base, 1 o200k_base, 2 llama3, 3 qwen (its NFC is the
 * caller's: qwen is only asked about ASCII). The split follows encoders.SPECS' patterns
 * alternative by alternative, greedy and possessive quantifiers as written; the table gives each
 * character's classes as the regex engine reads them (letter, number, White_Space, CR/LF, and
 * o200k's two letter classes), for characters whose classes do not depend on the Unicode
 * version (encoders.PIECE_RANGES). tests/test_pieces_compiled.py holds the pieces to the
 * ``regex`` engine's and the tokens to tiktoken's.
 *
 * The memo holds pieces of at most MAX_PIECE bytes, at most MAX_ENTRIES of them in at most
 * MAX_ARENA bytes, and starts over when full: 20 MB at most (12 MB of slots, 8 MB of pieces).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_bpe.h"

enum { LET = 1, NUM = 2, WS = 4, NL = 8, UP = 16, LO = 32, OK = 64, APOS = 128 /* ' (ASCII only) */ };
enum { CL100K = 0, O200K = 1, LLAMA3 = 2, QWEN = 3 };

#define MAX_PIECE 255
#define MAX_ENTRIES ((size_t)1 << 19)
#define MAX_ARENA ((size_t)8 << 20)
#define FIRST_SLOTS ((size_t)1 << 12)

static unsigned char ascii_class[128];

typedef struct {
    uint32_t hash, off;
    uint16_t len, count; /* count 0: an empty slot (every piece is at least one token) */
} Entry;

typedef struct {
    PyObject_HEAD
    int kind, busy;
    PyObject *vocab_file; /* bytes: the .vocab file vocab reads from */
    Vocab vocab;
    PyObject *table; /* bytes: the classes of code points 0..len-1, or NULL */
    Entry *slots;
    size_t mask, used;
    char *arena;
    size_t arena_len, arena_cap;
    unsigned char *cls; /* the classes of the text being counted */
    size_t cls_cap;
    char *utf8; /* one piece as UTF-8 */
    size_t utf8_cap;
} Counter;

static int grow(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need)
        cap2 *= 2;
    void *p = PyMem_Realloc(*buf, cap2 * item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = p;
    *cap = cap2;
    return 0;
}

static void forget(Counter *c) {
    PyMem_Free(c->slots);
    c->slots = NULL;
    c->mask = c->used = 0;
    c->arena_len = 0;
}

/* The slot of this piece: its own, or the empty one it would take. */
static Entry *slot_of(Counter *c, const char *p, size_t n, uint32_t h) {
    size_t i = h & c->mask;
    for (;;) {
        Entry *e = &c->slots[i];
        if (e->count == 0 || (e->hash == h && e->len == n && same_bytes((const unsigned char *)c->arena + e->off, (const unsigned char *)p, n)))
            return e;
        i = (i + 1) & c->mask;
    }
}

/* Room for one more entry: doubles the slots up to MAX_ENTRIES * 2, else starts over. */
static int make_room(Counter *c, size_t n) {
    if (c->slots != NULL && (c->used + 1 > MAX_ENTRIES || c->arena_len + n > MAX_ARENA))
        forget(c);
    if (c->slots == NULL) {
        c->slots = PyMem_Calloc(FIRST_SLOTS, sizeof(Entry));
        if (c->slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->mask = FIRST_SLOTS - 1;
    } else if ((c->used + 1) * 2 > c->mask + 1) {
        size_t size = (c->mask + 1) * 2;
        Entry *old = c->slots, *slots = PyMem_Calloc(size, sizeof(Entry));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        size_t old_size = c->mask + 1;
        c->slots = slots;
        c->mask = size - 1;
        for (size_t i = 0; i < old_size; i++)
            if (old[i].count) {
                size_t j = old[i].hash & c->mask;
                while (slots[j].count)
                    j = (j + 1) & c->mask;
                slots[j] = old[i];
            }
        PyMem_Free(old);
    }
    return grow((void **)&c->arena, &c->arena_cap, c->arena_len + n, 1);
}

/* The tokens of one piece: remembered, or merged (_bpe.c), then remembered. -1 with an error set. */
static long long piece_count(Counter *c, const char *p, size_t n) {
    uint32_t h = 0;
    if (n <= MAX_PIECE && c->slots != NULL) {
        h = piece_hash((const unsigned char *)p, n);
        Entry *e = slot_of(c, p, n, h);
        if (e->count)
            return e->count;
    }
    long long count = bpe_tokens(&c->vocab, (const unsigned char *)p, n, NULL);
    if (count < 0)
        return -1;
    if (n <= MAX_PIECE && count > 0 && count <= 0xFFFF) {
        if (make_room(c, n) < 0)
            return -1;
        h = piece_hash((const unsigned char *)p, n);
        Entry *e = slot_of(c, p, n, h);
        memcpy(c->arena + c->arena_len, p, n);
        e->hash = h;
        e->off = (uint32_t)c->arena_len;
        e->len = (uint16_t)n;
        e->count = (uint16_t)count;
        c->arena_len += n;
        c->used++;
    }
    return count;
}

/* The text being split: its code points and their classes. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
    const unsigned char *cls;
} Text;

#define CP(t, i) PyUnicode_READ((t)->kind, (t)->data, (i))
#define IS(t, i, bits) ((t)->cls[i] & (bits))
#define OTHER(t, i) (!IS(t, i, LET | NUM | WS))  /* [^\s\p{L}\p{N}] */

/* (?i:'s|'t|'re|'ve|'m|'ll|'d) at i: its end, or i. U+017F (long s) folds to s. */
static inline Py_ssize_t contraction(const Text *t, Py_ssize_t i) {
    if (i + 1 >= t->n || !IS(t, i, APOS))
        return i;
    Py_UCS4 d = CP(t, i + 1);
    if (d < 128)
        d |= 0x20;
    if (d == 's' || d == 0x17F || d == 't' || d == 'm' || d == 'd')
        return i + 2;
    if (i + 2 >= t->n)
        return i;
    Py_UCS4 e = CP(t, i + 2);
    if (e < 128)
        e |= 0x20;
    if ((d == 'r' && e == 'e') || (d == 'v' && e == 'e') || (d == 'l' && e == 'l'))
        return i + 3;
    return i;
}

/* o200k's [UP]*[LO]+ contraction? from j, or -1. */
static Py_ssize_t o200k_lower(const Text *t, Py_ssize_t j) {
    Py_ssize_t a = j, p = -1;
    while (a < t->n && IS(t, a, UP))
        a++;
    if (a < t->n && IS(t, a, LO))
        p = a;
    else
        for (Py_ssize_t q = a - 1; q >= j; q--)
            if (IS(t, q, LO)) {
                p = q;
                break;
            }
    if (p < 0)
        return -1;
    while (p < t->n && IS(t, p, LO))
        p++;
    return contraction(t, p);
}

/* o200k's [UP]+[LO]* contraction? from j, or -1. */
static Py_ssize_t o200k_upper(const Text *t, Py_ssize_t j) {
    Py_ssize_t a = j;
    while (a < t->n && IS(t, a, UP))
        a++;
    if (a == j)
        return -1;
    while (a < t->n && IS(t, a, LO))
        a++;
    return contraction(t, a);
}

/* The end of the piece that starts at i (i < n). */
static Py_ssize_t piece_end(const Text *t, int kind, Py_ssize_t i) {
    Py_ssize_t n = t->n, j, k;
    int lead = !IS(t, i, LET | NUM | NL); /* [^\r\n\p{L}\p{N}] */
    if (kind == O200K) {
        if (lead && (k = o200k_lower(t, i + 1)) >= 0)
            return k;
        if ((k = o200k_lower(t, i)) >= 0)
            return k;
        if (lead && (k = o200k_upper(t, i + 1)) >= 0)
            return k;
        if ((k = o200k_upper(t, i)) >= 0)
            return k;
    } else {
        if ((k = contraction(t, i)) > i)
            return k;
        j = lead ? i + 1 : i; /* [^\r\n\p{L}\p{N}]?\p{L}+: without the lead, a non-letter at i fails too */
        if (j < n && IS(t, j, LET)) {
            while (j < n && IS(t, j, LET))
                j++;
            return j;
        }
    }
    if (IS(t, i, NUM)) { /* \p{N}{1,3}, qwen's \p{N} */
        Py_ssize_t most = kind == QWEN ? 1 : 3;
        for (k = i; k < n && k - i < most && IS(t, k, NUM); k++)
            ;
        return k;
    }
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' (o200k: [\r\n/]*) */
    j = (CP(t, i) == ' ' && i + 1 < n && OTHER(t, i + 1)) ? i + 1 : i;
    if (OTHER(t, j)) {
        while (j < n && OTHER(t, j))
            j++;
        while (j < n && (IS(t, j, NL) || (kind == O200K && CP(t, j) == '/')))
            j++;
        return j;
    }
    /* whitespace: every other character was taken above */
    Py_ssize_t e = i;
    while (e < n && IS(t, e, WS))
        e++;
    if (kind == CL100K && e == n) /* \s++$ */
        return n;
    for (k = e - 1; k >= i; k--) /* \s*[\r\n] (the others' \s*[\r\n]+ ends there too) */
        if (IS(t, k, NL))
            return k + 1;
    if (e == n) /* \s+(?!\S) at the end */
        return n;
    return e - i >= 2 ? e - 1 : i + 1; /* \s+(?!\S), else \s (the others' \s+ on one) */
}

/* Fills c->cls for s; 0 when a character is outside the table, -1 on an error. */
static int classes(Counter *c, PyObject *s, Text *t) {
    t->kind = PyUnicode_KIND(s);
    t->data = PyUnicode_DATA(s);
    t->n = PyUnicode_GET_LENGTH(s);
    if (grow((void **)&c->cls, &c->cls_cap, (size_t)t->n + 1, 1) < 0)
        return -1;
    unsigned char *cls = c->cls;
    if (PyUnicode_IS_ASCII(s)) {
        const unsigned char *p = t->data;
        for (Py_ssize_t i = 0; i < t->n; i++)
            cls[i] = ascii_class[p[i]];
    } else {
        if (c->table == NULL || c->kind == QWEN)
            return 0;
        const unsigned char *table = (const unsigned char *)PyBytes_AS_STRING(c->table);
        Py_UCS4 size = (Py_UCS4)PyBytes_GET_SIZE(c->table);
        for (Py_ssize_t i = 0; i < t->n; i++) {
            Py_UCS4 cp = PyUnicode_READ(t->kind, t->data, i);
            unsigned char k = cp < 128 ? ascii_class[cp] : cp < size ? table[cp] : 0;
            if (!(k & OK))
                return 0;
            cls[i] = k;
        }
    }
    t->cls = cls;
    return 1;
}

/* The UTF-8 of s[start:end] (every code point in the table, so no surrogate). */
static const char *piece_bytes(Counter *c, PyObject *s, const Text *t, Py_ssize_t start, Py_ssize_t end,
                               size_t *len) {
    if (PyUnicode_IS_ASCII(s)) {
        *len = (size_t)(end - start);
        return (const char *)t->data + start;
    }
    if (grow((void **)&c->utf8, &c->utf8_cap, (size_t)(end - start) * 4, 1) < 0)
        return NULL;
    unsigned char *o = (unsigned char *)c->utf8;
    for (Py_ssize_t i = start; i < end; i++) {
        Py_UCS4 cp = CP(t, i);
        if (cp < 0x80) {
            *o++ = (unsigned char)cp;
        } else if (cp < 0x800) {
            *o++ = (unsigned char)(0xC0 | cp >> 6);
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            *o++ = (unsigned char)(0xE0 | cp >> 12);
            *o++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            *o++ = (unsigned char)(0xF0 | cp >> 18);
            *o++ = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
            *o++ = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    *len = (size_t)(o - (unsigned char *)c->utf8);
    return c->utf8;
}

static PyObject *split(Counter *c, PyObject *s, int want_pieces) {
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "a str is counted");
        return NULL;
    }
    if (c->vocab_file == NULL) {
        PyErr_SetString(PyExc_TypeError, "a counter made without a vocabulary");
        return NULL;
    }
    if (c->busy) /* pieces() is running below: a __del__ its allocations ran */
        Py_RETURN_NONE;
    if (PyUnicode_READY(s) < 0)
        return NULL;
    /* busy from here: the classes and the scratch buffers are this call's until it returns */
    c->busy = 1;
    Text t;
    PyObject *pieces = NULL;
    int found = classes(c, s, &t);
    if (found <= 0) {
        c->busy = 0;
        return found < 0 ? NULL : Py_NewRef(Py_None);
    }
    if (want_pieces && (pieces = PyList_New(0)) == NULL)
        goto error;
    long long total = 0;
    for (Py_ssize_t i = 0; i < t.n;) {
        Py_ssize_t end = piece_end(&t, c->kind, i);
        if (want_pieces) {
            PyObject *piece = PyUnicode_Substring(s, i, end);
            if (piece == NULL || PyList_Append(pieces, piece) < 0) {
                Py_XDECREF(piece);
                goto error;
            }
            Py_DECREF(piece);
        } else {
            size_t len;
            const char *p = piece_bytes(c, s, &t, i, end, &len);
            long long k = p == NULL ? -1 : piece_count(c, p, len);
            if (k < 0)
                goto error;
            total += k;
        }
        i = end;
    }
    c->busy = 0;
    return want_pieces ? pieces : PyLong_FromLongLong(total);
error:
    c->busy = 0;
    Py_XDECREF(pieces);
    return NULL;
}

static PyObject *Counter_count(Counter *c, PyObject *s) { return split(c, s, 0); }
static PyObject *Counter_pieces(Counter *c, PyObject *s) { return split(c, s, 1); }

static PyObject *Counter_set_table(Counter *c, PyObject *table) {
    if (!PyBytes_CheckExact(table)) {
        PyErr_SetString(PyExc_TypeError, "the table is bytes");
        return NULL;
    }
    /* classes() reads the table before any Python code can run in a count: it may change at any time */
    Py_XSETREF(c->table, Py_NewRef(table));
    Py_RETURN_NONE;
}

static PyObject *Counter_remembered(Counter *c, PyObject *Py_UNUSED(ignored)) { return PyLong_FromSize_t(c->used); }

static int Counter_init(Counter *c, PyObject *args, PyObject *kwds) {
    int kind;
    PyObject *vocab_file;
    static char *names[] = {"kind", "vocab", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iO!:Counter", names, &kind, &PyBytes_Type, &vocab_file))
        return -1;
    if (kind < CL100K || kind > QWEN) {
        PyErr_SetString(PyExc_ValueError, "Counter(kind 0-3, a .vocab file's bytes)");
        return -1;
    }
    if (c->busy || c->vocab_file != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a counter is made once");
        return -1;
    }
    int read = vocab_read(&c->vocab, (const unsigned char *)PyBytes_AS_STRING(vocab_file),
                          (size_t)PyBytes_GET_SIZE(vocab_file));
    if (read < 0) {
        if (read == -2)
            PyErr_NoMemory();
        else
            PyErr_SetString(PyExc_ValueError, "not a .vocab file read exactly (distinct tokens, ranks 0..n-1 once each, every byte used)");
        return -1;
    }
    c->kind = kind;
    c->vocab_file = Py_NewRef(vocab_file);
    return 0;
}

/* The ranks of the tokens a piece (bytes) is merged into: tests hold them to tiktoken's. */
static PyObject *Counter_tokens(Counter *c, PyObject *piece) {
    if (!PyBytes_Check(piece) || c->vocab_file == NULL) {
        PyErr_SetString(PyExc_TypeError, "tokens() takes bytes, of a counter made with a vocabulary");
        return NULL;
    }
    size_t n = (size_t)PyBytes_GET_SIZE(piece);
    uint32_t *ranks = PyMem_Malloc((n ? n : 1) * sizeof(uint32_t));
    if (ranks == NULL)
        return PyErr_NoMemory();
    long long k = bpe_tokens(&c->vocab, (const unsigned char *)PyBytes_AS_STRING(piece), n, ranks);
    PyObject *out = k < 0 ? NULL : PyList_New((Py_ssize_t)k);
    for (long long i = 0; out != NULL && i < k; i++) {
        PyObject *r = ranks[i] == NO_RANK ? Py_NewRef(Py_None) : PyLong_FromUnsignedLong(ranks[i]);
        if (r == NULL)
            Py_CLEAR(out);
        else
            PyList_SET_ITEM(out, (Py_ssize_t)i, r);
    }
    PyMem_Free(ranks);
    return out;
}

static void Counter_dealloc(Counter *c) {
    vocab_free(&c->vocab);
    Py_CLEAR(c->vocab_file);
    Py_CLEAR(c->table);
    forget(c);
    PyMem_Free(c->arena);
    PyMem_Free(c->cls);
    PyMem_Free(c->utf8);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef Counter_methods[] = {
    {"count", (PyCFunction)Counter_count, METH_O, "The tokens of a str, or None: count it another way."},
    {"pieces", (PyCFunction)Counter_pieces, METH_O, "The pieces count() splits a str into, or None."},
    {"set_table", (PyCFunction)Counter_set_table, METH_O, "The classes of code points beyond ASCII."},
    {"remembered", (PyCFunction)Counter_remembered, METH_NOARGS, "How many pieces the memo holds."},
    {"tokens", (PyCFunction)Counter_tokens, METH_O, "The ranks of the tokens a piece (bytes) is merged into."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject CounterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "compactor_cli.model._pieces.Counter",
    .tp_basicsize = sizeof(Counter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Token counts by pre-tokenised pieces, each distinct piece encoded once.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Counter_init,
    .tp_dealloc = (destructor)Counter_dealloc,
    .tp_methods = Counter_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_pieces", NULL, -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__pieces(void) {
    for (int ch = 0; ch < 128; ch++) {
        unsigned char k = OK;
        if ((ch >= 'a' && ch <= 'z'))
            k |= LET | LO;
        else if (ch >= 'A' && ch <= 'Z')
            k |= LET | UP;
        else if (ch >= '0' && ch <= '9')
            k |= NUM;
        else if ((ch >= 9 && ch <= 13) || ch == ' ')
            k |= WS;
        if (ch == '\r' || ch == '\n')
            k |= NL;
        if (ch == '\'')
            k |= APOS;
        ascii_class[ch] = k;
    }
    if (PyType_Ready(&CounterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "Counter", (PyObject *)&CounterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
