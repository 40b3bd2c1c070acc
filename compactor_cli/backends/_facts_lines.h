/* error_lines' and has_word's reads of a text for one width of str: CHAR is Py_UCS1, Py_UCS2 or
 * Py_UCS4, and F(name) names this width's copy (_facts.c includes this file once for each, the
 * Py_UCS4 copy first: a tagged line of any width is read from a Py_UCS4 buffer). */

/* The end of the line that starts at a (the next "\n", or n); *tagged: whether it holds a "<". */
static Py_ssize_t F(line_end)(const CHAR *s, Py_ssize_t a, Py_ssize_t n, int *tagged) {
    if (sizeof(CHAR) == 1) { /* memchr, twice, beats one loop over both */
        const void *hit = a < n ? memchr(s + a, '\n', (size_t)(n - a)) : NULL;
        Py_ssize_t b = hit ? (const CHAR *)hit - s : n;
        *tagged = a < b && memchr(s + a, '<', (size_t)(b - a)) != NULL;
        return b;
    }
    int seen = 0;
    for (; a < n && s[a] != '\n'; a++)
        seen |= s[a] == '<';
    *tagged = seen;
    return a;
}

/* Whether one of the words read last (read_words) begins at p of [a, b) of s, taken as a whole
 * text (nothing before a or from b on counts as a word character); f: fold(s[p]). */
static inline int F(word_at)(const CHAR *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t p, Py_UCS4 f) {
    unsigned long long m = is_lower(f) ? words_by_first[f - 'a'] : 0;
    if (!m || (p > a && is_word(s[p - 1])))
        return 0;
    for (; m; m &= m - 1) {
        int w = lowest_bit(m);
        Py_ssize_t len = word_len[w], i = 1;
        if (b - p < len)
            continue;
        while (i < len && fold(s[p + i]) == (Py_UCS4)(unsigned char)word_text[w][i])
            i++;
        if (i == len && (p + len == b || !is_word(s[p + len])))
            return 1;
    }
    return 0;
}

/* Whether one of the words read last is in [a, b) of s, taken as a whole text. */
static int F(words_in)(const CHAR *s, Py_ssize_t a, Py_ssize_t b) {
    for (Py_ssize_t p = a; p < b; p++)
        if (F(word_at)(s, a, b, p, fold(s[p])))
            return 1;
    return 0;
}

/* The line [a, b) of s with its tags removed, as re.sub(r"</?[\w-]+>", "", line) removes them,
 * into buf (room for b - a characters); returns its length. */
static Py_ssize_t F(untag)(const CHAR *s, Py_ssize_t a, Py_ssize_t b, Py_UCS4 *buf) {
    Py_ssize_t n = 0, p = a;
    while (p < b) {
        if (s[p] == '<') {
            Py_ssize_t q = p + 1 < b && s[p + 1] == '/' ? p + 2 : p + 1, name = q;
            while (q < b && (is_word(s[q]) || s[q] == '-'))
                q++;
            if (q > name && q < b && s[q] == '>') {
                p = q + 1;
                continue;
            }
        }
        buf[n++] = s[p++];
    }
    return n;
}

/* Whether the line [a, b) of s (its tags removed), stripped, is listed (see error_lines). */
static int F(listed)(const CHAR *s, Py_ssize_t a, Py_ssize_t b, const Lines *ln) {
    while (a < b && is_space(s[a]))
        a++;
    while (b > a && is_space(s[b - 1]))
        b--;
    if (a == b)
        return 0;
    if (s[a] < 128 && ln->start[s[a]])
        return 1;
    int words = b - a <= ln->word_max;
    for (Py_ssize_t p = a; p < b; p++) {
        Py_UCS4 c = s[p];
        if (c < 128) {
            for (unsigned int m = ln->by_first[c]; m; m &= m - 1) {
                int k = lowest_bit(m);
                Py_ssize_t len = ln->len[k], i = 1;
                if (b - p < len)
                    continue;
                while (i < len && s[p + i] == (Py_UCS4)(unsigned char)ln->needle[k][i])
                    i++;
                if (i == len)
                    return 1;
            }
        }
        if (words && F(word_at)(s, a, b, p, fold(c)))
            return 1;
    }
    return 0;
}

/* Appends to out the index of each listed line of s (n characters); 1, or 0 on an error (set).
 * *buf (room for *room characters) holds a tagged line, grown as needed. */
static int F(lines)(const CHAR *s, Py_ssize_t n, const Lines *ln, PyObject *out, Py_UCS4 **buf, Py_ssize_t *room) {
    Py_ssize_t index = 0;
    for (Py_ssize_t a = 0; a <= n; a++, index++) {
        int listed, tagged;
        Py_ssize_t b = F(line_end)(s, a, n, &tagged);
        if (tagged) {
            if (b - a > *room) {
                PyMem_Free(*buf);
                *room = b - a;
                *buf = PyMem_New(Py_UCS4, *room);
                if (*buf == NULL) {
                    PyErr_NoMemory();
                    return 0;
                }
            }
            listed = listed_4(*buf, 0, F(untag)(s, a, b, *buf), ln);
        } else {
            listed = F(listed)(s, a, b, ln);
        }
        if (listed) {
            PyObject *i = PyLong_FromSsize_t(index);
            if (i == NULL || PyList_Append(out, i) < 0) {
                Py_XDECREF(i);
                return 0;
            }
            Py_DECREF(i);
        }
        a = b;
    }
    return 1;
}
