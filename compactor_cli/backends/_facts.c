/* The offline summariser's fact scan, with the walk compiled (issue 32).
 *
 * fact_scan._FACT finds the URLs, paths, identifiers and numbers of a text. _FACT.finditer(text)
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
 * "." in a path or a URL, unit_words those of the units after a number (fact_scan.py spells
 * them out of its patterns). tests/test_facts_compiled.py holds scan to finditer on generated texts,
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

/* ---------------------------------------------------------------- has_word
 *
 * has_word(text, words): whether the case-blind pattern \b(?:WORD|WORD|...)\b (re.I) finds a
 * match in text, for words of ASCII lower-case letters, spaces and apostrophes that begin and
 * end with a letter (facts._FAILURE_WORDS: the summariser asks it of every short line of tool
 * output, where the pattern cost 2 us a line). Case-blind, a character matches an ASCII letter
 * when fold() makes it that letter: its ASCII capital, the Kelvin sign (k), the dotted capital I
 * and the dotless i (i), the long s (s); tests/test_facts_compiled.py checks that against re
 * over every code point, and has_word against the pattern. */

static inline Py_UCS4 fold(Py_UCS4 c) {
    if (c < 128)
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    switch (c) {
    case 0x212A:
        return 'k';
    case 0x130:
    case 0x131:
        return 'i';
    case 0x17F:
        return 's';
    default:
        return c;
    }
}

/* The index of the lowest set bit of m (m is not 0). */
static inline int lowest_bit(unsigned long long m) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(m);
#else
    int k = 0;
    for (; !(m & 1); m >>= 1)
        k++;
    return k;
#endif
}

#define MAX_WORDS 64
#define MAX_WORD 32

/* The words last asked about, read once: a run asks about the same tuple every time. */
static PyObject *words_read;
static char word_text[MAX_WORDS][MAX_WORD + 1];
static Py_ssize_t word_len[MAX_WORDS], word_count;
static unsigned long long words_by_first[26]; /* bit w: word w begins with 'a' + the index */

static int read_words(PyObject *words) {
    if (words == words_read)
        return 1;
    if (!PyTuple_Check(words) || PyTuple_GET_SIZE(words) == 0 || PyTuple_GET_SIZE(words) > MAX_WORDS) {
        /* no words: the pattern \b(?:)\b would match at any word's edge, which no caller means */
        PyErr_SetString(PyExc_ValueError, "has_word: words is a tuple of 1-64 words");
        return 0;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(words);
    for (Py_ssize_t w = 0; w < count; w++) {
        PyObject *word = PyTuple_GET_ITEM(words, w);
        Py_ssize_t len = PyUnicode_Check(word) ? PyUnicode_GET_LENGTH(word) : 0;
        const char *text = len ? PyUnicode_AsUTF8(word) : NULL;
        int ok = text != NULL && len <= MAX_WORD && (Py_ssize_t)strlen(text) == len && is_lower((Py_UCS4)text[0]) &&
                 is_lower((Py_UCS4)text[len - 1]);
        for (Py_ssize_t i = 0; ok && i < len; i++)
            ok = is_lower((Py_UCS4)text[i]) || text[i] == ' ' || text[i] == '\'';
        if (!ok) {
            PyErr_Clear();
            PyErr_SetString(PyExc_ValueError, "has_word: a word is 1-32 of a-z, space and ' that begins and ends with a letter");
            Py_CLEAR(words_read); /* word_text may be half written */
            return 0;
        }
        memcpy(word_text[w], text, (size_t)len + 1);
        word_len[w] = len;
    }
    word_count = count;
    memset(words_by_first, 0, sizeof words_by_first);
    for (Py_ssize_t w = 0; w < count; w++)
        words_by_first[word_text[w][0] - 'a'] |= 1ULL << w;
    Py_INCREF(words);
    Py_XDECREF(words_read);
    words_read = words;
    return 1;
}

/* ---------------------------------------------------------------- error_lines
 *
 * error_lines(text, starts, needles, words, word_max): the indices, in text.split("\n"), of the
 * lines that may be error lines. facts._failure_lines tests each line of a tool result, tags
 * removed (</?[\w-]+>) and stripped, with patterns whose every match begins the line with one of
 * `starts` or holds one of `needles`, or is a line of at most `word_max` characters holding one of
 * `words` (has_word); the other lines, most lines of most outputs, it need not test at all (issue
 * 32: the tests of every line were half of the summariser's key facts on Claude Code logs). A
 * line here is that same plain line: its tags removed as re.sub removes them, then its whitespace
 * (str.isspace) stripped; an empty one is never listed. tests/test_facts_compiled.py holds the
 * list to this definition written in Python, and to the lines _failure_lines keeps. */

#define MAX_NEEDLES 32

typedef struct {
    unsigned char start[128];    /* whether a listed line may begin with the character */
    unsigned int by_first[128];  /* bit k: needle k begins with the character */
    const char *needle[MAX_NEEDLES];
    Py_ssize_t len[MAX_NEEDLES];
    Py_ssize_t word_max;
} Lines;

#define CHAR Py_UCS4
#define F(name) name##_4
#include "_facts_lines.h"
#undef CHAR
#undef F
#define CHAR Py_UCS2
#define F(name) name##_2
#include "_facts_lines.h"
#undef CHAR
#undef F
#define CHAR Py_UCS1
#define F(name) name##_1
#include "_facts_lines.h"
#undef CHAR
#undef F

static PyObject *has_word(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "has_word(text: str, words: tuple[str, ...])");
        return NULL;
    }
    if (!read_words(args[1]))
        return NULL;
    PyObject *text = args[0];
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        return PyBool_FromLong(words_in_1((const Py_UCS1 *)data, 0, n));
    case PyUnicode_2BYTE_KIND:
        return PyBool_FromLong(words_in_2((const Py_UCS2 *)data, 0, n));
    default:
        return PyBool_FromLong(words_in_4((const Py_UCS4 *)data, 0, n));
    }
}

/* `needles` read into ln: at most 32 non-empty ASCII str; 1, or 0 on an error (set). */
static int read_lines(PyObject *starts, PyObject *needles, Lines *ln) {
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    if (!PyUnicode_IS_ASCII(starts) || count > MAX_NEEDLES) {
        PyErr_SetString(PyExc_ValueError, "error_lines: starts is ASCII, needles at most 32 strings");
        return 0;
    }
    memset(ln->start, 0, sizeof ln->start);
    memset(ln->by_first, 0, sizeof ln->by_first);
    for (Py_ssize_t i = 0; i < PyUnicode_GET_LENGTH(starts); i++)
        ln->start[PyUnicode_1BYTE_DATA(starts)[i]] = 1;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *w = PyTuple_GET_ITEM(needles, k);
        if (!PyUnicode_Check(w) || !PyUnicode_IS_ASCII(w) || PyUnicode_GET_LENGTH(w) == 0) {
            PyErr_SetString(PyExc_ValueError, "error_lines: a needle is a non-empty ASCII str");
            return 0;
        }
        ln->needle[k] = (const char *)PyUnicode_1BYTE_DATA(w);
        ln->len[k] = PyUnicode_GET_LENGTH(w);
        ln->by_first[(unsigned char)ln->needle[k][0]] |= 1U << k;
    }
    return 1;
}

static PyObject *error_lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyTuple_Check(args[2]) ||
        !PyLong_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "error_lines(text: str, starts: str, needles: tuple[str, ...], "
                                         "words: tuple[str, ...], word_max: int)");
        return NULL;
    }
    Lines ln;
    int overflow;
    long long word_max = PyLong_AsLongLongAndOverflow(args[4], &overflow);
    if (word_max == -1 && PyErr_Occurred())
        return NULL;
    /* a length no line reaches, or one every line exceeds, whatever the number's size */
    ln.word_max = overflow > 0 || word_max > PY_SSIZE_T_MAX   ? PY_SSIZE_T_MAX
                  : overflow < 0 || word_max < PY_SSIZE_T_MIN ? PY_SSIZE_T_MIN
                                                              : (Py_ssize_t)word_max;
    if (!read_words(args[3]) || !read_lines(args[1], args[2], &ln))
        return NULL;
    PyObject *text = args[0], *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), room = 0;
    Py_UCS4 *buf = NULL;
    int ok;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        ok = lines_1((const Py_UCS1 *)data, n, &ln, out, &buf, &room);
        break;
    case PyUnicode_2BYTE_KIND:
        ok = lines_2((const Py_UCS2 *)data, n, &ln, out, &buf, &room);
        break;
    default:
        ok = lines_4((const Py_UCS4 *)data, n, &ln, out, &buf, &room);
    }
    PyMem_Free(buf);
    if (!ok) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- has_run
 *
 * has_run(text, chars, n): whether text holds n or more characters of `chars` in a row: what
 * re.search("[" + chars + "]{n,}", text) answers, with the characters taken literally (a progress
 * bar among routine output, facts.is_routine: its class search ran over every line a fact is in,
 * a twelfth of the summariser's work on Codex logs). tests/test_facts_compiled.py holds it to
 * the search. */

#define MAX_RUN_CHARS 32

#define RUN_LOOP(CHAR_T)                                                                         \
    do {                                                                                         \
        const CHAR_T *s = (const CHAR_T *)data;                                                  \
        for (Py_ssize_t p = 0; p < len; p++) {                                                   \
            Py_UCS4 c = s[p];                                                                    \
            int in = c < 128 ? ascii[c] : 0;                                                     \
            for (Py_ssize_t k = 0; c >= 128 && k < others && !in; k++)                           \
                in = other[k] == c;                                                              \
            run = in ? run + 1 : 0;                                                              \
            if (run >= n)                                                                        \
                Py_RETURN_TRUE;                                                                  \
        }                                                                                        \
    } while (0)

static PyObject *has_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "has_run(text: str, chars: str, n: int)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[2]), count = PyUnicode_GET_LENGTH(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 1 || count < 1 || count > MAX_RUN_CHARS) {
        PyErr_SetString(PyExc_ValueError, "has_run: n is at least 1, chars 1-32 characters");
        return NULL;
    }
    unsigned char ascii[128] = {0};
    Py_UCS4 other[MAX_RUN_CHARS];
    Py_ssize_t others = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_UCS4 c = PyUnicode_READ_CHAR(args[1], i);
        if (c < 128)
            ascii[c] = 1;
        else
            other[others++] = c;
    }
    PyObject *text = args[0];
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t len = PyUnicode_GET_LENGTH(text), run = 0;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        RUN_LOOP(Py_UCS1);
        break;
    case PyUnicode_2BYTE_KIND:
        RUN_LOOP(Py_UCS2);
        break;
    default:
        RUN_LOOP(Py_UCS4);
    }
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL,
     "scan(kinds, currency, dot_words, unit_words, text): [(start, end, lastgroup)] of the fact pattern's "
     "finditer(text)."},
    {"has_word", (PyCFunction)(void (*)(void))has_word, METH_FASTCALL,
     "has_word(text, words): whether re.search(r'\\b(?:' + '|'.join(words) + r')\\b', text, re.I) finds a match."},
    {"has_run", (PyCFunction)(void (*)(void))has_run, METH_FASTCALL,
     "has_run(text, chars, n): whether re.search('[' + chars + ']{n,}', text) finds a match, chars taken literally."},
    {"error_lines", (PyCFunction)(void (*)(void))error_lines, METH_FASTCALL,
     "error_lines(text, starts, needles, words, word_max): the indices of text.split('\\n')'s lines that, tags "
     "removed and stripped, begin with one of starts, hold a needle, or are at most word_max characters and hold "
     "one of words."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_facts", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__facts(void) {
    init_classes();
    return PyModule_Create(&module);
}
