/* The offline summariser's fact scan, with the walk compiled (issue 32).
 *
 * facts._FACT finds the URLs, paths, identifiers and numbers of a text. _FACT.finditer(text)
 * tried the pattern at every position: Python's re spends some 48 ns at each before it tries any
 * kind of fact, and 1-5 us at each where one may start and none does (a bare number, "self.x"),
 * so the scan cost 120-180 ns a character, a third of the summariser's time on real runs.
 *
 * scan(kinds, currency, dot_words, unit_words, text) returns [(start, end, lastgroup)] of
 * _FACT.finditer(text). It walks the text here and asks a pattern to match only where a fact
 * may start; the pattern decides every match, and the walk goes on from its end, as finditer
 * does. Where one may start:
 *
 *   - _FACT's gates: a word character or one of ~/.@+- with no word character before it, and
 *     not a plain word (an ASCII letter-and-underscore run followed by neither a word character
 *     nor one of .@+/:-, unless it is a 7-12 letter a-f word, "commit", "sha" or "hash"); there
 *     `kinds` (_FACT without its gates) is asked, if may_match finds what one of the kinds
 *     cannot match without (each test is named after its kind below);
 *   - a currency sign (which may start inside a word: "US$5"): there `currency` is asked.
 *
 * dot_words are the spellings of the file extensions and top-level domains that may follow a
 * "." in a path or a URL, unit_words those of the units after a number (facts.py spells them
 * out of its patterns). tests/test_facts_compiled.py holds scan to finditer on generated texts,
 * on every short text of fact pieces, and on the fixtures' messages.
 *
 * The walk is written once for each width of str (_facts_walk.h, included three times below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* ASCII character classes */
#define C_WORD 1    /* \w */
#define C_START 2   /* where the gates may let a fact start: \w and ~/.@+- */
#define C_LETTER 4  /* [A-Za-z_]: the gates' plain word */
#define C_SEGMENT 8 /* [\w.@+-]: a path segment's characters */
#define C_NEXT 16   /* .@+/:-: what makes a letter run no plain word when it follows */

static unsigned char CLASS[128];

static void init_classes(void) {
    for (int c = 0; c < 128; c++) {
        int word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        unsigned char k = 0;
        if (word)
            k |= C_WORD | C_START | C_SEGMENT;
        if (strchr("~/.@+-", c) && c)
            k |= C_START;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
            k |= C_LETTER;
        if (strchr(".@+-", c) && c)
            k |= C_SEGMENT;
        if (strchr(".@+/:-", c) && c)
            k |= C_NEXT;
        CLASS[c] = k;
    }
}

/* Python's re on a str: \w is "_" or what str.isalnum() holds for (_sre's SRE_UNI_IS_WORD), \d a
 * decimal digit, \s what str.isspace() holds for. */
static inline int is_word(Py_UCS4 c) { return c < 128 ? CLASS[c] & C_WORD : Py_UNICODE_ISALNUM(c); }
static inline int is_decimal(Py_UCS4 c) { return c < 128 ? (c >= '0' && c <= '9') : Py_UNICODE_ISDECIMAL(c); }
static inline int is_space(Py_UCS4 c) {
    return c < 128 ? (c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f)) : Py_UNICODE_ISSPACE(c);
}
static inline int is_currency(Py_UCS4 c) { return c == '$' || c == 0x20AC || c == 0xA3; }
static inline int is_lower(Py_UCS4 c) { return c >= 'a' && c <= 'z'; }
static inline int is_upper(Py_UCS4 c) { return c >= 'A' && c <= 'Z'; }
static inline int is_ascii_digit(Py_UCS4 c) { return c >= '0' && c <= '9'; }
static inline int is_hex(Py_UCS4 c) { return is_ascii_digit(c) || (c >= 'a' && c <= 'f'); }
static inline int is_segment(Py_UCS4 c) { return c < 128 ? CLASS[c] & C_SEGMENT : Py_UNICODE_ISALNUM(c); }

/* Whether text[a:b] is in `words` (a frozenset of short ASCII words): 1, 0, or -1 on an error. */
static int word_in(PyObject *words, PyObject *text, Py_ssize_t a, Py_ssize_t b) {
    if (b <= a || b - a > 16)
        return 0;
    PyObject *w = PyUnicode_Substring(text, a, b);
    if (w == NULL)
        return -1;
    int found = PySet_Contains(words, w);
    Py_DECREF(w);
    return found;
}

/* One search to the right, remembered: positions are asked in increasing order, and the answer
 * found from `from` holds for every position before `to` (see each search), so each character
 * is read once per search. */
typedef struct {
    Py_ssize_t from, to;
    int found;
} Memo;

static inline int memo_holds(const Memo *m, Py_ssize_t p) { return m->from <= p && p < m->to; }

/* Calls pattern.match(text, p): appends (start, end, lastgroup) to out and returns the end if it
 * matched, 0 if not, -1 on an error. */
static Py_ssize_t try_at(PyObject *match, PyObject *text, Py_ssize_t p, PyObject *out) {
    PyObject *pos = PyLong_FromSsize_t(p);
    if (pos == NULL)
        return -1;
    PyObject *call[2] = {text, pos};
    PyObject *m = PyObject_Vectorcall(match, call, 2, NULL);
    Py_DECREF(pos);
    if (m == NULL)
        return -1;
    if (m == Py_None) {
        Py_DECREF(m);
        return 0;
    }
    PyObject *span = PyObject_CallMethod(m, "span", NULL);
    PyObject *group = span ? PyObject_GetAttrString(m, "lastgroup") : NULL;
    Py_DECREF(m);
    if (group == NULL) {
        Py_XDECREF(span);
        return -1;
    }
    Py_ssize_t start = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 0));
    Py_ssize_t end = PyLong_AsSsize_t(PyTuple_GET_ITEM(span, 1));
    Py_DECREF(span);
    if (start != p || end <= p) {
        /* finditer goes on past an empty match in its own way; no fact is empty, and this walk
           does not pretend to know what finditer would do */
        Py_DECREF(group);
        PyErr_SetString(PyExc_ValueError, "scan: the pattern matched an empty string");
        return -1;
    }
    PyObject *found = Py_BuildValue("(nnO)", start, end, group);
    Py_DECREF(group);
    if (found == NULL || PyList_Append(out, found) < 0) {
        Py_XDECREF(found);
        return -1;
    }
    Py_DECREF(found);
    return end;
}

typedef struct {
    PyObject *kinds, *currency; /* the patterns' bound match methods */
    PyObject *dot_words, *unit_words, *text, *out;
} Scan;

#define CHAR Py_UCS1
#define F(name) name##_1
#include "_facts_walk.h"
#undef CHAR
#undef F
#define CHAR Py_UCS2
#define F(name) name##_2
#include "_facts_walk.h"
#undef CHAR
#undef F
#define CHAR Py_UCS4
#define F(name) name##_4
#include "_facts_walk.h"
#undef CHAR
#undef F

static PyObject *scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyUnicode_Check(args[4]) || !PyAnySet_Check(args[2]) || !PyAnySet_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "scan(kinds, currency, dot_words: frozenset, unit_words: frozenset, text: str)");
        return NULL;
    }
    Scan sc = {NULL, NULL, args[2], args[3], args[4], NULL};
    sc.kinds = PyObject_GetAttrString(args[0], "match");
    sc.currency = sc.kinds ? PyObject_GetAttrString(args[1], "match") : NULL;
    sc.out = sc.currency ? PyList_New(0) : NULL;
    int ok = 0;
    if (sc.out != NULL) {
        const void *data = PyUnicode_DATA(sc.text);
        Py_ssize_t n = PyUnicode_GET_LENGTH(sc.text);
        switch (PyUnicode_KIND(sc.text)) {
        case PyUnicode_1BYTE_KIND:
            ok = walk_1(&sc, (const Py_UCS1 *)data, n);
            break;
        case PyUnicode_2BYTE_KIND:
            ok = walk_2(&sc, (const Py_UCS2 *)data, n);
            break;
        default:
            ok = walk_4(&sc, (const Py_UCS4 *)data, n);
        }
    }
    Py_XDECREF(sc.kinds);
    Py_XDECREF(sc.currency);
    if (!ok) {
        Py_XDECREF(sc.out);
        return NULL;
    }
    return sc.out;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(kinds, currency, dot_words, unit_words, text): [(start, end, lastgroup)] of the fact pattern's "
     "finditer(text)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_facts", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__facts(void) {
    init_classes();
    return PyModule_Create(&module);
}
