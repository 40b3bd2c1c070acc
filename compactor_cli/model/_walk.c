/* The record loop's one walk of a conversation's messages, compiled (issue 32).
 *
 * scan() and length() do exactly what conversation.py's _scan and _length do, in C: they are the
 * largest share of tier 1's own work per record on many short messages. They decide on exact
 * types as the Python does (type(x) is dict ...), and give up, returning NotImplemented, on
 * anything they would not decide alike for certain: a value nested deeper than MAX_DEPTH (the
 * Python may then meet its recursion limit, and must be the one to say so), a list subclass, or
 * a dict with a key that is not exactly a str, checked before any lookup in it (comparing such a
 * key runs Python code, which could change or free what the walk holds borrowed; a parsed record
 * never has one). The caller then runs the Python. tests/test_walk_compiled.py holds the two to
 * each other with Hypothesis, and keeps the cases an attack on this file found.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define MAX_DEPTH 200
#define GAVE_UP (-2)

static PyObject *s_role, *s_content, *s_tool_calls, *s_tool_call_id, *s_function_call, *s_type,
    *s_text, *s_id, *s_function, *s_name, *s_arguments, *s_reasoning, *s_reasoning_content,
    *s_assistant, *s_tool;

/* k == s for an exact str k. */
static int key_is(PyObject *k, PyObject *s) { return PyUnicode_Compare(k, s) == 0; }

/* _length(obj) of a dict or list; GAVE_UP deeper than MAX_DEPTH; -1 with an error set. */
static Py_ssize_t length_of(PyObject *obj, PyObject *length_keys, int depth) {
    Py_ssize_t total = 0;
    if (depth > MAX_DEPTH)
        return GAVE_UP;
    if (PyDict_CheckExact(obj)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(obj, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k))
                return GAVE_UP;
            if (PyUnicode_CheckExact(v)) {
                int in = PySet_Contains(length_keys, k);
                if (in < 0)
                    return -1;
                if (in)
                    total += PyUnicode_GET_LENGTH(v);
            } else if (PyDict_CheckExact(v) || PyList_CheckExact(v)) {
                Py_ssize_t n = length_of(v, length_keys, depth + 1);
                if (n < 0)
                    return n;
                total += n;
            }
        }
    } else if (PyList_CheckExact(obj)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(obj); i++) {
            PyObject *x = PyList_GET_ITEM(obj, i);
            if (PyDict_CheckExact(x) || PyList_CheckExact(x)) {
                Py_ssize_t n = length_of(x, length_keys, depth + 1);
                if (n < 0)
                    return n;
                total += n;
            }
        }
    }
    return total;
}

/* Every key of d is exactly a str: looking a str up in d then runs no Python code (no __eq__), so
 * nothing can change or free what the walk holds borrowed. */
static int str_keys(PyObject *d) {
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v))
        if (!PyUnicode_CheckExact(k))
            return 0;
    return 1;
}

/* d.get(key) as a borrowed reference (NULL: absent, or an error is set). */
static PyObject *get(PyObject *d, PyObject *key) { return PyDict_GetItemWithError(d, key); }

/* type(d.get(key)) is str: 1, 0 (absent, or another type), or -1 with an error set. */
static int str_at(PyObject *d, PyObject *key) {
    PyObject *v = get(d, key);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return PyUnicode_CheckExact(v);
}

/* _parts_ok(content): 1, 0, or -1 with an error set. */
static int parts_ok(PyObject *content) {
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(content); i++) {
        PyObject *part = PyList_GET_ITEM(content, i);
        if (!PyDict_CheckExact(part))
            return 0;
        if (!str_keys(part))
            return GAVE_UP;
        PyObject *t = get(part, s_type);
        if (t == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (!PyUnicode_CheckExact(t))
            return 0;
        if (PyUnicode_Compare(t, s_text) == 0) {
            int ok = str_at(part, s_text);
            if (ok <= 0)
                return ok;
        }
    }
    return 1;
}

/* _calls_length(calls); -3 where the Python returns -1 (a call the checks refuse), GAVE_UP, or -1
 * with an error set. */
#define REFUSED (-3)
static Py_ssize_t calls_length(PyObject *calls, PyObject *length_keys) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(calls); i++) {
        PyObject *call = PyList_GET_ITEM(calls, i);
        if (!PyDict_CheckExact(call))
            return REFUSED;
        if (!str_keys(call))
            return GAVE_UP;
        int ok = str_at(call, s_id);
        if (ok <= 0)
            return ok < 0 ? -1 : REFUSED;
        int has = PyDict_Contains(call, s_function);
        if (has < 0)
            return -1;
        if (has) {
            PyObject *fn = get(call, s_function);
            if (fn == NULL)
                return -1;
            if (!PyDict_CheckExact(fn))
                return REFUSED;
            if (!str_keys(fn))
                return GAVE_UP;
            ok = str_at(fn, s_name);
            if (ok <= 0)
                return ok < 0 ? -1 : REFUSED;
            PyObject *args = get(fn, s_arguments);
            if (args == NULL && PyErr_Occurred())
                return -1;
            if (args != NULL && !PyUnicode_CheckExact(args))
                return REFUSED;
        }
        Py_ssize_t n = length_of(call, length_keys, 1);
        if (n < 0)
            return n;
        total += n;
    }
    return total;
}

/* _other_keys(m): REFUSED, GAVE_UP, or -1 with an error set. */
static Py_ssize_t other_keys(PyObject *m, PyObject *length_keys, PyObject *direct) {
    Py_ssize_t total = 0, pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(m, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k))
            return GAVE_UP;
        int in = PySet_Contains(direct, k);
        if (in < 0)
            return -1;
        if (in)
            continue;
        if (PyUnicode_CheckExact(v)) {
            in = PySet_Contains(length_keys, k);
            if (in < 0)
                return -1;
            if (in)
                total += PyUnicode_GET_LENGTH(v);
            continue;
        }
        if (key_is(k, s_name) || (v != Py_None && (key_is(k, s_reasoning) || key_is(k, s_reasoning_content))))
            return REFUSED;
        if (PyDict_CheckExact(v) || PyList_CheckExact(v)) {
            Py_ssize_t n = length_of(v, length_keys, 1);
            if (n < 0)
                return n;
            total += n;
        }
    }
    return total;
}

#define FAIL_IF(cond) do { if (cond) goto error; } while (0)

/* scan(messages, roles, length_keys, direct_keys) -> (length, openai, plain, paired, tools), None
 * (conversation._scan's None), or NotImplemented (run the Python). */
static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *messages, *roles, *length_keys, *direct;
    if (!PyArg_ParseTuple(args, "OO!O!O!", &messages, &PyFrozenSet_Type, &roles,
                          &PyFrozenSet_Type, &length_keys, &PyFrozenSet_Type, &direct))
        return NULL;
    if (!PyList_CheckExact(messages))
        Py_RETURN_NOTIMPLEMENTED;  /* a list subclass: the Python iterates it as it says */
    Py_ssize_t total = 0;
    int openai = 0, plain = 1, paired = 1;
    Py_INCREF(messages);  /* before the first goto: `done` releases it */
    PyObject *open_calls = PySet_New(NULL), *seen = PySet_New(NULL), *tools = PyList_New(0);
    PyObject *result = NULL;
    FAIL_IF(open_calls == NULL || seen == NULL || tools == NULL);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *m = PyList_GET_ITEM(messages, i);
        if (!PyDict_CheckExact(m))
            goto refused;
        if (!str_keys(m))
            goto gave_up;
        PyObject *role = get(m, s_role);
        FAIL_IF(role == NULL && PyErr_Occurred());
        if (role == NULL || !PyUnicode_CheckExact(role))
            goto refused;
        int known = PySet_Contains(roles, role);
        FAIL_IF(known < 0);
        if (!known)
            goto refused;
        int is_assistant = PyUnicode_Compare(role, s_assistant) == 0;
        Py_ssize_t n = PyDict_GET_SIZE(m) - 1;
        PyObject *content = get(m, s_content);
        FAIL_IF(content == NULL && PyErr_Occurred());
        if (content != NULL) {
            n -= 1;
            if (PyUnicode_CheckExact(content)) {
                total += PyUnicode_GET_LENGTH(content);
            } else if (content != Py_None) {
                if (!PyList_CheckExact(content))
                    goto refused;
                int ok = parts_ok(content);
                if (ok == GAVE_UP)
                    goto gave_up;
                FAIL_IF(ok < 0);
                if (!ok)
                    goto refused;
                plain = 0;
                Py_ssize_t len = length_of(content, length_keys, 1);
                if (len == GAVE_UP)
                    goto gave_up;
                FAIL_IF(len < 0);
                total += len;
            }
        }
        PyObject *calls = NULL;
        if (n) {
            calls = get(m, s_tool_calls);
            FAIL_IF(calls == NULL && PyErr_Occurred());
            if (calls == Py_None)
                calls = NULL;
            if (calls != NULL) {
                n -= 1;
                if (!PyList_CheckExact(calls) || !is_assistant)
                    goto refused;
                Py_ssize_t len = calls_length(calls, length_keys);
                if (len == REFUSED)
                    goto refused;
                if (len == GAVE_UP)
                    goto gave_up;
                FAIL_IF(len < 0);
                total += len;
            } else {
                int has = PyDict_Contains(m, s_tool_calls);
                FAIL_IF(has < 0);
                if (has)
                    n -= 1;
            }
            PyObject *cid = get(m, s_tool_call_id);
            FAIL_IF(cid == NULL && PyErr_Occurred());
            if (cid != NULL) {
                n -= 1;
                if (!PyUnicode_CheckExact(cid))
                    goto refused;
            }
            if (n) {
                Py_ssize_t extra = other_keys(m, length_keys, direct);
                if (extra == REFUSED)
                    goto refused;
                if (extra == GAVE_UP)
                    goto gave_up;
                FAIL_IF(extra < 0);
                total += extra;
                int has = PyDict_Contains(m, s_type);
                FAIL_IF(has < 0);
                if (has)
                    plain = 0;
            }
            if (!openai) {
                int has = PyDict_Contains(m, s_tool_calls);
                if (has == 0)
                    has = PyDict_Contains(m, s_tool_call_id);
                if (has == 0)
                    has = PyDict_Contains(m, s_function_call);
                FAIL_IF(has < 0);
                if (has)
                    openai = 1;
            }
        }
        if (PyUnicode_Compare(role, s_tool) == 0) {
            openai = 1;
            PyObject *index = PyLong_FromSsize_t(i);
            FAIL_IF(index == NULL);
            int bad = PyList_Append(tools, index);
            Py_DECREF(index);
            FAIL_IF(bad < 0);
            if (paired) {
                PyObject *cid = get(m, s_tool_call_id);
                FAIL_IF(cid == NULL && PyErr_Occurred());
                int found = cid == NULL ? 0 : PySet_Discard(open_calls, cid);
                FAIL_IF(found < 0);
                if (!found)
                    paired = 0;
            }
            continue;
        }
        if (paired) {
            if (PySet_GET_SIZE(open_calls)) {
                paired = 0;
            } else if (calls != NULL && PyList_GET_SIZE(calls) && is_assistant) {
                for (Py_ssize_t j = 0; j < PyList_GET_SIZE(calls); j++) {
                    PyObject *id = get(PyList_GET_ITEM(calls, j), s_id);  /* a str: calls_length checked */
                    FAIL_IF(id == NULL);
                    int dup = PySet_Contains(seen, id);
                    FAIL_IF(dup < 0);
                    if (dup) {
                        paired = 0;
                        break;
                    }
                    FAIL_IF(PySet_Add(seen, id) < 0 || PySet_Add(open_calls, id) < 0);
                }
            }
        }
    }
    result = Py_BuildValue("(nNNNO)", total, PyBool_FromLong(openai), PyBool_FromLong(plain),
                           PyBool_FromLong(paired && PySet_GET_SIZE(open_calls) == 0), tools);
    goto done;
refused:
    result = Py_NewRef(Py_None);
    goto done;
gave_up:
    result = Py_NewRef(Py_NotImplemented);
    goto done;
error:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "the compiled walk failed without an error");
done:
    Py_DECREF(messages);
    Py_XDECREF(open_calls);
    Py_XDECREF(seen);
    Py_XDECREF(tools);
    return result;
}

/* Append pointer, then message (both new strs, or NULL with an error set) to out: 0, or -1 with an
 * error set. Flat, no tuple: a str is not tracked by the cyclic collector, so making one never
 * runs a collection (on 3.11 a tuple's allocation can, and with it any __del__, while the walk
 * holds borrowed references). */
static int problem(PyObject *out, PyObject *pointer, PyObject *message) {
    int bad = (pointer && message) ? (PyList_Append(out, pointer) < 0 || PyList_Append(out, message) < 0) : 1;
    Py_XDECREF(pointer);
    Py_XDECREF(message);
    return bad ? -1 : 0;
}

/* The "has no result" problems of the calls still open, in call order; the dict is emptied. */
static int close_calls(PyObject *out, PyObject *open_calls, PyObject *pending) {
    Py_ssize_t pos = 0;
    PyObject *cid, *unused;
    while (PyDict_Next(open_calls, &pos, &cid, &unused)) {
        PyObject *at = PyDict_GetItemWithError(pending, cid);  /* set with the call */
        if (at == NULL)
            return -1;
        if (problem(out, PyUnicode_FromFormat("/messages/%S", at),
                    PyUnicode_FromFormat("tool call %R has no result", cid)) < 0)
            return -1;
    }
    PyDict_Clear(open_calls);
    return 0;
}

/* pairing(messages) -> [pointer, message, pointer, message, ...] of checks.check_pairing, in its
 * order, or
 * NotImplemented (run the Python) on anything but what a walk without shape errors leaves: a list
 * of dicts with str keys, str roles, str tool_call_ids, tool_calls lists of dicts with str ids.
 * Only exact strs are hashed and compared: no Python code runs while references are borrowed. */
static PyObject *pairing(PyObject *self, PyObject *messages) {
    if (!PyList_CheckExact(messages))
        Py_RETURN_NOTIMPLEMENTED;
    Py_INCREF(messages);
    PyObject *out = PyList_New(0), *open_calls = PyDict_New(), *pending = PyDict_New(), *seen = PySet_New(NULL);
    PyObject *result = NULL;
    FAIL_IF(out == NULL || open_calls == NULL || pending == NULL || seen == NULL);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(messages); i++) {
        PyObject *m = PyList_GET_ITEM(messages, i);
        if (!PyDict_CheckExact(m) || !str_keys(m))
            goto gave_up;
        PyObject *role = get(m, s_role);
        FAIL_IF(role == NULL && PyErr_Occurred());
        if (role == NULL || !PyUnicode_CheckExact(role))
            goto gave_up;
        if (PyUnicode_Compare(role, s_tool) == 0) {
            PyObject *cid = get(m, s_tool_call_id);
            FAIL_IF(cid == NULL && PyErr_Occurred());
            if (cid == NULL || cid == Py_None) {
                FAIL_IF(problem(out, PyUnicode_FromFormat("/messages/%zd", i), PyUnicode_FromString(
                    "tool message has no tool_call_id; it cannot be paired or fetched back")) < 0);
                continue;
            }
            if (!PyUnicode_CheckExact(cid))
                goto gave_up;
            int found = PyDict_Contains(open_calls, cid);
            FAIL_IF(found < 0);
            if (found) {
                FAIL_IF(PyDict_DelItem(open_calls, cid) < 0);
            } else {
                FAIL_IF(problem(out, PyUnicode_FromFormat("/messages/%zd/tool_call_id", i), PyUnicode_FromFormat(
                    "tool result %R answers no call of the assistant message before it", cid)) < 0);
            }
            continue;
        }
        FAIL_IF(close_calls(out, open_calls, pending) < 0);
        if (PyUnicode_Compare(role, s_assistant) != 0)
            continue;
        PyObject *calls = get(m, s_tool_calls);
        FAIL_IF(calls == NULL && PyErr_Occurred());
        if (calls == NULL || calls == Py_None)
            continue;
        if (!PyList_CheckExact(calls))
            goto gave_up;
        PyObject *index = PyLong_FromSsize_t(i);
        FAIL_IF(index == NULL);
        for (Py_ssize_t j = 0; j < PyList_GET_SIZE(calls); j++) {
            PyObject *call = PyList_GET_ITEM(calls, j);
            PyObject *cid = (PyDict_CheckExact(call) && str_keys(call)) ? get(call, s_id) : NULL;
            if (cid == NULL || !PyUnicode_CheckExact(cid)) {
                Py_DECREF(index);
                if (PyErr_Occurred())
                    goto error;
                goto gave_up;
            }
            int dup = PySet_Contains(seen, cid);
            if (dup > 0 && problem(out, PyUnicode_FromFormat("/messages/%zd/tool_calls/%zd/id", i, j),
                                   PyUnicode_FromFormat("tool-call ID %R is used again", cid)) < 0)
                dup = -1;
            if (dup < 0 || PySet_Add(seen, cid) < 0 || PyDict_SetItem(pending, cid, index) < 0 ||
                PyDict_SetItem(open_calls, cid, Py_None) < 0) {
                Py_DECREF(index);
                goto error;
            }
        }
        Py_DECREF(index);
    }
    FAIL_IF(close_calls(out, open_calls, pending) < 0);
    result = Py_NewRef(out);
    goto done;
gave_up:
    result = Py_NewRef(Py_NotImplemented);
    goto done;
error:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_SystemError, "the compiled pairing check failed without an error");
done:
    Py_DECREF(messages);
    Py_XDECREF(out);
    Py_XDECREF(open_calls);
    Py_XDECREF(pending);
    Py_XDECREF(seen);
    return result;
}

/* length(obj, length_keys) -> _length(obj), or NotImplemented (run the Python). */
static PyObject *length(PyObject *self, PyObject *args) {
    PyObject *obj, *length_keys;
    if (!PyArg_ParseTuple(args, "OO!", &obj, &PyFrozenSet_Type, &length_keys))
        return NULL;
    Py_ssize_t n = length_of(obj, length_keys, 0);
    if (n == GAVE_UP)
        return Py_NewRef(Py_NotImplemented);
    if (n < 0)
        return NULL;
    return PyLong_FromSsize_t(n);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS, "conversation._scan, compiled: a tuple, None, or NotImplemented."},
    {"length", length, METH_VARARGS, "conversation._length, compiled: an int, or NotImplemented."},
    {"pairing", pairing, METH_O, "checks.check_pairing, compiled: [pointer, message, ...], or NotImplemented."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_walk", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__walk(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_role, "role"); INTERN(s_content, "content"); INTERN(s_tool_calls, "tool_calls");
    INTERN(s_tool_call_id, "tool_call_id"); INTERN(s_function_call, "function_call");
    INTERN(s_type, "type"); INTERN(s_text, "text"); INTERN(s_id, "id"); INTERN(s_function, "function");
    INTERN(s_name, "name"); INTERN(s_arguments, "arguments"); INTERN(s_reasoning, "reasoning");
    INTERN(s_reasoning_content, "reasoning_content"); INTERN(s_assistant, "assistant"); INTERN(s_tool, "tool");
    return PyModule_Create(&module);
}
