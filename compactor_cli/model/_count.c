/* A conversation's token count from the counter's memos, compiled (issue 32).
 *
 * conversation(messages, shorts, memo, text, short, min_chars, per_message, per_name, per_call,
 * message) does what TokenCounter.conversation does without REPLY_PRIMING: the sum of
 * TokenCounter.message over the messages; each(...) gives the list of those counts (MemoTokens,
 * a changed record's count before compaction). With tokens counted, that Python loop over every
 * message's keys was the largest share of tier 1's own work on many short messages; the texts
 * themselves are counted by the same Python as before (``text``, ``short``: called wherever the
 * memo a text would be found in does not hold it). A message of any other shape than a plain
 * one (content parts, a custom tool call, a str subclass, a value of an unusual type) is counted
 * by ``message`` itself, the Python, whole. tests/test_count_compiled.py holds the two to each
 * other.
 *
 * Python code runs here: the callbacks, which are the counter's own text and short (they change
 * no message; TokenCounter.conversation uses this only for TokenCounter itself, not a subclass).
 * Every object the walk is on is held by a reference of its own across them, so even a callback
 * that changed the messages could change a count but never make the walk read freed memory.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define FALLBACK (-2)
#define FAILED (-1)
#define GIVE_BACK (-3)  /* a count beyond MAX_COUNT: the whole sum is the Python's */
#define MAX_COUNT ((Py_ssize_t)1 << 40)

static PyObject *s_role, *s_content, *s_name, *s_reasoning, *s_reasoning_content, *s_tool_calls,
    *s_function, *s_arguments, *s_custom, *s_empty;

typedef struct {
    PyObject *shorts, *memo, *text, *short_;
    Py_ssize_t min_chars, per_message, per_name, per_call;
} Counter;

/* Every key of d is exactly a str: a look-up in d then runs no Python code. */
static int str_keys(PyObject *d) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v))
        if (!PyUnicode_CheckExact(k))
            return 0;
    return 1;
}

/* A value whose type the Python's isinstance tests answer as its exact type does: a parsed
 * record's. Anything else (a subclass, an object whose __class__ says otherwise) is the Python's. */
static int plain(PyObject *v) {
    return v == Py_None || PyUnicode_CheckExact(v) || PyLong_CheckExact(v) || PyFloat_CheckExact(v) ||
           PyBool_Check(v) || PyList_CheckExact(v) || PyDict_CheckExact(v) || PyTuple_CheckExact(v);
}

/* The int a callback returned (a count, never negative), or FAILED with an error set. */
static Py_ssize_t count_from(PyObject *result) {
    if (result == NULL)
        return FAILED;
    Py_ssize_t n = PyLong_Check(result) ? PyLong_AsSsize_t(result) : -1;
    Py_DECREF(result);
    if (n < 0 && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_OverflowError)) {
        PyErr_Clear();
        return GIVE_BACK;
    }
    if (n > MAX_COUNT)
        return GIVE_BACK;  /* no sum of counts this size can overflow */
    if (n < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a token count must be an int >= 0");
        return FAILED;
    }
    return n;
}

/* fn(s), s held across the call. */
static Py_ssize_t call(PyObject *fn, PyObject *s) {
    Py_INCREF(s);
    PyObject *result = PyObject_CallOneArg(fn, s);
    Py_DECREF(s);
    return count_from(result);
}

/* The count a memo holds for the exact str s (*found set), 0 where it holds none, or FAILED. */
static Py_ssize_t held(PyObject *memo, PyObject *s, int *found) {
    PyObject *k = PyDict_GetItemWithError(memo, s);
    *found = k != NULL;
    if (k == NULL)
        return PyErr_Occurred() ? FAILED : 0;
    Py_INCREF(k);
    return count_from(k);
}

/* TokenCounter.text(s) for an exact str s. */
static Py_ssize_t text_of(Counter *c, PyObject *s) {
    if (PyUnicode_GET_LENGTH(s) == 0)
        return 0;
    if (PyUnicode_GET_LENGTH(s) >= c->min_chars) {
        int found;
        Py_ssize_t n = held(c->memo, s, &found);
        if (found || n == FAILED)
            return n;
    }
    return call(c->text, s);
}

/* TokenCounter.short(s) for an exact str s. */
static Py_ssize_t short_of(Counter *c, PyObject *s) {
    int found;
    Py_ssize_t n = held(c->shorts, s, &found);
    if (found || n == FAILED)
        return n;
    return call(c->short_, s);
}

/* d[key] as a new reference; NULL where it is absent, or with an error set. */
static PyObject *item(PyObject *d, PyObject *key) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    Py_XINCREF(v);
    return v;
}

/* A str value as `value or ""` reads it: the value, s_empty for a missing, None or empty one;
 * NULL (new reference otherwise) where the Python must decide: another type. */
static PyObject *str_or_empty(PyObject *d, PyObject *key, int *fallback) {
    PyObject *v = item(d, key);
    if (v == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return Py_NewRef(s_empty);
    }
    if (v == Py_None) {
        Py_DECREF(v);
        return Py_NewRef(s_empty);
    }
    if (!PyUnicode_CheckExact(v)) {
        Py_DECREF(v);
        *fallback = 1;
        return NULL;
    }
    return v;
}

/* TokenCounter._extras of a function call's dict fn: per_call + short(name) + text(arguments). */
static Py_ssize_t function_call(Counter *c, PyObject *fn) {
    if (!PyDict_CheckExact(fn) || !str_keys(fn))
        return FALLBACK;
    int fallback = 0;
    PyObject *name = str_or_empty(fn, s_name, &fallback);
    if (name == NULL)
        return fallback ? FALLBACK : FAILED;
    Py_ssize_t k = short_of(c, name);
    Py_DECREF(name);
    if (k < 0)
        return k;
    PyObject *args = str_or_empty(fn, s_arguments, &fallback);
    if (args == NULL)
        return fallback ? FALLBACK : FAILED;
    Py_ssize_t a = text_of(c, args);
    Py_DECREF(args);
    if (a < 0)
        return a;
    return c->per_call + k + a;
}

/* A str field counted as text where present ("name": with per_name). */
static Py_ssize_t str_field(Counter *c, PyObject *m, PyObject *key, Py_ssize_t extra) {
    PyObject *v = item(m, key);
    if (v == NULL)
        return PyErr_Occurred() ? FAILED : 0;
    Py_ssize_t n = 0;
    if (PyUnicode_CheckExact(v)) {
        n = text_of(c, v);
        if (n >= 0)
            n += extra;
    } else if (!plain(v)) {
        n = FALLBACK;
    }
    Py_DECREF(v);
    return n;
}

/* TokenCounter._extras(m). */
static Py_ssize_t extras(Counter *c, PyObject *m) {
    Py_ssize_t total = 0, n;
    if ((n = str_field(c, m, s_name, c->per_name)) < 0)
        return n;
    total += n;
    if ((n = str_field(c, m, s_reasoning, 0)) < 0)
        return n;
    total += n;
    if ((n = str_field(c, m, s_reasoning_content, 0)) < 0)
        return n;
    total += n;
    PyObject *calls = item(m, s_tool_calls);
    if (calls == NULL)
        return PyErr_Occurred() ? FAILED : total;
    if (calls == Py_None) {
        Py_DECREF(calls);
        return total;
    }
    if (!PyList_CheckExact(calls)) {
        Py_DECREF(calls);
        return FALLBACK;
    }
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(calls); j++) {
        PyObject *one = Py_NewRef(PyList_GET_ITEM(calls, j));
        n = plain(one) ? 0 : FALLBACK;
        if (n == 0 && PyDict_CheckExact(one)) {
            if (!str_keys(one)) {
                n = FALLBACK;
            } else {
                PyObject *fn = item(one, s_function);
                if (fn == NULL && PyErr_Occurred()) {
                    n = FAILED;
                } else if (fn != NULL && !plain(fn)) {
                    n = FALLBACK;
                } else if (fn != NULL && PyDict_CheckExact(fn)) {
                    n = function_call(c, fn);
                } else {
                    PyObject *custom = item(one, s_custom);
                    if (custom == NULL && PyErr_Occurred())
                        n = FAILED;
                    else if (custom != NULL && (PyDict_CheckExact(custom) || !plain(custom)))
                        n = FALLBACK;  /* a custom tool call (Codex's apply_patch): the Python's call_parts */
                    Py_XDECREF(custom);
                }
                Py_XDECREF(fn);
            }
        }
        Py_DECREF(one);
        if (n < 0) {
            Py_DECREF(calls);
            return n;
        }
        total += n;
    }
    Py_DECREF(calls);
    return total;
}

/* TokenCounter.message(m), or FALLBACK (the Python counts it) or FAILED. */
static Py_ssize_t message(Counter *c, PyObject *m) {
    if (!PyDict_CheckExact(m) || !str_keys(m))
        return FALLBACK;
    PyObject *role = item(m, s_role);
    if (role == NULL) {
        if (PyErr_Occurred())
            return FAILED;
        role = Py_NewRef(s_empty);
    }
    if (!PyUnicode_CheckExact(role)) {
        Py_DECREF(role);
        return FALLBACK;
    }
    Py_ssize_t n = short_of(c, role);
    Py_DECREF(role);
    if (n < 0)
        return n;
    n += c->per_message;
    PyObject *content = item(m, s_content);
    if (content == NULL && PyErr_Occurred())
        return FAILED;
    int has_content = content != NULL;
    if (content != NULL && content != Py_None) {
        Py_ssize_t k = PyUnicode_CheckExact(content) ? text_of(c, content) : FALLBACK;
        Py_DECREF(content);
        if (k < 0)
            return k;
        n += k;
    } else {
        Py_XDECREF(content);
    }
    if (PyDict_GET_SIZE(m) > (has_content ? 2 : 1)) {
        Py_ssize_t k = extras(c, m);
        if (k < 0)
            return k;
        n += k;
    }
    return n;
}

/* The sum (counts == NULL) or the list of TokenCounter.message over the messages; NotImplemented
 * where a count is beyond MAX_COUNT or messages is not exactly a list. */
static PyObject *count_messages(PyObject *args, int each) {
    PyObject *messages, *whole;
    Counter c;
    if (!PyArg_ParseTuple(args, "OO!O!OOnnnnO", &messages, &PyDict_Type, &c.shorts, &PyDict_Type, &c.memo,
                          &c.text, &c.short_, &c.min_chars, &c.per_message, &c.per_name, &c.per_call, &whole))
        return NULL;
    if (!PyList_CheckExact(messages))
        Py_RETURN_NOTIMPLEMENTED;
    Py_INCREF(messages);
    Py_INCREF(c.shorts);
    Py_INCREF(c.memo);
    Py_ssize_t total = 0;
    PyObject *result = NULL, *counts = each ? PyList_New(0) : NULL;
    if (each && counts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *m = Py_NewRef(PyList_GET_ITEM(messages, i));
        Py_ssize_t n = message(&c, m);
        if (n == FALLBACK)
            n = count_from(PyObject_CallOneArg(whole, m));
        Py_DECREF(m);
        if (n == GIVE_BACK || (n >= 0 && total > PY_SSIZE_T_MAX / 2))
            goto give_back;
        if (n < 0)
            goto done;
        total += n;
        if (each) {
            PyObject *k = PyLong_FromSsize_t(n);
            int bad = k == NULL || PyList_Append(counts, k) < 0;
            Py_XDECREF(k);
            if (bad)
                goto done;
        }
    }
    result = each ? Py_NewRef(counts) : PyLong_FromSsize_t(total);
    goto done;
give_back:
    result = Py_NewRef(Py_NotImplemented);
done:
    Py_DECREF(messages);
    Py_DECREF(c.shorts);
    Py_DECREF(c.memo);
    Py_XDECREF(counts);
    return result;
}

static PyObject *conversation(PyObject *self, PyObject *args) { return count_messages(args, 0); }

static PyObject *each(PyObject *self, PyObject *args) { return count_messages(args, 1); }

static PyMethodDef methods[] = {
    {"conversation", conversation, METH_VARARGS,
     "The sum of TokenCounter.message over a list of messages, from the counter's memos."},
    {"each", each, METH_VARARGS, "TokenCounter.message of each message of a list, from the counter's memos."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_count", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__count(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_role, "role"); INTERN(s_content, "content"); INTERN(s_name, "name");
    INTERN(s_reasoning, "reasoning"); INTERN(s_reasoning_content, "reasoning_content");
    INTERN(s_tool_calls, "tool_calls"); INTERN(s_function, "function"); INTERN(s_arguments, "arguments");
    INTERN(s_custom, "custom"); INTERN(s_empty, "");
    return PyModule_Create(&module);
}
